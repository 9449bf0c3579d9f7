// Model layout: the ordered named tensors both sides must agree on before a patch is applied.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/dtype.hpp>
#include <sparsesync/core/error.hpp>
#include <sparsesync/core/hash.hpp>
#include <sparsesync/core/little_endian.hpp>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

SPARSESYNC_NS_BEGIN

struct tensor_info {
  std::string name;
  sparsesync::dtype dtype = dtype::bf16;
  std::vector<std::uint64_t> shape;

  [[nodiscard]] std::uint64_t numel() const {
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  [[nodiscard]] std::uint64_t bytes() const { return numel() * size_of(dtype); }
};

// Limits a decoder enforces on untrusted layout sections (FORMAT.md, "Layout section").
inline constexpr std::uint32_t max_tensors = 1u << 24;
inline constexpr std::uint32_t max_tensor_name = 4096;
inline constexpr std::uint32_t max_tensor_rank = 16;

class model_layout {
 public:
  model_layout() = default;
  explicit model_layout(std::vector<tensor_info> tensors) : tensors_(std::move(tensors)) { index(); }

  [[nodiscard]] std::size_t size() const noexcept { return tensors_.size(); }
  [[nodiscard]] const tensor_info& operator[](std::size_t i) const { return tensors_[i]; }
  [[nodiscard]] const std::vector<tensor_info>& tensors() const noexcept { return tensors_; }
  // Flat element index of tensor i's first element: tensors concatenated in layout order.
  [[nodiscard]] std::uint64_t first_element(std::size_t i) const { return first_[i]; }
  [[nodiscard]] std::uint64_t numel() const noexcept { return first_.empty() ? 0 : first_.back(); }
  [[nodiscard]] std::uint64_t bytes() const {
    std::uint64_t b = 0;
    for (const auto& t : tensors_) b += t.bytes();
    return b;
  }
  // Index of the tensor with this name, or size() when absent.
  [[nodiscard]] std::size_t find(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? tensors_.size() : it->second;
  }

  // Canonical serialization (FORMAT.md, "Layout section"); the layout hash is XXH64 of these bytes.
  [[nodiscard]] std::vector<unsigned char> serialize() const {
    // Sized first, then written in place (no per-field insert: fewer reallocations, and no GCC 12
    // -Wstringop-overflow false positive on vector::insert).
    std::size_t size = 4;
    for (const auto& t : tensors_) size += 12 + t.name.size() + 8 * t.shape.size();
    std::vector<unsigned char> out(size);
    unsigned char* p = out.data();
    auto put32 = [&](std::uint32_t v) {
      detail::store_le(p, v);
      p += 4;
    };
    put32(static_cast<std::uint32_t>(tensors_.size()));
    for (const auto& t : tensors_) {
      put32(static_cast<std::uint32_t>(t.name.size()));
      if (!t.name.empty()) std::memcpy(p, t.name.data(), t.name.size());
      p += t.name.size();
      put32(static_cast<std::uint32_t>(t.dtype));
      put32(static_cast<std::uint32_t>(t.shape.size()));
      for (auto d : t.shape) {
        detail::store_le<std::uint64_t>(p, d);
        p += 8;
      }
    }
    return out;
  }

  [[nodiscard]] std::uint64_t hash() const {
    const auto bytes = serialize();
    return stream_hash(bytes.data(), bytes.size(), 0);
  }

