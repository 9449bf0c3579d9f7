// Device memory for the bucket frames of one version on a receiving GPU, kept across versions: it grows (rarely,
// on the first versions) keeping the frames already in it, and tells the apply plan whose staging points into
// them.
#pragma once

#include <sparsesync/cuda/cuda_error.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

SPARSESYNC_NS_BEGIN
namespace cuda {

class frame_arena {
 public:
  frame_arena() = default;
  frame_arena(const frame_arena&) = delete;
  frame_arena& operator=(const frame_arena&) = delete;
  ~frame_arena() {
    if (p_) cudaFree(p_);
  }

  // Room for `need` bytes, keeping the first `keep` (and `slack` more, so that growth stays rare). The caller's
  // streams must be idle: they may still read the old frames. `plan` (an apply_plan, or null) follows the moved
  // frames. (A template on it so that this header instantiates no kernel.)
  template <class Plan>
  void grow(std::size_t need, std::size_t keep, std::size_t slack, Plan* plan) {
    if (need <= bytes_) return;
    unsigned char* bigger = nullptr;
    const std::size_t cap = std::max<std::size_t>(2 * bytes_, need + slack);
    throw_on_cuda_error(cudaMalloc(reinterpret_cast<void**>(&bigger), cap), "cudaMalloc (frame arena)");
    if (keep) {
      throw_on_cuda_error(cudaMemcpy(bigger, p_, keep, cudaMemcpyDeviceToDevice), "cudaMemcpy (frame arena)");
      if (plan) plan->frames_moved(p_, keep, bigger);  // its kept staging points into the frames
    }
    if (p_) cudaFree(p_);
    p_ = bigger;
    bytes_ = cap;
  }

  [[nodiscard]] unsigned char* data() const noexcept { return p_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }

 private:
  unsigned char* p_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace cuda
SPARSESYNC_NS_END
