// The sender's copy of the last published version: what the next patch is diffed against.
#pragma once

#include <sparsesync/core/layout.hpp>

#include <cstring>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace sync {

// Host memory snapshot; one owned buffer per tensor. (GPU snapshots: see include/sparsesync/cuda/.)
class host_snapshot {
 public:
  explicit host_snapshot(const model_layout& layout) : layout_(&layout) {}

  [[nodiscard]] bool empty() const { return !valid_; }

  void assign(std::span<const const_tensor_view> weights) {
    if (buffers_.empty()) {
      buffers_.resize(layout_->size());
      for (std::size_t i = 0; i < layout_->size(); ++i) buffers_[i].resize((*layout_)[i].bytes());
    }
    for (std::size_t i = 0; i < weights.size(); ++i)
      if (!buffers_[i].empty()) std::memcpy(buffers_[i].data(), weights[i].data, buffers_[i].size());
    valid_ = true;
  }

  // Writable views of a valid snapshot (for patch_encoder::advance_base).
  [[nodiscard]] std::vector<tensor_view> mutable_views() {
    std::vector<tensor_view> v(layout_->size());
    for (std::size_t i = 0; i < layout_->size(); ++i) v[i] = {buffers_[i].data(), (*layout_)[i].numel(), (*layout_)[i].dtype};
    return v;
  }

  // Marks the contents as no version (after a failed in-place update).
  void invalidate() { valid_ = false; }

  // Views of the snapshot; null data (the all-zero model) while it is empty.
  [[nodiscard]] std::vector<const_tensor_view> views() const {
    std::vector<const_tensor_view> v(layout_->size());
    for (std::size_t i = 0; i < layout_->size(); ++i)
      v[i] = {valid_ ? buffers_[i].data() : nullptr, (*layout_)[i].numel(), (*layout_)[i].dtype};
    return v;
  }

 private:
  const model_layout* layout_;
  std::vector<std::vector<unsigned char>> buffers_;
  bool valid_ = false;
};

}  // namespace sync
SPARSESYNC_NS_END
