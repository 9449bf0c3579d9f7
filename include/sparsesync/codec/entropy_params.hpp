// The constants and the class rule of the `entropy` encoder's wire layout (docs/FORMAT.md, "entropy"),
// shared by the host codec (codec/entropy.hpp, the specification) and its device twin.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/dtype.hpp>

#include <bit>
#include <cstdint>

SPARSESYNC_NS_BEGIN
namespace entropy_params {

// Byte 0 of a chunk's data: which body follows.
inline constexpr unsigned tag_rice = 0;     // rice's chunk data for the same changes (the fallback)
inline constexpr unsigned tag_classes = 1;  // positions and values coded per class of the old value

inline constexpr unsigned max_gap_k = 24;  // largest gap parameter a class body may name
// A group closes once it holds at least numel >> group_shift elements (16 in a chunk of 2^16): classes that
// are nearly empty share a header instead of paying one each; all others keep their own parameters.
inline constexpr unsigned group_shift = 12;

// Raw classes: the magnitude bits above the mantissa of BF16 / FP32 / FP8 e5m2 (their exponent field; for
// FP16 its exponent and top three mantissa bits, for FP8 e4m3 its exponent and top mantissa bit). The sign
// is left out: the chance of a change follows the magnitude.
template <element_word W>
inline constexpr unsigned class_shift = sizeof(W) == 1 ? 2 : sizeof(W) == 2 ? 7 : 23;
template <element_word W>
inline constexpr unsigned class_count = sizeof(W) == 1 ? 32 : 256;

template <element_word W>
SPARSESYNC_HD constexpr unsigned class_of(W bits) {
  return static_cast<unsigned>(bits >> class_shift<W>) & (class_count<W> - 1);
}

// The field widths of a class body (FORMAT.md 3.4.1), as host/device code: the device twin
// (cuda/detail/entropy_codec.cuh) must size every field exactly as the host codec does.
SPARSESYNC_HD constexpr unsigned bit_width(std::uint32_t v) {
#ifdef __CUDA_ARCH__
  return 32u - static_cast<unsigned>(__clz(v));
#else
  return static_cast<unsigned>(std::bit_width(v));
#endif
}

// Escape width of a gap within a group of n >= 2 elements: wide enough for any gap (at most n - 1).
SPARSESYNC_HD constexpr unsigned gap_raw_bits(std::uint32_t n) { return bit_width(n - 1); }
// The largest gap parameter of a group of n >= 2 elements, and the width of its field.
SPARSESYNC_HD constexpr unsigned max_gap_k_of(std::uint32_t n) { return gap_raw_bits(n) < max_gap_k ? gap_raw_bits(n) : max_gap_k; }
SPARSESYNC_HD constexpr unsigned gap_k_bits(std::uint32_t n) { return bit_width(max_gap_k_of(n)); }
// A value parameter is sent in unary (k ones, then a zero unless k = W - 1).
template <element_word W>
SPARSESYNC_HD constexpr unsigned value_k_bits(unsigned k) {
  return k + (k < 8 * sizeof(W) - 1 ? 1 : 0);
}
// Bits of a group's change count field: counts are at most min(group size, changes not yet assigned).
SPARSESYNC_HD constexpr unsigned count_bits(std::uint32_t size, std::uint32_t remaining) {
  return bit_width(size < remaining ? size : remaining);
}

}  // namespace entropy_params
SPARSESYNC_NS_END
