// The content checksum (FORMAT.md section 5) of a whole model held as tensor views, any dtype.
#pragma once

#include <sparsesync/core/hash.hpp>
#include <sparsesync/core/hash_x86.hpp>
#include <sparsesync/core/layout.hpp>

SPARSESYNC_NS_BEGIN

// Sum over every element of element_hash(flat index, bits): what a patch's header calls the base or target
// checksum. `views` follow `layout` (check_views); a full read of the model.
inline std::uint64_t model_checksum(const model_layout& layout, std::span<const const_tensor_view> views) {
  std::uint64_t sum = 0;
  for (std::size_t t = 0; t < layout.size(); ++t) {
    const auto& v = views[t];
    const std::uint64_t first = layout.first_element(t);
    switch (size_of(v.dtype)) {
      case 1: sum += detail::content_checksum_fast(static_cast<const std::uint8_t*>(v.data), v.numel, first); break;
      case 2: sum += detail::content_checksum_fast(static_cast<const std::uint16_t*>(v.data), v.numel, first); break;
      default: sum += detail::content_checksum_fast(static_cast<const std::uint32_t*>(v.data), v.numel, first); break;
    }
  }
  return sum;
}

SPARSESYNC_NS_END
