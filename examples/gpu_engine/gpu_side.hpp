// The GPU side of gpu_tcp_engine.cpp, built by nvcc (gpu_side.cu): device memory, the RL-like step, and the
// engine's GPU backends. The example's host side (Boost.Asio, which nvcc does not compile) sees only this.
#pragma once

#include <sparsesync/sync/device_weights.hpp>

#include <cstdint>
#include <memory>

namespace example_gpu {

int device_count();  // 0 without a usable CUDA device

// One model's BF16 weights on the GPU (one allocation, tensors back to back).
class gpu_weights {
 public:
  explicit gpu_weights(const sparsesync::model_layout& layout);
  gpu_weights(const gpu_weights&) = delete;
  gpu_weights& operator=(const gpu_weights&) = delete;
  ~gpu_weights();
  [[nodiscard]] std::vector<sparsesync::tensor_view> views() const;  // device pointers
  void fill_random(std::uint64_t seed);
  void step(std::uint64_t step, double density);  // ~density of the elements move by 1-2 ULPs
  [[nodiscard]] bool equals(const gpu_weights& other) const;

 private:
  const sparsesync::model_layout& layout_;
  void* data_ = nullptr;
};

std::unique_ptr<sparsesync::sync::device_encoder_backend> trainer_backend();
std::unique_ptr<sparsesync::sync::device_applier_backend> worker_backend(const sparsesync::model_layout& layout, const gpu_weights& w);

}  // namespace example_gpu
