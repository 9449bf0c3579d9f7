// The values section shared by the index-based encoders (FORMAT.md, "Values section").
#pragma once

#include <sparsesync/codec/value_mode.hpp>
#include <sparsesync/codec/varint.hpp>
#include <sparsesync/core/error.hpp>
#include <sparsesync/core/little_endian.hpp>

#include <span>
#include <string>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace detail {

// Bytes put_values appends.
template <element_word W>
std::size_t values_bytes(value_mode mode, std::span<const W> values) {
  if (mode == value_mode::absolute) return values.size() * sizeof(W);
  if constexpr (sizeof(W) <= 2) {
    // Narrow lanes vectorize best; the sum fits them for any chunk of the format (at most 2^24 values).
    if (values.size() > (std::size_t{1} << 28)) {
      std::size_t n = 0;
      for (W v : values) n += varint_bytes(zigzag(v));
      return n;
    }
    std::uint32_t n = 0;
    for (W v : values) {
      const W z = zigzag(v);
      n += 1u + (z >= W(1u << 7)) + (sizeof(W) == 2 && z >= W(1u << 14));
    }
    return n;
  } else {
    std::size_t n = 0;
    for (W v : values) n += varint_bytes_below_2_35(zigzag(v));
    return n;
  }
}

template <element_word W>
void put_values(std::vector<unsigned char>& out, value_mode mode, std::span<const W> values) {
  const std::size_t at = out.size();
  if (mode == value_mode::absolute) {
    out.resize(at + values.size() * sizeof(W));
    for (std::size_t i = 0; i < values.size(); ++i) store_le<W>(out.data() + at + i * sizeof(W), values[i]);
  } else {
    // Room for the longest encodings, then trimmed: one resize instead of a capacity check per byte.
    out.resize(at + values.size() * max_varint_bytes(8 * sizeof(W)));
    unsigned char* p = out.data() + at;
    for (W v : values) p = write_varint(p, zigzag(v));
    out.resize(static_cast<std::size_t>(p - out.data()));
  }
}

// Reads `count` coded values from [p, end); advances p. Rejects zero (no-op) changes in ulp mode.
template <element_word W>
status get_values(const unsigned char*& p, const unsigned char* end, value_mode mode, std::size_t count,
                  std::vector<W>& values) {
  values.resize(count);
  if (mode == value_mode::absolute) {
    if (static_cast<std::size_t>(end - p) < count * sizeof(W)) return {errc::truncated, "values section"};
    for (std::size_t i = 0; i < count; ++i) values[i] = load_le<W>(p + i * sizeof(W));
    p += count * sizeof(W);
    return {};
  }
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t code = 0;
    switch (get_varint(p, end, 8 * sizeof(W), code)) {
      case varint_result::ok: break;
      case varint_result::truncated: return {errc::truncated, "values section, value " + std::to_string(i)};
      case varint_result::overlong: return {errc::non_canonical, "values section: overlong varint at value " + std::to_string(i)};
      case varint_result::overflow: return {errc::malformed, "values section: value " + std::to_string(i) + " too large"};
    }
    if (code == 0) return {errc::non_canonical, "values section: zero ulp delta at value " + std::to_string(i)};
    values[i] = unzigzag(static_cast<W>(code));
  }
  return {};
}

}  // namespace detail
SPARSESYNC_NS_END
