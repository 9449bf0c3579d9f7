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

}  // namespace entropy_params
SPARSESYNC_NS_END
