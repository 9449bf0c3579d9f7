// How a changed element's new value is carried (FORMAT.md, "Values").
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/dtype.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

SPARSESYNC_NS_BEGIN

enum class value_mode : std::uint8_t {
  absolute = 0,  // the new bit pattern, fixed width
  ulp = 1,       // new minus old in order-key space (wrapping), zig-zag LEB128: needs the exact base
};

constexpr std::string_view to_string(value_mode m) { return m == value_mode::absolute ? "absolute" : "ulp"; }

constexpr std::optional<value_mode> parse_value_mode(std::string_view s) {
  if (s == "absolute") return value_mode::absolute;
  if (s == "ulp") return value_mode::ulp;
  return std::nullopt;
}

// The coded value of one change: what the chunk data stores (before byte coding).
template <element_word W>
SPARSESYNC_HD constexpr W code_value(value_mode m, W old_bits, W new_bits) {
  return m == value_mode::absolute ? new_bits : ulp_delta(old_bits, new_bits);
}

template <element_word W>
SPARSESYNC_HD constexpr W decode_value(value_mode m, W old_bits, W coded) {
  return m == value_mode::absolute ? coded : apply_ulp_delta(old_bits, coded);
}

SPARSESYNC_NS_END
