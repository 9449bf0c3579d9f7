#!/usr/bin/env bash
# Builds the Python package (pip install ".[test]": scikit-build-core + nanobind from PyPI) into a virtual
# environment under build/, so the system Python is left alone, and runs its tests (tests/python).
# Needs what scripts/install-deps.sh installs (the xxHash header, cmake, a compiler, python3 with venv and
# headers). SPARSESYNC_PYENV picks another environment folder.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${SPARSESYNC_PYENV:-build/pyenv}
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv" || {
    echo "python_test.sh: could not create a virtual environment (Debian: apt-get install python3-venv)" >&2
    exit 1
  }
fi
py=$venv/bin/python

# The build requirements of pyproject.toml, in the venv and without build isolation: a rerun then finds the
# same nanobind and rebuilds only what changed in build/python/ (isolation would rebuild everything).
"$py" -m pip install -q --disable-pip-version-check "scikit-build-core>=0.10" "nanobind>=2.2"
# Without a GPU the package is built without its GPU endpoints (about 90 s less on a 2-core machine): their
# tests then skip, saying so. scripts/gpu_python_run.sh builds and tests them on a GPU machine;
# SPARSESYNC_PYTHON_CUDA=1 builds them here anyway (CUDA code as unoptimized PTX: checked, not run).
cuda_settings=()
if ! nvidia-smi -L > /dev/null 2>&1; then
  if [[ ${SPARSESYNC_PYTHON_CUDA:-0} == 1 ]]; then
    cuda_settings=(--config-settings=cmake.define.SPARSESYNC_ENABLE_CUDA=ON --config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES=90-virtual
                   "--config-settings=cmake.define.CMAKE_CUDA_FLAGS=-Xcicc -O0")
  else
    cuda_settings=(--config-settings=cmake.define.SPARSESYNC_ENABLE_CUDA=OFF)
    echo "python_test.sh: no GPU found (nvidia-smi -L): the package is built without GPU endpoints, their tests skip (SPARSESYNC_PYTHON_CUDA=1 builds them)"
  fi
fi
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation "${cuda_settings[@]}" ".[test]"
"$py" -m pytest -q -p no:cacheprovider tests/python
