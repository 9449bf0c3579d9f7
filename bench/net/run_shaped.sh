#!/usr/bin/env bash
# The shaped-link benchmark (docs: bench/results/net-shaped-link.md). As root: two network namespaces joined
# by a point-to-point link of two TUN devices, net_delay_line adding DELAY_MS each way (this kernel has no
# sch_netem), `tc tbf` shaping each direction to each rate in RATES; link_bench's worker runs in one namespace,
# its trainer in the other. The namespaces are deleted at the end, also on failure or interruption.
# Traffic stays between the two namespaces' own addresses (10.231.x.1 <-> 10.231.x.2).
# BENCH=gpu_link_bench runs the same link with the weights on GPUs (the GPU codec at both ends; on a machine with
# two GPUs the worker takes the second: WORKER_ENV="CUDA_VISIBLE_DEVICES=1") and writes net-shaped-link-gpu.*.
#
#   sudo bench/net/run_shaped.sh BUILD_DIR [RESULTS_DIR]
#   env: RATES="1gbit 10gbit"  DELAY_MS=5  MODEL="--hidden 768 --layers 12 --vocab 50257"  WARMUP=20  VERSIONS=5
#        BUCKET_BYTES=16777216  BENCH=link_bench|gpu_link_bench  TRAINER_ENV=  WORKER_ENV=  NAME=net-shaped-link[-gpu]
#        TRAINER_ARGS=  (more trainer options, e.g. "--encoder rice" for gpu_link_bench)
set -euo pipefail
[[ $EUID -eq 0 ]] || { echo "run_shaped.sh: needs root (network namespaces, tc, TUN devices)" >&2; exit 1; }
build=${1:?usage: run_shaped.sh BUILD_DIR [RESULTS_DIR]}
results=${2:-$(dirname "$0")/../results}
bench=$build/bench/net
BENCH=${BENCH:-link_bench}
case $BENCH in
  link_bench) kind=cpu ;;
  gpu_link_bench) kind=gpu ;;
  *) echo "BENCH: link_bench or gpu_link_bench" >&2; exit 1 ;;
esac
NAME=${NAME:-$([[ $kind == gpu ]] && echo net-shaped-link-gpu || echo net-shaped-link)}
TRAINER_ENV=${TRAINER_ENV:-}
TRAINER_ARGS=${TRAINER_ARGS:-}
WORKER_ENV=${WORKER_ENV:-}
[[ -x $bench/$BENCH && -x $bench/net_delay_line ]] || { echo "build $BENCH and net_delay_line in $build first" >&2; exit 1; }
RATES=${RATES:-"1gbit 10gbit"}
DELAY_MS=${DELAY_MS:-5}
MODEL=${MODEL:-"--hidden 768 --layers 12 --vocab 50257"}
WARMUP=${WARMUP:-20}
VERSIONS=${VERSIONS:-5}
BUCKET_BYTES=${BUCKET_BYTES:-16777216}

ns_t=ssbench_t$$ ns_w=ssbench_w$$          # per-run names: never touch another run's namespaces
dev_t=sst$$ dev_w=ssw$$
addr_t=10.231.$(( $$ % 200 )).1 addr_w=10.231.$(( $$ % 200 )).2
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns del "$ns_t" 2>/dev/null || true
  ip netns del "$ns_w" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns_t"
ip netns add "$ns_w"
for ns in "$ns_t" "$ns_w"; do
  ip -n "$ns" link set lo up
  # Let TCP grow its windows to the path's bandwidth-delay product (12.5 MB at 10 Gbit/s, 10 ms), and not
  # restart slow start after the idle time between versions (a trainer computes between two pushes).
  ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_rmem="4096 131072 67108864" net.ipv4.tcp_wmem="4096 131072 67108864" \
    net.ipv4.tcp_slow_start_after_idle=0
done
ip -n "$ns_t" tuntap add dev "$dev_t" mode tun
ip -n "$ns_w" tuntap add dev "$dev_w" mode tun
ip -n "$ns_t" addr add "$addr_t" peer "$addr_w" dev "$dev_t"
ip -n "$ns_w" addr add "$addr_w" peer "$addr_t" dev "$dev_w"
ip -n "$ns_t" link set "$dev_t" mtu 64000 up   # 64 KB packets, like GSO on a veth: fewer packets to forward
ip -n "$ns_w" link set "$dev_w" mtu 64000 up
timeout 7200 "$bench/net_delay_line" --ns-a "$ns_t" --dev-a "$dev_t" --ns-b "$ns_w" --dev-b "$dev_w" --delay-ms "$DELAY_MS" \
  --max-seconds 7000 > "$tmp/delay_line.log" 2>&1 &
pids+=($!)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/key"
chmod 600 "$tmp/key"
sleep 0.5

load_at_start=$(cut -d' ' -f1 /proc/loadavg)
rtt_ms=$(awk -v d="$DELAY_MS" 'BEGIN { print 2 * d }')
runs=()
for rate in $RATES; do
  case $rate in
    *gbit) gbit=${rate%gbit} ;;
    *mbit) gbit=$(awk -v m="${rate%mbit}" 'BEGIN { print m / 1000 }') ;;
    *) echo "rate $rate: use Nmbit or Ngbit" >&2; exit 1 ;;
  esac
  burst=$(awk -v g="$gbit" 'BEGIN { print (g > 1 ? "1mb" : "256kb") }')
  ip netns exec "$ns_t" tc qdisc replace dev "$dev_t" root tbf rate "$rate" burst "$burst" latency 50ms
  ip netns exec "$ns_w" tc qdisc replace dev "$dev_w" root tbf rate "$rate" burst "$burst" latency 50ms
  echo "== $rate, ${DELAY_MS} ms each way (tbf burst $burst)"
  # shellcheck disable=SC2086
  timeout 3600 ip netns exec "$ns_w" env $WORKER_ENV "$bench/$BENCH" worker --listen "$addr_w:29700" --key-file "$tmp/key" \
    --log "$tmp/worker-$rate.jsonl" --max-seconds 3500 > "$tmp/worker-$rate.log" 2>&1 &
  worker=$!
  pids+=($worker)
  # shellcheck disable=SC2086
  timeout 3600 ip netns exec "$ns_t" env $TRAINER_ENV "$bench/$BENCH" trainer --connect "$addr_w:29700" --key-file "$tmp/key" \
    --out "$tmp/run-$rate.json" --label "$rate" --rate-gbit "$gbit" --rtt-ms "$rtt_ms" $MODEL --warmup "$WARMUP" \
    --versions "$VERSIONS" --bucket-bytes "$BUCKET_BYTES" $TRAINER_ARGS
  wait "$worker"
  ip netns exec "$ns_t" tc -s qdisc show dev "$dev_t" | sed 's/^/  tc: /'
  runs+=("$tmp/run-$rate.json" "$tmp/worker-$rate.jsonl")
done
kill "${pids[0]}" 2>/dev/null || true
wait "${pids[0]}" 2>/dev/null || true
cat "$tmp/delay_line.log"

mkdir -p "$results"
python3 "$(dirname "$0")/report.py" --kind "$kind" --name "$NAME" --delay-ms "$DELAY_MS" --load-at-start "$load_at_start" \
  --out-json "$results/$NAME.json" --out-md "$results/$NAME.md" "${runs[@]}"
echo "wrote $results/$NAME.json and $results/$NAME.md"
