#!/usr/bin/env bash
# What a full transfer of a MIB-MiB model cannot avoid on this machine, stage by stage, beside the yardstick
# of issue 14's target (cp + sync of the checkpoint). JSON on stdout. Each stage alone, on an otherwise idle
# process; a pull runs them all at once on however many cores there are.
#   cp_sync:        cp + sync of the page-cached checkpoint (the target is 3x this)
#   frame_mac:      the transport's frame MAC over the payload (~1.06x the model), once per side (the transport tags
#                   every frame): ChaCha20-Poly1305 (protocol version 2), and version 1's HMAC-SHA256 for comparison
#   tcp_loopback:   the payload through a 127.0.0.1 TCP connection (one copy in, one out; python3, 16 MiB writes)
#   element_hashes: the receiver's two element hashes per element (zero base, target: FORMAT.md §6.4)
#   direct_write:   the model written with O_DIRECT (dd, 16 MiB blocks) and fsynced
#   bench/net/full_transfer_floor.sh BUILD_DIR [MIB] [WORKDIR]
set -euo pipefail
BUILD=$(realpath "$1"); MIB=${2:-1024}; WORK=${3:-$(mktemp -d /tmp/full-transfer-floor.XXXXXX)}
cd "$WORK"
PAYLOAD=$(( (MIB << 20) * 17 / 16 ))  # bitmap + values: 17 bytes of frame per 16 bytes of BF16 weights
now() { date +%s.%N; }
secs() { printf '%.3f' "$(echo "$2 - $1" | bc)"; }

head -c $((MIB << 20)) /dev/urandom > model.bin
cat model.bin > /dev/null
t0=$(now); cp model.bin copy.bin; sync copy.bin; t1=$(now); cp_s=$(secs "$t0" "$t1"); rm -f copy.bin

# 16 MiB frames (a bucket's), best of 3
mac_json=$("$BUILD/bench/net/frame_mac_bench" "$PAYLOAD")

tcp_s=$(python3 - "$PAYLOAD" <<'PY'
import socket, sys, threading, time
total, piece = int(sys.argv[1]), 16 << 20
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def receive():
    c, _ = srv.accept(); buf = bytearray(piece); view = memoryview(buf); left = total
    while left:
        n = c.recv_into(view, min(piece, left))
        if not n: break
        left -= n
    c.close()
t = threading.Thread(target=receive); t.start()
out = socket.create_connection(srv.getsockname()); data = memoryview(bytes(piece))
start = time.perf_counter(); left = total
while left:
    n = min(piece, left); out.sendall(data[:n]); left -= n
out.close(); t.join()
print(f"{time.perf_counter() - start:.3f}")
PY
)

hash_json=$("$BUILD/bench/net/dense_hash_bench" "$MIB")

t0=$(now); dd if=/dev/zero of=direct.bin bs=16M count=$((MIB / 16)) oflag=direct conv=fsync status=none; t1=$(now)
direct_s=$(secs "$t0" "$t1"); rm -f direct.bin model.bin

cat <<JSON
{"model_mib": $MIB, "payload_bytes": $PAYLOAD, "cores": $(nproc), "load_average": "$(cut -d' ' -f1-3 /proc/loadavg)",
 "cp_sync_seconds": $cp_s, "frame_mac_per_side": $mac_json, "tcp_loopback_seconds": $tcp_s,
 "element_hashes": $hash_json, "direct_write_fsync_seconds": $direct_s}
JSON
[ -n "${KEEP:-}" ] || rm -rf "$WORK"
