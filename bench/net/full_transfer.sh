#!/usr/bin/env bash
# Full transfer at memory speed (issue 14): a puller that holds nothing pulls a MIB-MiB model from
# `sparsesync serve` over loopback; compared with `cp` of the same checkpoint in the same run. Reports the
# pull's wall time (connect, full transfer, verify, write + fsync of OUT) and each side's peak memory (VmHWM
# and peak anonymous RSS, sampled every 20 ms), as JSON on stdout.
#   bench/net/full_transfer.sh SPARSESYNC_BINARY [MIB] [WORKDIR]
# AUTH="--insecure-no-auth" runs both sides without the key (no per-frame HMAC), to show the MAC's share.
set -euo pipefail
BIN=$(realpath "$1"); MIB=${2:-1024}; WORK=${3:-$(mktemp -d /tmp/full-transfer.XXXXXX)}
mkdir -p "$WORK/watch"; cd "$WORK"
python3 - "$WORK/watch/model.safetensors" "$MIB" <<'PY'
import json, os, struct, sys
out, mib = sys.argv[1], int(sys.argv[2])
n = mib << 20
hdr = json.dumps({"w": {"dtype": "BF16", "shape": [n // 2], "data_offsets": [0, n]}}).encode()
hdr += b" " * ((8 - len(hdr) % 8) % 8)
block = os.urandom(1 << 24)  # incompressible weights (a full transfer cannot be smaller than the model)
tmp = out + ".tmp"
with open(tmp, "wb") as f:
    f.write(struct.pack("<Q", len(hdr))); f.write(hdr)
    for _ in range(n // len(block)): f.write(block)
os.rename(tmp, out)
PY
python3 -c "import os;print(os.urandom(32).hex())" > key; chmod 600 key
cat watch/model.safetensors > /dev/null  # both the copy and the server read it from the page cache

# peak VmHWM and RssAnon (KiB) of a pid until it exits or $2 appears; one python process reading /proc every
# 20 ms (a shell loop forking awk and sleep 100 times a second took a good part of a core from the pull)
sample() {
  python3 - "$1" "$2" <<'PY'
import os, sys, time
pid, stop = sys.argv[1], sys.argv[2]
hwm = anon = 0
while not os.path.exists(stop):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:") and "Z" in line.split()[1]: raise ProcessLookupError
                if line.startswith("VmHWM:"): hwm = max(hwm, int(line.split()[1]))
                elif line.startswith("RssAnon:"): anon = max(anon, int(line.split()[1]))
    except (FileNotFoundError, ProcessLookupError, ValueError):
        break
    time.sleep(0.02)
print(hwm, anon)
PY
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)  # others' work on the machine (before this run's own)
t0=$(date +%s.%N); cp watch/model.safetensors copy.safetensors; sync copy.safetensors; t1=$(date +%s.%N)
cp_s=$(printf '%.3f' "$(echo "$t1 - $t0" | bc)"); rm -f copy.safetensors

AUTH=${AUTH:---key-file key}
# shellcheck disable=SC2086
"$BIN" serve --listen 127.0.0.1:0 --port-file port --watch watch $AUTH 2> serve.err &
SERVE=$!
sample "$SERVE" serve.stop > serve.mem &
SAMPLER=$!
for _ in $(seq 1 600); do [ -s port ] && grep -q . port && break; sleep 0.05; done
PORT=$(cat port)
# serve publishes the checkpoint at start: measure a new worker's pull from a running server
for _ in $(seq 1 1200); do grep -q "version 1 <- " serve.err && break; sleep 0.05; done
# CPU seconds: every process's (from /proc/stat), serve's (from /proc/PID/stat) and pull's (from /usr/bin/time):
# what the others took meanwhile shows whether this run had the machine to itself.
busy() { awk '/^cpu /{print ($2 + $3 + $4 + $7 + $8) / 100}' /proc/stat; }
proc_cpu() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
busy0=$(busy); serve0=$(proc_cpu "$SERVE")
t0=$(date +%s.%N)
# shellcheck disable=SC2086
/usr/bin/time -f "%U %S" -o pull.time "$BIN" pull "127.0.0.1:$PORT" -o out.safetensors $AUTH > pull.out 2> pull.err &
PULL=$!
for _ in $(seq 1 200); do PULL_CHILD=$(pgrep -P "$PULL" || true); [ -n "$PULL_CHILD" ] && break; sleep 0.01; done
pull_mem=$(sample "${PULL_CHILD:-$PULL}" pull.stop)  # pull itself, not /usr/bin/time
wait "$PULL"; t1=$(date +%s.%N)
busy1=$(busy); serve1=$(proc_cpu "$SERVE")
read -r pu ps < pull.time
pull_cpu=$(printf '%.2f' "$(echo "$pu + $ps" | bc)"); serve_cpu=$(printf '%.2f' "$(echo "$serve1 - $serve0" | bc)")
others_cpu=$(printf '%.2f' "$(echo "$busy1 - $busy0 - $pull_cpu - $serve_cpu" | bc)")
pull_s=$(printf '%.3f' "$(echo "$t1 - $t0" | bc)")
touch serve.stop; wait "$SAMPLER"; kill "$SERVE"; wait "$SERVE" || true
cmp -s out.safetensors watch/model.safetensors && same=true || same=false
read -r serve_hwm serve_anon < serve.mem; read -r pull_hwm pull_anon <<< "$pull_mem"
model_bytes=$(stat -c %s watch/model.safetensors)
cat <<JSON
{"model_mib": $MIB, "model_bytes": $model_bytes, "auth": "$AUTH", "load_average_before": "$load_before",
 "cp_seconds": $cp_s, "pull_seconds": $pull_s, "pull_cpu_seconds": $pull_cpu, "serve_cpu_seconds_during_pull": $serve_cpu,
 "others_cpu_seconds_during_pull": $others_cpu,
 "pull_over_cp": $(printf '%.2f' "$(echo "scale=4; $pull_s / $cp_s" | bc)"), "identical": $same,
 "serve_peak_rss_kib": $serve_hwm, "serve_peak_anon_kib": $serve_anon, "pull_peak_rss_kib": $pull_hwm, "pull_peak_anon_kib": $pull_anon,
 "serve_publish_line": "$(grep -m1 'version 1 <- ' serve.err | sed 's/"/\\"/g')",
 "pull_line": $(cat pull.out | head -1)}
JSON
[ -n "${KEEP:-}" ] || rm -rf "$WORK"
