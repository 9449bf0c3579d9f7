#!/usr/bin/env bash
# Many clients at once (issue 14, "200 concurrent pulls" and "50 silent connections"): `sparsesync serve`
# publishes a MIB-MiB checkpoint over loopback with a key; then
#   1. N `pull` processes start at the same moment, with default options (no --retries): how many succeed,
#      how many are bit-identical to the checkpoint, and the wall time until the last one ended;
#   2. S silent TCP connections (connected, never speaking) are opened and held, and one normal pull runs
#      beside them: its exit status and wall time.
# JSON on stdout.
#   bench/net/concurrent_pulls.sh SPARSESYNC_BINARY [N (200)] [S (50)] [MIB (16)] [WORKDIR]
set -euo pipefail
BIN=$(realpath "$1"); N=${2:-200}; S=${3:-50}; MIB=${4:-16}; WORK=${5:-$(mktemp -d /tmp/concurrent-pulls.XXXXXX)}
mkdir -p "$WORK/watch" "$WORK/out"; cd "$WORK"
python3 - "$WORK/watch/model.safetensors" "$MIB" <<'PY'
import json, os, struct, sys
out, mib = sys.argv[1], int(sys.argv[2])
n = mib << 20
hdr = json.dumps({"w": {"dtype": "BF16", "shape": [n // 2], "data_offsets": [0, n]}}).encode()
hdr += b" " * ((8 - len(hdr) % 8) % 8)
with open(out + ".tmp", "wb") as f:
    f.write(struct.pack("<Q", len(hdr))); f.write(hdr); f.write(os.urandom(n))
os.rename(out + ".tmp", out)
PY
python3 -c "import os;print(os.urandom(32).hex())" > key; chmod 600 key
ulimit -n 4096 2>/dev/null || true

"$BIN" serve --listen 127.0.0.1:0 --port-file port --watch watch --key-file key 2> serve.err &
SERVE=$!
trap 'kill $SERVE 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do [ -s port ] && grep -q . port && break; sleep 0.05; done
PORT=$(cat port)
for _ in $(seq 1 1200); do grep -q "version 1 <- " serve.err && break; sleep 0.05; done

# 1. N pulls at once (each its own OUT); the start is one barrier file they all wait on.
pids=()
for i in $(seq 1 "$N"); do
  ( while [ ! -e go ]; do sleep 0.01; done
    t0=$(date +%s.%N)
    rc=0; "$BIN" pull "127.0.0.1:$PORT" -o "out/$i.safetensors" --key-file key > "out/$i.log" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    echo "$rc $(echo "$t1 - $t0" | bc)" > "out/$i.rc" ) &
  pids+=($!)
done
sleep 1
t0=$(date +%s.%N); touch go
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
t1=$(date +%s.%N)
all_s=$(printf '%.3f' "$(echo "$t1 - $t0" | bc)")
ok=0; same=0; failed_codes=""; slowest=0
for i in $(seq 1 "$N"); do
  read -r rc secs < "out/$i.rc"
  if [ "$rc" = 0 ]; then ok=$((ok + 1)); else failed_codes="$failed_codes $rc"; fi
  cmp -s "out/$i.safetensors" watch/model.safetensors && same=$((same + 1))
  slowest=$(echo "if ($secs > $slowest) $secs else $slowest" | bc)
done
rm -f out/*.safetensors

# 2. S silent connections held open, one normal pull beside them.
python3 - "$PORT" "$S" "$BIN" "$WORK" <<'PY' > silent.json
import json, socket, subprocess, sys, time
port, s, binary, work = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(s)]
time.sleep(0.5)  # they are accepted and waiting in their handshakes
t0 = time.monotonic()
p = subprocess.run([binary, "pull", f"127.0.0.1:{port}", "-o", f"{work}/silent-out.safetensors", "--key-file", f"{work}/key"],
                   capture_output=True, text=True)
dt = time.monotonic() - t0
same = open(f"{work}/silent-out.safetensors", "rb").read() == open(f"{work}/watch/model.safetensors", "rb").read() if p.returncode == 0 else False
for c in held: c.close()
print(json.dumps({"silent_connections": s, "pull_exit": p.returncode, "pull_seconds": round(dt, 3), "identical": same}))
PY

cat <<JSON
{"model_mib": $MIB, "pulls": $N, "pulls_succeeded": $ok, "pulls_identical": $same, "failed_exit_codes": "${failed_codes# }",
 "all_pulls_seconds": $all_s, "slowest_pull_seconds": $slowest, "cores": $(nproc),
 "silent": $(cat silent.json)}
JSON
[ -n "${KEEP:-}" ] || rm -rf "$WORK"
