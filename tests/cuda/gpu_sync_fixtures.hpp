// Fixtures of the GPU sync tests: device weights, streams, a test model and RL-like steps (host code: CUDA runtime API only, so the tests that a plain C++
// compiler builds can use them too).
#pragma once

#include <sparsesync/core/layout.hpp>
#include <sparsesync/cuda/cuda_error.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <random>
#include <vector>

namespace sparsesync_test {

namespace sc = sparsesync::cuda;

// One BF16 model's weights in device memory (one allocation, tensors back to back) and its device pointer array.
class device_model {
 public:
  explicit device_model(const sparsesync::model_layout& layout) : layout_(layout) {
    sc::throw_on_cuda_error(cudaMalloc(&data_, layout.numel() * 2), "cudaMalloc");
    std::vector<void*> ptrs;
    for (std::size_t t = 0; t < layout.size(); ++t) ptrs.push_back(static_cast<unsigned char*>(data_) + 2 * layout.first_element(t));
    sc::throw_on_cuda_error(cudaMalloc(reinterpret_cast<void**>(&ptrs_), ptrs.size() * sizeof(void*)), "cudaMalloc");
    sc::throw_on_cuda_error(cudaMemcpy(ptrs_, ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  device_model(const device_model&) = delete;
  device_model& operator=(const device_model&) = delete;
  ~device_model() {
    cudaFree(data_);
    cudaFree(ptrs_);
  }
  void upload(const std::vector<std::uint16_t>& host) {
    sc::throw_on_cuda_error(cudaMemcpy(data_, host.data(), host.size() * 2, cudaMemcpyHostToDevice), "upload");
  }
  [[nodiscard]] std::vector<std::uint16_t> download() const {
    std::vector<std::uint16_t> host(layout_.numel());
    sc::throw_on_cuda_error(cudaMemcpy(host.data(), data_, host.size() * 2, cudaMemcpyDeviceToHost), "download");
    return host;
  }
  [[nodiscard]] void* const* pointers() const { return ptrs_; }

 private:
  const sparsesync::model_layout& layout_;
  void* data_ = nullptr;
  void** ptrs_ = nullptr;
};

// Views of a device_model's tensors (device pointers), as a sender or a device sink takes them.
inline std::vector<sparsesync::tensor_view> device_views(const sparsesync::model_layout& layout, const device_model& m) {
  std::vector<void*> ptrs(layout.size());
  sc::throw_on_cuda_error(cudaMemcpy(ptrs.data(), m.pointers(), ptrs.size() * sizeof(void*), cudaMemcpyDeviceToHost), "read pointers");
  std::vector<sparsesync::tensor_view> v;
  for (std::size_t t = 0; t < layout.size(); ++t) v.push_back({ptrs[t], layout[t].numel(), layout[t].dtype});
  return v;
}

// A CUDA stream that outlives everything declared after it (plans free their memory on their stream).
struct stream_holder {
  stream_holder() { sc::throw_on_cuda_error(cudaStreamCreate(&s), "cudaStreamCreate"); }
  stream_holder(const stream_holder&) = delete;
  stream_holder& operator=(const stream_holder&) = delete;
  ~stream_holder() {
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  }
  cudaStream_t s{};
};

// An RL-like step: ~1% of the elements move by one or two BF16 ULPs (never to the same bits).
inline void step(std::vector<std::uint16_t>& w, std::mt19937_64& rng) {
  for (auto& x : w)
    if (rng() % 100 == 0) x = static_cast<std::uint16_t>(x + 1 + rng() % 2);
}

inline sparsesync::model_layout test_layout() {
  using sparsesync::dtype;
  // Large and tiny tensors, several buckets of 1 MiB (some cut through a tensor).
  return sparsesync::model_layout({{"embed", dtype::bf16, {1000, 700}},
                                   {"norm", dtype::bf16, {700}},
                                   {"proj", dtype::bf16, {700, 1500}},
                                   {"bias", dtype::bf16, {3}},
                                   {"head", dtype::bf16, {333, 700}}});
}

inline std::vector<std::uint16_t> random_weights(std::size_t n) {
  std::mt19937_64 rng(7);
  std::vector<std::uint16_t> w(n);
  for (auto& x : w) x = static_cast<std::uint16_t>(rng());
  return w;
}

}  // namespace sparsesync_test
