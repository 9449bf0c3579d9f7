// Device memory for the bucket frames of one version on a receiving GPU, kept across versions. Frames are taken
// one after the other and never move; when the memory is full a new block is added, without waiting for the
// device: a receiver that synchronized mid-version (to copy its frames into a bigger buffer) waited for its whole
// verify backlog while the sender waited for its next receive, long enough for a link timeout on dense versions
// (bench/results/gpu-test-runs/engine_nccl_large_version-665b91e.log). Between versions, an arena that grew
// into several blocks becomes one.
#pragma once

#include <sparsesync/cuda/cuda_error.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace cuda {

class frame_arena {
 public:
  frame_arena() = default;
  frame_arena(const frame_arena&) = delete;
  frame_arena& operator=(const frame_arena&) = delete;
  ~frame_arena() { release(); }

  // Room for the next frame of `bytes` bytes, valid until the next rewind(). A new block holds at least `slack`
  // more bytes, and as many as the arena already has (growth stays rare).
  unsigned char* take(std::size_t bytes, std::size_t slack) {
    while (current_ < blocks_.size() && blocks_[current_].bytes - used_ < bytes) {
      ++current_;
      used_ = 0;
    }
    if (current_ == blocks_.size()) {
      add_block(std::max(size(), bytes + slack));
      used_ = 0;
    }
    unsigned char* at = blocks_[current_].p + used_;
    used_ += bytes;
    return at;
  }

  // The frames taken so far are no longer needed. If the arena is in several blocks they become one of the same
  // total size; `wait_idle()` is called first (the caller's streams may still read the frames, and cudaFree
  // waits for the device anyway): rare, on the first versions.
  template <class WaitIdle>
  void rewind(WaitIdle&& wait_idle) {
    current_ = used_ = 0;
    if (blocks_.size() <= 1) return;
    wait_idle();
    const std::size_t total = size();
    release();
    add_block(total);
  }

  [[nodiscard]] std::size_t size() const noexcept {
    std::size_t n = 0;
    for (const auto& b : blocks_) n += b.bytes;
    return n;
  }

 private:
  struct block {
    unsigned char* p;
    std::size_t bytes;
  };
  void add_block(std::size_t bytes) {
    unsigned char* p = nullptr;
    throw_on_cuda_error(cudaMalloc(reinterpret_cast<void**>(&p), bytes), "cudaMalloc (frame arena)");
    blocks_.push_back({p, bytes});
  }
  void release() noexcept {
    for (const auto& b : blocks_) cudaFree(b.p);
    blocks_.clear();
  }

  std::vector<block> blocks_;
  std::size_t current_ = 0, used_ = 0;  // the block being filled, and its bytes taken
};

}  // namespace cuda
SPARSESYNC_NS_END