  // Parses a layout section from untrusted bytes; `consumed` receives its length.
  static status parse(std::span<const unsigned char> in, model_layout& out, std::size_t& consumed) {
    std::size_t pos = 0;
    auto need = [&](std::size_t n) { return in.size() - pos >= n; };
    auto get32 = [&](std::uint32_t& v) {
      if (!need(4)) return false;
      v = detail::load_le<std::uint32_t>(in.data() + pos);
      pos += 4;
      return true;
    };
    std::uint32_t count = 0;
    if (!get32(count)) return {errc::truncated, "layout section: tensor count"};
    if (count > max_tensors) return {errc::malformed, "layout section: " + std::to_string(count) + " tensors exceeds the limit"};
    // Every tensor takes at least 12 bytes, so a lying count is caught before any allocation.
    if (in.size() - pos < static_cast<std::size_t>(count) * 12) return {errc::truncated, "layout section: tensor table"};
    std::vector<tensor_info> tensors(count);
    for (std::uint32_t i = 0; i < count; ++i) {
      auto& t = tensors[i];
      std::uint32_t len = 0, dt = 0, rank = 0;
      if (!get32(len)) return {errc::truncated, "layout section: tensor " + std::to_string(i)};
      if (len > max_tensor_name) return {errc::malformed, "layout section: tensor " + std::to_string(i) + " name too long"};
      if (!need(len)) return {errc::truncated, "layout section: tensor " + std::to_string(i) + " name"};
      t.name.assign(reinterpret_cast<const char*>(in.data() + pos), len);
      pos += len;
      if (!get32(dt) || !get32(rank)) return {errc::truncated, "layout section: tensor " + std::to_string(i)};
      if (dt > 255 || !is_valid(static_cast<dtype>(dt)))
        return {errc::malformed, "layout section: tensor " + std::to_string(i) + " has unknown dtype " + std::to_string(dt)};
      t.dtype = static_cast<dtype>(dt);
      if (rank > max_tensor_rank) return {errc::malformed, "layout section: tensor " + std::to_string(i) + " rank too large"};
      if (!need(8ull * rank)) return {errc::truncated, "layout section: tensor " + std::to_string(i) + " shape"};
      unsigned __int128 numel = 1;
      for (std::uint32_t d = 0; d < rank; ++d) {
        t.shape.push_back(detail::load_le<std::uint64_t>(in.data() + pos));
        pos += 8;
        numel *= t.shape.back();
        if (numel > (static_cast<unsigned __int128>(1) << 56))
          return {errc::malformed, "layout section: tensor " + std::to_string(i) + " has too many elements"};
      }
    }
    consumed = pos;
    out = model_layout(std::move(tensors));
    return {};
  }

 private:
  void index() {
    first_.assign(tensors_.size() + 1, 0);
    by_name_.clear();
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      first_[i + 1] = first_[i] + tensors_[i].numel();
      by_name_.emplace(tensors_[i].name, i);
    }
  }

  std::vector<tensor_info> tensors_;
  std::vector<std::uint64_t> first_;
  std::unordered_map<std::string, std::size_t> by_name_;
};

// Host views of one tensor's elements (bit patterns; the dtype says how wide).
struct const_tensor_view {
  const void* data = nullptr;
  std::uint64_t numel = 0;
  sparsesync::dtype dtype = dtype::bf16;
};

struct tensor_view {
  void* data = nullptr;
  std::uint64_t numel = 0;
  sparsesync::dtype dtype = dtype::bf16;
  operator const_tensor_view() const { return {data, numel, dtype}; }  // NOLINT: views convert like pointers
};

// Checks that views match a layout one to one (count, dtype, element count).
// With allow_zero, a view with null data is accepted (it stands for zeros where the caller documents so).
template <class View>
status check_views(const model_layout& layout, std::span<const View> views, std::string_view what, bool allow_zero = false) {
  if (views.size() != layout.size())
    return {errc::invalid_argument, std::string(what) + ": " + std::to_string(views.size()) + " tensors given, layout has " +
                                        std::to_string(layout.size())};
  for (std::size_t i = 0; i < views.size(); ++i) {
    if (views[i].dtype != layout[i].dtype || views[i].numel != layout[i].numel())
      return {errc::invalid_argument, std::string(what) + ": tensor '" + layout[i].name + "' does not match the layout"};
    if (views[i].numel != 0 && views[i].data == nullptr && !allow_zero)
      return {errc::invalid_argument, std::string(what) + ": tensor '" + layout[i].name + "' has no data"};
  }
  return {};
}

SPARSESYNC_NS_END
