#!/usr/bin/env bash
# Runs examples/tcp_trainer as two trainer ranks (each publishing only its flat shard) and two examples/tcp_worker
# processes that assemble every version from both (127.0.0.1, a small model, 3 versions), and checks that each
# worker recomputed, for every version, the whole-model checksum: the sum of the ranks' shard checksums.
# Bounded: 120 s per process.
set -euo pipefail
trainer=$1 worker=$2
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
model=(--hidden 64 --layers 2 --vocab 1000)
timeout 120 "$trainer" --rank 0 --ranks 2 --port 0 --port-file "$dir/port0" --key-file "$dir/key" --workers 2 --steps 2 "${model[@]}" > "$dir/t0.out" &
for _ in $(seq 1 200); do [[ -s "$dir/key" ]] && break; sleep 0.05; done  # rank 0 writes the key both ranks use
timeout 120 "$trainer" --rank 1 --ranks 2 --port 0 --port-file "$dir/port1" --key-file "$dir/key" --workers 2 --steps 2 "${model[@]}" > "$dir/t1.out" &
for f in port0 port1; do
  for _ in $(seq 1 200); do [[ -s "$dir/$f" ]] && break; sleep 0.05; done
  [[ -s "$dir/$f" ]] || { echo "a trainer rank did not start"; cat "$dir"/t*.out; exit 1; }
done
ports="$(cat "$dir/port0"),$(cat "$dir/port1")"
timeout 120 "$worker" --ports "$ports" --key-file "$dir/key" "${model[@]}" > "$dir/w0.out" &
timeout 120 "$worker" --ports "$ports" --key-file "$dir/key" "${model[@]}" > "$dir/w1.out"
wait
cat "$dir"/t0.out "$dir"/t1.out "$dir"/w0.out "$dir"/w1.out
# Per version: rank 0's checksum + rank 1's (mod 2^64) must be what each worker recomputed.
expected=""
for v in 1 2 3; do
  c0=$(sed -n "s/^trainer rank 0: version $v:.*checksum \([0-9a-f]*\)$/\1/p" "$dir/t0.out")
  c1=$(sed -n "s/^trainer rank 1: version $v:.*checksum \([0-9a-f]*\)$/\1/p" "$dir/t1.out")
  [[ -n $c0 && -n $c1 ]] || { echo "version $v missing from a trainer rank"; exit 1; }
  expected+="$v $(printf '%016x' $(( 0x$c0 + 0x$c1 )))"$'\n'
done
for w in w0 w1; do
  got=$(sed -n 's/^worker: version \([0-9]*\) applied.*checksum \([0-9a-f]*\), recomputed \([0-9a-f]*\): OK$/\1 \2/p' "$dir/$w.out")
  [[ "$got"$'\n' == "$expected" ]] || { echo "$w: checksums differ:"; echo "$expected"; echo "--"; echo "$got"; exit 1; }
done
echo "sharded tcp example: 2 trainer ranks -> 2 workers, 3 versions, both workers bit-identical to the ranks' shards"
