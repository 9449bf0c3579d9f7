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

# Rebuilds only what changed: scikit-build-core keeps its CMake build in build/python/.
"$py" -m pip install -q --disable-pip-version-check ".[test]"
"$py" -m pytest -q -p no:cacheprovider tests/python
