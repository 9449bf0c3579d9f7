// The GPU side of gpu_engine.cpp, built by nvcc (gpu_side.cu): device memory, the RL-like step, and the
// engine's GPU backends. The example's host side (Boost.Asio, which nvcc does not compile) sees only this.
#pragma once

#include <sparsesync/sync/device_weights.hpp>

#include <cstdint>
#include <memory>

namespace example_gpu {

int device_count();  // 0 without a usable CUDA device

// One model's BF16 weights on a GPU (one allocation, tensors back to back).
class gpu_weights {
 public:
  gpu_weights(const sparsesync::model_layout& layout, int device);
  gpu_weights(const gpu_weights&) = delete;
  gpu_weights& operator=(const gpu_weights&) = delete;
  ~gpu_weights();
  [[nodiscard]] std::vector<sparsesync::tensor_view> views() const;  // device pointers
  void fill_random(std::uint64_t seed);
  void step(std::uint64_t step, double density);  // ~density of the elements move by 1-2 ULPs
  [[nodiscard]] bool equals(const gpu_weights& other) const;  // also across GPUs
  [[nodiscard]] int device() const { return device_; }

 private:
  const sparsesync::model_layout& layout_;
  int device_;
  void* data_ = nullptr;
};

// The trainer's encoder on `w`'s GPU; frames_on_device keeps each frame on the GPU for device links (NCCL).
std::unique_ptr<sparsesync::sync::device_encoder_backend> trainer_backend(const gpu_weights& w, bool frames_on_device);
std::unique_ptr<sparsesync::sync::device_applier_backend> worker_backend(const sparsesync::model_layout& layout, const gpu_weights& w);

}  // namespace example_gpu
