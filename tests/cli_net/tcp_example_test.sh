#!/usr/bin/env bash
# Runs examples/tcp_trainer + examples/tcp_worker on 127.0.0.1 (a small model, 3 versions) and checks that the
# worker recomputed, for every version, the checksum the trainer published. Bounded: 120 s per process.
set -euo pipefail
trainer=$1 worker=$2
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
model=(--hidden 64 --layers 2 --vocab 1000)
timeout 120 "$trainer" --port 0 --port-file "$dir/port" --key-file "$dir/key" --workers 1 --steps 2 "${model[@]}" > "$dir/trainer.out" &
trainer_pid=$!
for _ in $(seq 1 200); do [[ -s "$dir/port" ]] && break; sleep 0.05; done
[[ -s "$dir/port" ]] || { echo "the trainer did not start"; cat "$dir/trainer.out"; exit 1; }
timeout 120 "$worker" --port "$(cat "$dir/port")" --key-file "$dir/key" "${model[@]}" > "$dir/worker.out"
wait "$trainer_pid"
cat "$dir/trainer.out" "$dir/worker.out"
# "version N ... checksum X" from both sides must agree, for versions 1..3.
t=$(sed -n 's/^trainer: version \([0-9]*\):.*checksum \([0-9a-f]*\)$/\1 \2/p' "$dir/trainer.out")
w=$(sed -n 's/^worker: version \([0-9]*\) applied.*checksum \([0-9a-f]*\), recomputed \([0-9a-f]*\): OK$/\1 \2/p' "$dir/worker.out")
[[ $(wc -l <<< "$t") -eq 3 && "$t" == "$w" ]] || { echo "checksums differ:"; echo "$t"; echo "--"; echo "$w"; exit 1; }
echo "tcp example: 3 versions, worker bit-identical to trainer"
