// Owned, aligned storage for every tensor of a layout: the generator's output, and snapshots of it that
// tests and benchmarks keep as "old" weights while the model steps on.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/error.hpp>
#include <sparsesync/core/layout.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace gen {

class tensor_set {
 public:
  tensor_set() = default;

  // Zero-filled storage; each tensor starts on a 64-byte boundary so views are aligned for any word type.
  explicit tensor_set(model_layout layout) : layout_(std::move(layout)) {
    offsets_.resize(layout_.size() + 1, 0);
    for (std::size_t i = 0; i < layout_.size(); ++i)
      offsets_[i + 1] = (offsets_[i] + layout_[i].bytes() + alignment - 1) / alignment * alignment;
    const std::uint64_t words = offsets_.back() / sizeof(block) + 1;
    storage_ = std::make_unique<block[]>(words);
  }

  // A deep copy of `views`, which must match `layout`.
  tensor_set(model_layout layout, std::span<const const_tensor_view> views) : tensor_set(std::move(layout)) {
    throw_if_error(check_views(layout_, views, "tensor_set"));
    for (std::size_t i = 0; i < views.size(); ++i)
      if (views[i].numel) std::memcpy(bytes_at(i), views[i].data, layout_[i].bytes());
  }

  tensor_set(const tensor_set& other) : tensor_set(other.layout_) {
    if (!offsets_.empty()) std::memcpy(storage_.get(), other.storage_.get(), offsets_.back());
  }
  tensor_set& operator=(const tensor_set& other) {
    if (this != &other) *this = tensor_set(other);
    return *this;
  }
  tensor_set(tensor_set&&) noexcept = default;
  tensor_set& operator=(tensor_set&&) noexcept = default;

  [[nodiscard]] const model_layout& layout() const noexcept { return layout_; }
  [[nodiscard]] std::size_t size() const noexcept { return layout_.size(); }

  [[nodiscard]] tensor_view tensor(std::size_t i) { return {bytes_at(i), layout_[i].numel(), layout_[i].dtype}; }
  [[nodiscard]] const_tensor_view tensor(std::size_t i) const {
    return {const_cast<tensor_set*>(this)->bytes_at(i), layout_[i].numel(), layout_[i].dtype};
  }
  [[nodiscard]] std::span<const unsigned char> bytes(std::size_t i) const {
    return {static_cast<const unsigned char*>(tensor(i).data), layout_[i].bytes()};
  }

  [[nodiscard]] std::vector<const_tensor_view> views() const {
    std::vector<const_tensor_view> v;
    v.reserve(size());
    for (std::size_t i = 0; i < size(); ++i) v.push_back(tensor(i));
    return v;
  }
  [[nodiscard]] std::vector<tensor_view> mutable_views() {
    std::vector<tensor_view> v;
    v.reserve(size());
    for (std::size_t i = 0; i < size(); ++i) v.push_back(tensor(i));
    return v;
  }

  // Element words of tensor i; W must be the dtype's width.
  template <class W>
  [[nodiscard]] std::span<const W> words(std::size_t i) const {
    check_width(i, sizeof(W));
    return {static_cast<const W*>(tensor(i).data), layout_[i].numel()};
  }
  template <class W>
  [[nodiscard]] std::span<W> words(std::size_t i) {
    check_width(i, sizeof(W));
    return {static_cast<W*>(tensor(i).data), layout_[i].numel()};
  }

 private:
  static constexpr std::uint64_t alignment = 64;
  struct alignas(alignment) block {
    unsigned char b[alignment];
  };

  unsigned char* bytes_at(std::size_t i) { return reinterpret_cast<unsigned char*>(storage_.get()) + offsets_[i]; }

  void check_width(std::size_t i, std::size_t width) const {
    if (size_of(layout_[i].dtype) != width)
      throw error(errc::invalid_argument, "tensor '" + layout_[i].name + "' is " + std::string(to_string(layout_[i].dtype)) +
                                              ", not " + std::to_string(8 * width) + "-bit");
  }

  model_layout layout_;
  std::vector<std::uint64_t> offsets_;
  std::unique_ptr<block[]> storage_;
};

}  // namespace gen
SPARSESYNC_NS_END
