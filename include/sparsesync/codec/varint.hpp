// LEB128 unsigned varints: 7 bits a byte, least significant group first, high bit = more bytes follow.
// Decoding rejects overlong encodings so that every value has exactly one valid byte string.
#pragma once

#include <sparsesync/core/config.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace detail {

// Bytes of v's encoding: lets encoders size their output once (and best_of compare encoders without encoding).
constexpr unsigned varint_bytes(std::uint64_t v) { return v < 0x80 ? 1u : (static_cast<unsigned>(std::bit_width(v)) + 6) / 7; }

// varint_bytes of a value below 2^35 without branches, so that loops summing it vectorize.
constexpr unsigned varint_bytes_below_2_35(std::uint64_t v) {
  return 1u + (v >= (1u << 7)) + (v >= (1u << 14)) + (v >= (1u << 21)) + (v >= (1u << 28));
}

// Most bytes a value of `bits` bits takes.
constexpr unsigned max_varint_bytes(unsigned bits) { return (bits + 6) / 7; }

// Writes v's encoding at p, which has room for it; returns the byte after it.
inline unsigned char* write_varint(unsigned char* p, std::uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<unsigned char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<unsigned char>(v);
  return p;
}

inline void put_varint(std::vector<unsigned char>& out, std::uint64_t v) {
  unsigned char buf[max_varint_bytes(64)];
  out.insert(out.end(), buf, write_varint(buf, v));
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
