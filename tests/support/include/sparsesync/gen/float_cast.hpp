// FP32 <-> narrow float formats as a trainer casts them: round to nearest, ties to even, with PyTorch's
// conventions for NaN and overflow, so generated BF16/F16/F8 bits match what `tensor.to(dtype)` pushes.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/dtype.hpp>

#include <bit>
#include <cstdint>

SPARSESYNC_NS_BEGIN
namespace gen {
namespace detail {

// RNE of an FP32 bit pattern into a format with E exponent bits and M mantissa bits (M <= 10), IEEE-style
// bias and subnormals. FiniteOnly formats (E4M3FN) have no infinities: their all-ones code is NaN and
// anything that rounds beyond the largest finite value becomes NaN (PyTorch's non-saturating cast).
template <unsigned E, unsigned M, bool FiniteOnly, std::uint32_t NanCode>
SPARSESYNC_HD constexpr std::uint32_t narrow_from_f32_bits(std::uint32_t x) {
  constexpr unsigned width = 1 + E + M;
  constexpr int bias = (1 << (E - 1)) - 1;
  constexpr int emin = 1 - bias;
  constexpr std::uint32_t inf_code = ((1u << E) - 1u) << M;
  const std::uint32_t sign = (x >> 31) << (width - 1);
  const std::uint32_t a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | NanCode;
  if (a == 0x7F800000u) return sign | (FiniteOnly ? NanCode : inf_code);
  // FP32 subnormals are far below half of every target's smallest subnormal, so giving them an implicit
  // bit (as if normal) cannot change the result: they round to zero either way.
  const int e = static_cast<int>(a >> 23) - 127;
  const std::uint32_t sig = (a & 0x7FFFFFu) | 0x800000u;
  unsigned shift = 23 - M;
  std::uint32_t base = 0;
  if (e < emin)
    shift += static_cast<unsigned>(emin - e);
  else
    base = static_cast<std::uint32_t>(e - emin) << M;  // the implicit bit in q adds the last 2^M
  if (shift > 24) return sign;                           // below half the smallest subnormal
  std::uint32_t q = sig >> shift;
  const std::uint32_t rem = sig & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  // A carry out of the mantissa bumps the exponent; the encoding is monotonic so plain addition is right.
  const std::uint32_t code = base + q;
  if constexpr (FiniteOnly) {
    return sign | (code >= NanCode ? NanCode : code);
  } else {
    return sign | (code >= inf_code ? inf_code : code);
  }
}

// Exact widening of a narrow format's bit pattern to FP32 bits (the inverse on every finite value).
template <unsigned E, unsigned M, bool FiniteOnly>
SPARSESYNC_HD constexpr std::uint32_t f32_bits_from_narrow(std::uint32_t code) {
  constexpr unsigned width = 1 + E + M;
  constexpr int bias = (1 << (E - 1)) - 1;
  constexpr std::uint32_t exp_ones = (1u << E) - 1u;
  constexpr std::uint32_t mant_ones = (1u << M) - 1u;
  const std::uint32_t sign = ((code >> (width - 1)) & 1u) << 31;
  const std::uint32_t exp = (code >> M) & exp_ones;
  std::uint32_t mant = code & mant_ones;
  if (exp == exp_ones) {
    if constexpr (FiniteOnly) {
      if (mant == mant_ones) return sign | 0x7FC00000u;
    } else {
      return sign | 0x7F800000u | (mant << (23 - M)) | (mant ? 0x400000u : 0u);
    }
  }
  if (exp == 0) {
    if (mant == 0) return sign;
    int e = 1 - bias;  // subnormal: renormalise so the leading one becomes the implicit bit
    while (!(mant & (1u << M))) {
      mant <<= 1;
      --e;
    }
    return sign | (static_cast<std::uint32_t>(e + 127) << 23) | ((mant & mant_ones) << (23 - M));
  }
  return sign | (static_cast<std::uint32_t>(static_cast<int>(exp) - bias + 127) << 23) | (mant << (23 - M));
}

}  // namespace detail

// BF16 shares FP32's exponent, so RNE is an add-and-truncate on the bits; the carry also turns values at
// or above the rounding midpoint past the largest finite BF16 into infinity. NaN becomes 0x7FC0, as in
// c10::BFloat16.
SPARSESYNC_HD constexpr std::uint16_t bf16_from_f32_bits(std::uint32_t x) {
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// NaN keeps its sign and becomes 0x7E00, as in c10::Half.
SPARSESYNC_HD constexpr std::uint16_t f16_from_f32_bits(std::uint32_t x) {
  return static_cast<std::uint16_t>(detail::narrow_from_f32_bits<5, 10, false, 0x7E00u>(x));
}

// E4M3FN (max 448, no infinities): NaN, infinities and overflow become 0x7F with the sign, as in PyTorch.
SPARSESYNC_HD constexpr std::uint8_t f8_e4m3_from_f32_bits(std::uint32_t x) {
  return static_cast<std::uint8_t>(detail::narrow_from_f32_bits<4, 3, true, 0x7Fu>(x));
}

// E5M2 (IEEE-like, max 57344): overflow becomes infinity, NaN becomes 0x7F with the sign, as in PyTorch.
SPARSESYNC_HD constexpr std::uint8_t f8_e5m2_from_f32_bits(std::uint32_t x) {
  return static_cast<std::uint8_t>(detail::narrow_from_f32_bits<5, 2, false, 0x7Fu>(x));
}

SPARSESYNC_HD constexpr std::uint32_t f32_bits_from_bf16(std::uint16_t b) { return static_cast<std::uint32_t>(b) << 16; }
SPARSESYNC_HD constexpr std::uint32_t f32_bits_from_f16(std::uint16_t h) { return detail::f32_bits_from_narrow<5, 10, false>(h); }
SPARSESYNC_HD constexpr std::uint32_t f32_bits_from_f8_e4m3(std::uint8_t b) { return detail::f32_bits_from_narrow<4, 3, true>(b); }
SPARSESYNC_HD constexpr std::uint32_t f32_bits_from_f8_e5m2(std::uint8_t b) { return detail::f32_bits_from_narrow<5, 2, false>(b); }

// The bit pattern of `x` cast to `t`, zero-extended; f32 passes through.
constexpr std::uint32_t cast_f32_bits(sparsesync::dtype t, std::uint32_t x) {
  switch (t) {
    case dtype::bf16: return bf16_from_f32_bits(x);
    case dtype::f16: return f16_from_f32_bits(x);
    case dtype::f32: return x;
    case dtype::f8_e4m3: return f8_e4m3_from_f32_bits(x);
    case dtype::f8_e5m2: return f8_e5m2_from_f32_bits(x);
  }
  return 0;
}

// FP32 bits of an element of type `t` (exact: every format here is a subset of FP32).
constexpr std::uint32_t widen_to_f32_bits(sparsesync::dtype t, std::uint32_t bits) {
  switch (t) {
    case dtype::bf16: return f32_bits_from_bf16(static_cast<std::uint16_t>(bits));
    case dtype::f16: return f32_bits_from_f16(static_cast<std::uint16_t>(bits));
    case dtype::f32: return bits;
    case dtype::f8_e4m3: return f32_bits_from_f8_e4m3(static_cast<std::uint8_t>(bits));
    case dtype::f8_e5m2: return f32_bits_from_f8_e5m2(static_cast<std::uint8_t>(bits));
  }
  return 0;
}

inline std::uint16_t to_bf16(float x) { return bf16_from_f32_bits(std::bit_cast<std::uint32_t>(x)); }
inline std::uint16_t to_f16(float x) { return f16_from_f32_bits(std::bit_cast<std::uint32_t>(x)); }
inline float from_bf16(std::uint16_t b) { return std::bit_cast<float>(f32_bits_from_bf16(b)); }
inline float from_f16(std::uint16_t h) { return std::bit_cast<float>(f32_bits_from_f16(h)); }

}  // namespace gen
SPARSESYNC_NS_END
