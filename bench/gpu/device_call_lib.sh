# Sourced by the device-call scripts under bench/results/gpu-test-runs/: the steps every call repeats. Run from the
# repository root on the lent machine ($OUT set by it). Binaries travel xz-packed in .carry/<name>/bin.tar.xz.
#   call_setup OLD NEW WORKDIR   unpack .carry/OLD and .carry/NEW into $O and $N, the tests into the build tree
#   call_tests NAME:LIMIT ...    each GPU test with its time limit; rc, time and doctest's summary lines
#   call_engine NAME DIR WORKERS COMMIT [ARGS]   one engine_nccl_bench run (7B, 512 MiB buckets, varint, 5 versions)
#   call_tails NAME ...          each run's medians against the dense broadcast, and its version tails
# After them: `call_pack NAME` packs the work directory into $OUT/NAME.tgz and prints the summary.
# The real RL stream (../shared/data beside the checkout) does not travel by itself: copy it to .carry/data and carry
# that path too, and call_setup points gpu_codec_tests' real-stream case at it (else that case skips, and says so).
export NCCL_NVLS_ENABLE=0
G=$(nvidia-smi -L | wc -l)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - t0 ))s" | tee -a "$OUT/summary.txt"; }
call_setup() {
  O=/tmp/call-$1; N=/tmp/call-$2; W=$3; T=/tmp/build-main/tests/cuda
  mkdir -p "$O" "$N" "$W" "$T"
  tar xJf ".carry/$1/bin.tar.xz" -C "$O" && tar xJf ".carry/$2/bin.tar.xz" -C "$N"
  export LD_LIBRARY_PATH=$O/lib:${LD_LIBRARY_PATH:-}
  cp "$N"/engine_nccl_worker "$N"/*_tests "$T"/  # (the kill test starts its worker from the build tree)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$OUT/summary.txt"
  if [ -d .carry/data/rl-gpt2-small-lr1e-6 ]; then
    export SPARSESYNC_DATA_DIR=$PWD/.carry/data/rl-gpt2-small-lr1e-6
  else
    echo "real stream not carried (.carry/data): gpu_codec_tests' real-stream case skips" >> "$OUT/summary.txt"
  fi
}
call_tests() {
  local t n l
  for t in "$@"; do
    n=${t%%:*}; l=${t##*:}; t0=$(date +%s)
    timeout "$l" "$T/$n" --duration=true > "$W/$n.log" 2>&1; stamp "$n" $?
    grep -E "test cases|assertions|ERROR|SKIP" "$W/$n.log" | head -8 >> "$OUT/summary.txt"
  done
}
call_engine() {
  t0=$(date +%s)
  timeout 60 "$2/engine_nccl_bench" --workers "$3" --versions 5 --commit "$4" --configs 512:4:4:2 --encoders varint --json "$W/$1.jsonl" ${5:-} > /dev/null 2>>"$W/$1.err"
  stamp "$1" $?
}
call_tails() {
  local f
  for f in "$@"; do
    [ -f "$W/$f.jsonl" ] || continue
    echo "== $f" >> "$OUT/summary.txt"
    python3 bench/gpu/tail_summary.py --medians "$W/$f.jsonl" >> "$OUT/summary.txt" 2>&1
  done
}
call_pack() {
  gzip -9 "$W"/*.log "$W"/*.err 2>/dev/null
  (cd "$W" && tar czf "$OUT/$1.tgz" ./*) && cat "$OUT/summary.txt"
}
