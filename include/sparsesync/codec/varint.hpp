// LEB128 unsigned varints: 7 bits a byte, least significant group first, high bit = more bytes follow.
// Decoding rejects overlong encodings so that every value has exactly one valid byte string.
#pragma once

#include <sparsesync/core/config.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace detail {

inline void put_varint(std::vector<unsigned char>& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<unsigned char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<unsigned char>(v));
}

enum class varint_result { ok, truncated, overlong, overflow };

// Reads one varint from [p, end) that must fit in `max_bits`; advances p on success.
SPARSESYNC_HD varint_result get_varint(const unsigned char*& p, const unsigned char* end, unsigned max_bits,
                                       std::uint64_t& value) {
  std::uint64_t v = 0;
  unsigned shift = 0;
  const unsigned char* q = p;
  for (;;) {
    if (q == end) return varint_result::truncated;
    const unsigned char b = *q++;
    const std::uint64_t group = b & 0x7Fu;
    if (shift >= max_bits || (shift > 0 && (group >> (max_bits - shift)) != 0 && max_bits - shift < 7))
      return varint_result::overflow;
    v |= group << shift;
    if (!(b & 0x80)) {
      // A final zero group after the first byte means a shorter encoding existed.
      if (group == 0 && shift > 0) return varint_result::overlong;
      break;
    }
    shift += 7;
  }
  p = q;
  value = v;
  return varint_result::ok;
}

}  // namespace detail
SPARSESYNC_NS_END
