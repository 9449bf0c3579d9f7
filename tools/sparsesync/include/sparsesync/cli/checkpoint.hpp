// A safetensors checkpoint opened for the CLI: memory-mapped and validated by safetensors.hpp's parser, its
// tensors exposed in data-offset order (the layout order of patches).
#pragma once

#include "exit_codes.hpp"
#include "file_io.hpp"
#include "safetensors.hpp"

#include <optional>
#include <string>
#include <vector>

namespace sparsesync::cli {

class checkpoint {
 public:
  // Opens `path`; `what` ("BASE", "NEW") names it in errors. Any problem is an exit_io failure.
  static checkpoint open(const std::string& path, const std::string& what) {
    checkpoint c;
    try {
      c.map_ = mapped_file::open(path, what);
      c.header_ = tools::parse_safetensors_header(c.map_.bytes(), c.map_.size(), what + " " + path);
      c.base_ = c.map_.bytes().data();
      // Tensor views are typed pointers: the data area must be aligned for the widest element. Canonical
      // files pad the header to a multiple of 8; for any other file, fall back to an aligned copy in memory.
      if (c.header_.header_size % 8 != 0) {
        c.map_ = mapped_file{};
        c.copy_.emplace(tools::safetensors_file::read(path));
        c.header_ = c.copy_->header();
        c.base_ = c.copy_->header_bytes().data();
      }
    } catch (const sparsesync::error& e) {
      throw failure(exit_io, what + " " + path + " is not a readable safetensors checkpoint: " + e.what());
    }
    return c;
  }

  [[nodiscard]] const model_layout& layout() const noexcept { return header_.layout; }
  [[nodiscard]] std::span<const unsigned char> header_bytes() const { return {base_, header_.header_size}; }
  [[nodiscard]] std::vector<const_tensor_view> views() const {
    std::vector<const_tensor_view> v;
    v.reserve(header_.layout.size());
    for (std::size_t i = 0; i < header_.layout.size(); ++i)
      v.push_back({base_ + header_.header_size + header_.offsets[i], header_.layout[i].numel(), header_.layout[i].dtype});
    return v;
  }

 private:
  mapped_file map_;
  std::optional<tools::safetensors_file> copy_;
  tools::safetensors_header header_;
  const unsigned char* base_ = nullptr;
};

// A stored target header, parsed for a data area of exactly `layout_bytes` bytes.
struct parsed_header {
  bool ok = false;
  std::string error;
  model_layout layout;
};

inline parsed_header parse_header_bytes(std::span<const unsigned char> header, std::uint64_t data_bytes) {
  parsed_header p;
  try {
    const auto h = tools::parse_safetensors_header(header, header.size() + data_bytes, "stored target header");
    if (h.header_size != header.size()) {
      p.error = "its length field does not match the stored record";
      return p;
    }
    p.layout = h.layout;
    p.ok = true;
  } catch (const sparsesync::error& e) {
    p.error = e.what();
  }
  return p;
}

inline std::string describe(const tensor_info& t) {
  std::string s = "'" + t.name + "' " + std::string(to_string(t.dtype)) + " [";
  for (std::size_t d = 0; d < t.shape.size(); ++d) s += (d ? "," : "") + std::to_string(t.shape[d]);
  return s + "]";
}

// The first difference between two layouts (names, dtypes, shapes, order), or "" when they are equal.
inline std::string first_layout_difference(const model_layout& a, const model_layout& b, const std::string& an, const std::string& bn) {
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto& x = a[i];
    const auto& y = b[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape)
      return "tensor #" + std::to_string(i) + " in data-offset order: " + an + " has " + describe(x) + ", " + bn + " has " + describe(y);
  }
  if (a.size() != b.size()) {
    const bool a_longer = a.size() > b.size();
    return an + " has " + std::to_string(a.size()) + " tensors, " + bn + " has " + std::to_string(b.size()) + "; the first extra one is " +
           describe(a_longer ? a[n] : b[n]) + " in " + (a_longer ? an : bn);
  }
  return {};
}

}  // namespace sparsesync::cli
