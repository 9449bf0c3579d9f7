// The GPU side of gpu_engine.cpp (see gpu_side.hpp).
#include "gpu_side.hpp"

#include <sparsesync/cuda/cuda_error.hpp>
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>  // the engine's backends, compiled once (sparsesync::cuda_engine)

#include <cuda_runtime.h>

namespace example_gpu {
namespace sc = sparsesync::cuda;

namespace {
__device__ __forceinline__ std::uint64_t mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
template <int = 0>
__global__ void fill(std::uint16_t* w, std::uint64_t n, std::uint64_t seed) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t h = mix(i ^ seed);
    w[i] = static_cast<std::uint16_t>(((h >> 32) & 0x8000u) | ((118 + (h >> 60) % 6) << 7) | (h & 0x7Fu));
  }
}
template <int = 0>
__global__ void step_kernel(std::uint16_t* w, std::uint64_t n, std::uint64_t step, std::uint64_t threshold) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t h = mix(i * 0x100000001B3ull ^ (step << 48));
    if ((h >> 11) < threshold) w[i] = static_cast<std::uint16_t>(h & 1 ? w[i] + 1 + ((h >> 1) & 1) : w[i] - 1 - ((h >> 1) & 1));
  }
}
template <int = 0>
__global__ void differ(const std::uint16_t* a, const std::uint16_t* b, std::uint64_t n, unsigned long long* count) {
  unsigned long long c = 0;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) c += a[i] != b[i];
  if (c) atomicAdd(count, c);
}
}  // namespace

int device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

gpu_weights::gpu_weights(const sparsesync::model_layout& layout, int device) : layout_(layout), device_(device) {
  sc::throw_on_cuda_error(cudaSetDevice(device_), "cudaSetDevice");
  sc::throw_on_cuda_error(cudaMalloc(&data_, layout.numel() * 2), "cudaMalloc");
  sc::throw_on_cuda_error(cudaMemset(data_, 0, layout.numel() * 2), "cudaMemset");
}
gpu_weights::~gpu_weights() {
  cudaSetDevice(device_);
  cudaFree(data_);
}

std::vector<sparsesync::tensor_view> gpu_weights::views() const {
  std::vector<sparsesync::tensor_view> v;
  for (std::size_t t = 0; t < layout_.size(); ++t)
    v.push_back({static_cast<std::uint16_t*>(data_) + layout_.first_element(t), layout_[t].numel(), layout_[t].dtype});
  return v;
}

void gpu_weights::fill_random(std::uint64_t seed) {
  sc::throw_on_cuda_error(cudaSetDevice(device_), "cudaSetDevice");
  fill<<<1024, 256>>>(static_cast<std::uint16_t*>(data_), layout_.numel(), seed);
  sc::throw_on_cuda_error(cudaDeviceSynchronize(), "fill");
}

void gpu_weights::step(std::uint64_t s, double density) {
  sc::throw_on_cuda_error(cudaSetDevice(device_), "cudaSetDevice");
  step_kernel<<<1024, 256>>>(static_cast<std::uint16_t*>(data_), layout_.numel(), s, static_cast<std::uint64_t>(density * double(1ull << 53)));
  sc::throw_on_cuda_error(cudaDeviceSynchronize(), "step");
}

bool gpu_weights::equals(const gpu_weights& other) const {
  sc::throw_on_cuda_error(cudaSetDevice(device_), "cudaSetDevice");
  const std::size_t bytes = layout_.numel() * 2;
  // The other's weights on this GPU first when they live on another (a kernel may not read a peer's memory).
  void* theirs = other.data_;
  if (other.device_ != device_) {
    sc::throw_on_cuda_error(cudaMalloc(&theirs, bytes), "cudaMalloc");
    sc::throw_on_cuda_error(cudaMemcpyPeer(theirs, device_, other.data_, other.device_, bytes), "cudaMemcpyPeer");
  }
  unsigned long long* d = nullptr;
  sc::throw_on_cuda_error(cudaMalloc(&d, 8), "cudaMalloc");
  cudaMemset(d, 0, 8);
  differ<<<1024, 256>>>(static_cast<const std::uint16_t*>(data_), static_cast<const std::uint16_t*>(theirs), layout_.numel(), d);
  unsigned long long h = 1;
  sc::throw_on_cuda_error(cudaMemcpy(&h, d, 8, cudaMemcpyDeviceToHost), "compare");
  cudaFree(d);
  if (theirs != other.data_) cudaFree(theirs);
  return h == 0;
}

// The legacy default stream orders the encode after the step kernels above (a trainer passes its own stream).
// A backend lives on the GPU current when it is made.
std::unique_ptr<sparsesync::sync::device_encoder_backend> trainer_backend(const gpu_weights& w, bool frames_on_device) {
  sc::throw_on_cuda_error(cudaSetDevice(w.device()), "cudaSetDevice");
  sc::device_source_options o;
  o.frames_on_device = frames_on_device;
  return sc::compiled_device_encoder_backend(o);
}

std::unique_ptr<sparsesync::sync::device_applier_backend> worker_backend(const sparsesync::model_layout& layout, const gpu_weights& w) {
  sc::throw_on_cuda_error(cudaSetDevice(w.device()), "cudaSetDevice");
  const auto views = w.views();
  return sc::compiled_device_applier_backend(layout, views, {});
}

}  // namespace example_gpu
