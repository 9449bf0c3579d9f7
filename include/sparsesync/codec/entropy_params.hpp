// The constants and the class rule of the `entropy` encoder's wire layout (docs/FORMAT.md, "entropy"),
// shared by the host codec (codec/entropy.hpp, the specification) and its device twin.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/dtype.hpp>

#include <cstdint>

SPARSESYNC_NS_BEGIN
namespace entropy_params {

// Byte 0 of a chunk's data: which body follows.
inline constexpr unsigned tag_rice = 0;     // rice's chunk data for the same changes (the fallback)
inline constexpr unsigned tag_classes = 1;  // positions and values coded per class of the old value

inline constexpr unsigned max_gap_k = 24;   // largest gap parameter a class body may name
inline constexpr unsigned gap_k_bits = 5;   // width of a gap parameter field
// A group closes once it holds at least numel >> group_shift elements: at most 2^group_shift groups of
// real size, so the per-group header stays small next to the changes it conditions.
inline constexpr unsigned group_shift = 6;

// Width of a value parameter field (k_val in 0..W-1).
template <element_word W>
inline constexpr unsigned value_k_bits = sizeof(W) == 1 ? 3 : sizeof(W) == 2 ? 4 : 5;

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

}  // namespace entropy_params
SPARSESYNC_NS_END
