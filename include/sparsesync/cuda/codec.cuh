// Umbrella header of the CUDA layer: GPU encode (encode.cuh), GPU verify/apply in place (apply.cuh), and the
// RAII plans (plan.cuh). Include this from .cu files compiled by nvcc; see docs/GPU.md.
#pragma once

#include <sparsesync/cuda/apply.cuh>
#include <sparsesync/cuda/encode.cuh>
#include <sparsesync/cuda/plan.cuh>
