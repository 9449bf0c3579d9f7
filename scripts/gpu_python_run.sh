#!/usr/bin/env bash
# On the lent GPU machine (torch, transformers, nanobind and scikit-build-core installed; no network): builds
# the Python package with its GPU endpoints (sm_90, optimized) into a folder put first on PYTHONPATH (the
# machine's Python packages may live in a user site that a virtual environment would hide), and runs the whole
# pytest suite, GPU tests included (the RL loop needs two GPUs). The log goes to
# OUT_DIR/python-gpu.log; bench/results/gpu-test-runs/ keeps a copy.
#   scripts/gpu_python_run.sh OUT_DIR [MACHINE_DESCRIPTION] [pytest args]
#   env: XXHASH_INCLUDE (a folder holding xxhash.h, when the system has none), SPARSESYNC_UCX_ROOT (a UCX with
#        include/ and lib/, when the system has no UCX headers: the UCX endpoints are built only with one)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: gpu_python_run.sh OUT_DIR [MACHINE] [pytest args]}
machine=${2:-"(not given)"}
shift $(( $# >= 2 ? 2 : 1 ))
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
site=/tmp/sparsesync-site
py=${PYTHON:-python3}
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
settings=(--config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES=90 --config-settings=build-dir=/tmp/sparsesync-pybuild)
[[ -n ${XXHASH_INCLUDE:-} ]] && settings+=("--config-settings=cmake.define.SPARSESYNC_XXHASH_INCLUDE_DIR=$XXHASH_INCLUDE")
[[ -n ${SPARSESYNC_UCX_ROOT:-} ]] && settings+=("--config-settings=cmake.define.SPARSESYNC_UCX_ROOT=$SPARSESYNC_UCX_ROOT")
( "$py" -c "import scikit_build_core, nanobind; print('build with', scikit_build_core.__file__, nanobind.__file__)" &&
  time "$py" -m pip install -v --no-build-isolation --no-deps --disable-pip-version-check --target "$site" "${settings[@]}" . ) \
  > "$out/python-build.log" 2>&1 || { tail -60 "$out/python-build.log"; exit 2; }
{
  echo "# the Python package on GPUs: pytest, committed as the record of the last such run"
  echo "# date: $(date -u '+%Y-%m-%d %H:%M UTC'), machine: $machine"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv | sed 's/^/#   /'
  "$py" -c "import sparsesync as ss, torch, transformers; print('# sparsesync', ss.__version__, 'HAS_CUDA', ss.HAS_CUDA, '| torch', torch.__version__, '| transformers', transformers.__version__)"
  grep -E "GPU endpoints" "$out/python-build.log" | sed 's/^/# /'
  echo
  cd tests/python && timeout 900 "$py" -m pytest -v -rs -p no:cacheprovider --durations=10 . "$@"
} > "$out/python-gpu.log" 2>&1
rc=$?
tail -40 "$out/python-gpu.log"
exit $rc
