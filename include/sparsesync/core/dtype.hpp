// Element types, handled as raw bit patterns, and the order-preserving integer key behind `ulp` values.
#pragma once

#include <sparsesync/core/config.hpp>

#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

SPARSESYNC_NS_BEGIN

// Wire values are fixed: they appear in layout hashes and bucket headers.
enum class dtype : std::uint8_t {
  bf16 = 1,
  f16 = 2,
  f32 = 3,
  f8_e4m3 = 4,
  f8_e5m2 = 5,
};

SPARSESYNC_HD constexpr bool is_valid(dtype t) {
  return static_cast<std::uint8_t>(t) >= 1 && static_cast<std::uint8_t>(t) <= 5;
}

// Bytes per element.
SPARSESYNC_HD constexpr unsigned size_of(dtype t) {
  switch (t) {
    case dtype::bf16:
    case dtype::f16: return 2;
    case dtype::f32: return 4;
    case dtype::f8_e4m3:
    case dtype::f8_e5m2: return 1;
  }
  return 0;
}

constexpr std::string_view to_string(dtype t) {
  switch (t) {
    case dtype::bf16: return "bf16";
    case dtype::f16: return "f16";
    case dtype::f32: return "f32";
    case dtype::f8_e4m3: return "f8_e4m3";
    case dtype::f8_e5m2: return "f8_e5m2";
  }
  return "invalid";
}

// Accepts our names and the safetensors spellings (BF16, F16, F32, F8_E4M3, F8_E5M2).
constexpr std::optional<dtype> parse_dtype(std::string_view s) {
  if (s == "bf16" || s == "BF16") return dtype::bf16;
  if (s == "f16" || s == "F16" || s == "fp16") return dtype::f16;
  if (s == "f32" || s == "F32" || s == "fp32") return dtype::f32;
  if (s == "f8_e4m3" || s == "F8_E4M3") return dtype::f8_e4m3;
  if (s == "f8_e5m2" || s == "F8_E5M2") return dtype::f8_e5m2;
  return std::nullopt;
}

// The unsigned integer type that holds one element's bit pattern.
template <unsigned Bytes> struct word_for;
template <> struct word_for<1> { using type = std::uint8_t; };
template <> struct word_for<2> { using type = std::uint16_t; };
template <> struct word_for<4> { using type = std::uint32_t; };
template <unsigned Bytes> using word_t = typename word_for<Bytes>::type;

template <class W>
concept element_word = std::is_same_v<W, std::uint8_t> || std::is_same_v<W, std::uint16_t> ||
                       std::is_same_v<W, std::uint32_t>;

// Order-preserving key of a sign-magnitude bit pattern: positives get the sign bit set, negatives are
// inverted, so key(a) < key(b) iff a precedes b on the number line (-0 and +0 are adjacent keys, NaNs sit
// beyond the infinities). The map is a bijection on all bit patterns, so `ulp` deltas are exact for every
// input, NaN payloads included.
// Both as one xor with a mask made from the sign bit: a branch on it mispredicts on every other weight (the
// signs of changed weights are random), which took most of the host apply's resolve of coded values.
template <element_word W>
SPARSESYNC_HD constexpr W order_key(W bits) {
  constexpr unsigned top = 8 * sizeof(W) - 1;
  constexpr W sign = static_cast<W>(W(1) << top);
  const auto negative = static_cast<W>(W(0) - static_cast<W>(bits >> top));  // all ones where the sign is set
  return static_cast<W>(bits ^ static_cast<W>(negative | sign));               // ~bits, or bits | sign
}

template <element_word W>
SPARSESYNC_HD constexpr W from_order_key(W key) {
  constexpr unsigned top = 8 * sizeof(W) - 1;
  constexpr W sign = static_cast<W>(W(1) << top);
  const auto below = static_cast<W>(static_cast<W>(key >> top) - W(1));  // all ones where the key's top bit is clear
  return static_cast<W>(key ^ static_cast<W>(below | sign));             // key & ~sign, or ~key
}

// new - old in key space, wrapping modulo 2^bits: the `ulp` value of a change.
template <element_word W>
SPARSESYNC_HD constexpr W ulp_delta(W old_bits, W new_bits) {
  return static_cast<W>(order_key(new_bits) - order_key(old_bits));
}

template <element_word W>
SPARSESYNC_HD constexpr W apply_ulp_delta(W old_bits, W delta) {
  return from_order_key(static_cast<W>(order_key(old_bits) + delta));
}

// Zig-zag map of a W-bit two's-complement delta: small magnitudes of either sign become small codes.
template <element_word W>
SPARSESYNC_HD constexpr W zigzag(W delta) {
  constexpr unsigned bits = 8 * sizeof(W);
  const W neg = static_cast<W>(delta >> (bits - 1)) ? static_cast<W>(~W(0)) : W(0);
  return static_cast<W>(static_cast<W>(delta << 1) ^ neg);
}

template <element_word W>
SPARSESYNC_HD constexpr W unzigzag(W code) {
  return static_cast<W>(static_cast<W>(code >> 1) ^ static_cast<W>(W(0) - static_cast<W>(code & 1u)));
}

SPARSESYNC_NS_END
