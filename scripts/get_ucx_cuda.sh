#!/usr/bin/env bash
# Fetches a CUDA-enabled UCX (the libucx-cu13 wheel from PyPI: headers, libraries and the CUDA transports) into a
# cache folder, and prints its prefix for -DSPARSESYNC_UCX_ROOT.
#   scripts/get_ucx_cuda.sh [--runtime DIR]
#   --runtime DIR: also copy what a run needs (the libraries and UCX's module folder, stripped, ~20 MB) to DIR,
#                  for a machine without the wheel: run there with LD_LIBRARY_PATH=DIR/lib (UCX finds DIR/lib/ucx).
#   env: UCX_WHEEL (default libucx-cu13), UCX_WHEEL_VERSION (default 1.22.0),
#        SPARSESYNC_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/sparsesync)
set -euo pipefail
wheel=${UCX_WHEEL:-libucx-cu13}
version=${UCX_WHEEL_VERSION:-1.22.0}
cache=${SPARSESYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sparsesync}/ucx-cuda/$version
runtime=""
[[ ${1:-} == --runtime ]] && runtime=${2:?--runtime needs a folder}
if [[ ! -f $cache/libucx/include/ucp/api/ucp.h ]]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$wheel==$version" >&2
  python3 -m zipfile -e "$tmp"/*.whl "$cache" >&2
  chmod -R u+w "$cache"
fi
[[ -f $cache/libucx/lib/ucx/libuct_cuda.so.0 ]] || { echo "get_ucx_cuda.sh: $cache holds no CUDA transports" >&2; exit 1; }
# zipfile keeps no symlinks or modes: the wheel's libraries are copies under every soname; make them executable.
chmod +x "$cache"/libucx/lib/*.so* "$cache"/libucx/lib/ucx/*.so* 2>/dev/null || true
if [[ -n $runtime ]]; then
  mkdir -p "$runtime/lib/ucx"
  for l in libucp libuct libucs libucm libucs_signal; do cp -L "$cache/libucx/lib/$l.so.0" "$runtime/lib/"; done
  for m in libuct_cuda libucm_cuda libuct_cma; do cp -L "$cache/libucx/lib/ucx/$m.so.0" "$runtime/lib/ucx/"; done
  # The CUDA memory hooks' runtime, which the wheel keeps in a folder of its own (found through LD_LIBRARY_PATH).
  cp -L "$cache"/libucx_cu13.libs/libcudart-*.so* "$runtime/lib/"
  strip --strip-unneeded "$runtime"/lib/*.so* "$runtime"/lib/ucx/*.so.0 2>/dev/null || true
  for m in "$runtime"/lib/ucx/*.so.0; do cp "$m" "${m%.0}"; done  # the module loader's names: both
  echo "get_ucx_cuda.sh: runtime in $runtime ($(du -sh "$runtime" | cut -f1))" >&2
fi
echo "$cache/libucx"
