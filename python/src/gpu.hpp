// The optional GPU part of sparsesync._core (gpu.cpp): Publisher and Subscriber for weights in CUDA memory,
// registered by the module where the CUDA engine (sparsesync::cuda_engine) and the TCP transport are built.
#pragma once

#include <nanobind/nanobind.h>

namespace sparsesync::python {
void bind_gpu(nanobind::module_& m);
// diff and apply on CUDA tensors (gpu_codec.cpp), registered by bind_gpu.
void bind_gpu_codec(nanobind::module_& m);
}
