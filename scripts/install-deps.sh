#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build and test sparsesync. Idempotent; does nothing
# when everything is already there. Set SPARSESYNC_NO_INSTALL=1 to only report what is missing.
set -euo pipefail

debs=(build-essential cmake ninja-build pkg-config
      libxxhash-dev doctest-dev libcli11-dev nlohmann-json3-dev
      libboost-dev libssl-dev openssl libucx-dev ucx-utils libzstd-dev
      iproute2 python3 python3-venv python3-dev clang)

missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ "${SPARSESYNC_NO_INSTALL:-0}" == 1 ]]; then
    echo "missing packages: ${missing[*]}" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# libFuzzer's runtime (scripts/fuzz_ci.sh, run by .ci/run) comes with clang's compiler-rt package of the same major version,
# which clang only recommends.
clang_major=$(clang --version 2>/dev/null | sed -nE 's/.*clang version ([0-9]+).*/\1/p' | head -n 1)
if [[ -n $clang_major ]] && ! dpkg-query -W -f='${Status}' "libclang-rt-$clang_major-dev" 2>/dev/null | grep -q "install ok installed"; then
  if [[ "${SPARSESYNC_NO_INSTALL:-0}" == 1 ]]; then
    echo "missing package: libclang-rt-$clang_major-dev (libFuzzer)" >&2
  else
    sudo_cmd=()
    [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "libclang-rt-$clang_major-dev" ||
      echo "warning: could not install libclang-rt-$clang_major-dev; the fuzz harnesses will not be built" >&2
  fi
fi

# NCCL's headers are not packaged by Debian; NVIDIA's wheel carries them. Only useful where nvcc exists.
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  if ! [[ -f /usr/include/nccl.h ]] && ! python3 -c 'import nvidia.nccl' >/dev/null 2>&1; then
    if [[ "${SPARSESYNC_NO_INSTALL:-0}" != 1 ]]; then
      echo "installing NCCL headers (pip: nvidia-nccl-cu13)"
      python3 -m pip install -q nvidia-nccl-cu13 || python3 -m pip install -q --break-system-packages nvidia-nccl-cu13 ||
        echo "warning: could not install nvidia-nccl-cu13; the NCCL transport will not be built" >&2
    fi
  fi
fi
