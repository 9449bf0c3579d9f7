// RNE casts against hand-picked values and against independent references (exact arithmetic, GCC's
// _Float16 conversion), plus exact widening round trips over every code.
#include <sparsesync/gen/float_cast.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>

namespace gen = sparsesync::gen;
using sparsesync::dtype;

namespace {

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }
float flt(std::uint32_t b) { return std::bit_cast<float>(b); }

// Reference RNE to BF16 by exact comparison with the two candidates (both exactly representable in double).
std::uint16_t bf16_reference(float x) {
  if (std::isnan(x)) return 0x7FC0;
  const std::uint32_t b = bits(x);
  const auto down = static_cast<std::uint16_t>(b >> 16);
  const auto up = static_cast<std::uint16_t>(down + 1);
  if ((b & 0xFFFF) == 0) return down;
  const double xd = x, dd = flt(std::uint32_t(down) << 16);
  // The value one BF16 step further from zero; exponent all-ones means it overflowed to infinity.
  const double ud = ((up & 0x7F80) == 0x7F80) ? std::ldexp(std::copysign(1.0, xd), 128) : double(flt(std::uint32_t(up) << 16));
  const double ed = std::fabs(xd - dd), eu = std::fabs(ud - xd);
  if (ed < eu) return down;
  if (eu < ed) return up;
  return (down & 1) ? up : down;
}

}  // namespace

TEST_CASE("bf16: hand-picked values") {
  CHECK(gen::to_bf16(1.0f) == 0x3F80);
  CHECK(gen::to_bf16(-2.0f) == 0xC000);
  CHECK(gen::to_bf16(0.0f) == 0x0000);
  CHECK(gen::to_bf16(-0.0f) == 0x8000);
  // Exactly halfway between 1.0 (0x3F80, even) and the next value (0x3F81): ties go to even.
  CHECK(gen::bf16_from_f32_bits(0x3F808000u) == 0x3F80);
  // Halfway between 0x3F81 (odd) and 0x3F82: ties go to the even upper neighbour.
  CHECK(gen::bf16_from_f32_bits(0x3F818000u) == 0x3F82);
  CHECK(gen::bf16_from_f32_bits(0x3F808001u) == 0x3F81);  // just above the tie
  CHECK(gen::bf16_from_f32_bits(0x3F807FFFu) == 0x3F80);  // just below
  CHECK(gen::bf16_from_f32_bits(0xBF818000u) == 0xBF82);  // negative tie, magnitude to even
  // Largest finite BF16 is 0x7F7F; from the midpoint to the next binade on, RNE gives infinity.
  CHECK(gen::bf16_from_f32_bits(0x7F7F7FFFu) == 0x7F7F);
  CHECK(gen::bf16_from_f32_bits(0x7F7F8000u) == 0x7F80);
  CHECK(gen::to_bf16(std::numeric_limits<float>::max()) == 0x7F80);
  CHECK(gen::to_bf16(-std::numeric_limits<float>::max()) == 0xFF80);
  CHECK(gen::to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(gen::to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  // NaN stays NaN (c10::BFloat16's canonical 0x7FC0), including payloads that would carry into the sign.
  CHECK(gen::bf16_from_f32_bits(0x7FC00000u) == 0x7FC0);
  CHECK(gen::bf16_from_f32_bits(0xFFFFFFFFu) == 0x7FC0);
  CHECK(gen::bf16_from_f32_bits(0x7F800001u) == 0x7FC0);
  // Subnormals round like everything else (BF16 shares FP32's exponent range).
  CHECK(gen::bf16_from_f32_bits(0x00008000u) == 0x0000);
  CHECK(gen::bf16_from_f32_bits(0x00018000u) == 0x0002);
  CHECK(gen::bf16_from_f32_bits(0x00000001u) == 0x0000);
}

TEST_CASE("bf16: matches an exact reference on boundaries and a sweep of bit patterns") {
  std::uint64_t checked = 0;
  for (std::uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (std::uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, 0x1234u, 0xC000u}) {
      const float x = flt((hi << 16) | lo);
      const std::uint16_t got = gen::to_bf16(x);
      const std::uint16_t want = bf16_reference(x);
      if (got != want) FAIL_CHECK("bf16 mismatch at bits " << ((hi << 16) | lo) << ": " << got << " vs " << want);
      ++checked;
    }
  }
  CHECK(checked == 0x10000u * 8);
}

TEST_CASE("bf16 and f16 widening round-trips every non-NaN code") {
  for (std::uint32_t c = 0; c < 0x10000; ++c) {
    const float b = gen::from_bf16(static_cast<std::uint16_t>(c));
    if (!std::isnan(b)) REQUIRE(gen::to_bf16(b) == c);
    const float h = gen::from_f16(static_cast<std::uint16_t>(c));
    if (!std::isnan(h))
      REQUIRE(gen::to_f16(h) == c);
    else
      REQUIRE(std::isnan(gen::from_f16(gen::to_f16(h))));
  }
}

#if defined(__FLT16_MAX__)
TEST_CASE("f16: matches the compiler's _Float16 conversion") {
  // Every f16 code's value, its neighbours' midpoints and points just around them.
  for (std::uint32_t c = 0; c < 0x7C00; ++c) {
    const std::uint32_t b = bits(gen::from_f16(static_cast<std::uint16_t>(c)));
    for (std::int64_t d : {-4097, -4096, -4095, -1, 0, 1, 4095, 4096, 4097, 8191, 8192, 8193}) {
      const std::int64_t v = static_cast<std::int64_t>(b) + d;
      if (v < 0) continue;
      for (std::uint32_t sign : {0u, 0x80000000u}) {
        const float x = flt(static_cast<std::uint32_t>(v) | sign);
        if (std::isnan(x)) continue;
        const auto want = std::bit_cast<std::uint16_t>(static_cast<_Float16>(x));
        const std::uint16_t got = gen::to_f16(x);
        if (got != want) FAIL_CHECK("f16 mismatch at " << x << ": " << got << " vs " << want);
      }
    }
  }
}
#endif

TEST_CASE("f16: hand-picked values") {
  CHECK(gen::to_f16(1.0f) == 0x3C00);
  CHECK(gen::to_f16(65504.0f) == 0x7BFF);
  CHECK(gen::to_f16(65519.0f) == 0x7BFF);  // below the midpoint to 65536
  CHECK(gen::to_f16(65520.0f) == 0x7C00);  // the midpoint: ties to even = infinity
  CHECK(gen::to_f16(1e10f) == 0x7C00);
  CHECK(gen::to_f16(-1e10f) == 0xFC00);
  CHECK(gen::to_f16(std::ldexp(1.0f, -24)) == 0x0001);   // smallest subnormal
  CHECK(gen::to_f16(std::ldexp(1.0f, -25)) == 0x0000);   // half of it: tie to even (zero)
  CHECK(gen::to_f16(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(gen::to_f16(std::ldexp(3.0f, -25)) == 0x0002);   // 1.5 subnormal steps: tie to even (2)
  CHECK(gen::to_f16(std::ldexp(1.0f, -14) * (1023.5f / 1024.0f)) == 0x0400);  // rounds up into the normals
  CHECK(gen::f16_from_f32_bits(0x7FC00000u) == 0x7E00);
  CHECK(gen::f16_from_f32_bits(0xFFC00000u) == 0xFE00);
}

TEST_CASE("f8: hand-picked values and round trips") {
  CHECK(gen::f8_e4m3_from_f32_bits(bits(1.0f)) == 0x38);
  CHECK(gen::f8_e4m3_from_f32_bits(bits(448.0f)) == 0x7E);
  CHECK(gen::f8_e4m3_from_f32_bits(bits(464.0f)) == 0x7E);   // tie between 448 and (NaN) 480: even
  CHECK(gen::f8_e4m3_from_f32_bits(bits(470.0f)) == 0x7F);   // beyond: NaN, E4M3FN has no infinity
  CHECK(gen::f8_e4m3_from_f32_bits(bits(-1e6f)) == 0xFF);
  CHECK(gen::f8_e4m3_from_f32_bits(bits(std::numeric_limits<float>::infinity())) == 0x7F);
  CHECK(gen::f8_e4m3_from_f32_bits(bits(std::ldexp(1.0f, -9))) == 0x01);  // smallest subnormal
  CHECK(gen::f8_e5m2_from_f32_bits(bits(57344.0f)) == 0x7B);
  CHECK(gen::f8_e5m2_from_f32_bits(bits(61440.0f)) == 0x7C);  // tie to even: infinity
  CHECK(gen::f8_e5m2_from_f32_bits(bits(-std::numeric_limits<float>::infinity())) == 0xFC);
  CHECK(gen::f8_e5m2_from_f32_bits(0x7FC00000u) == 0x7F);
  for (std::uint32_t c = 0; c < 256; ++c) {
    const float a = flt(gen::f32_bits_from_f8_e4m3(static_cast<std::uint8_t>(c)));
    if (std::isnan(a))
      CHECK((c & 0x7F) == 0x7F);
    else
      CHECK(gen::f8_e4m3_from_f32_bits(bits(a)) == c);
    const float b = flt(gen::f32_bits_from_f8_e5m2(static_cast<std::uint8_t>(c)));
    if (!std::isnan(b)) CHECK(gen::f8_e5m2_from_f32_bits(bits(b)) == c);
  }
  CHECK(flt(gen::f32_bits_from_f8_e4m3(0x7E)) == 448.0f);
  CHECK(flt(gen::f32_bits_from_f8_e5m2(0x7B)) == 57344.0f);
}

TEST_CASE("cast_f32_bits dispatches by dtype") {
  const std::uint32_t x = bits(0.1f);
  CHECK(gen::cast_f32_bits(dtype::bf16, x) == gen::bf16_from_f32_bits(x));
  CHECK(gen::cast_f32_bits(dtype::f16, x) == gen::f16_from_f32_bits(x));
  CHECK(gen::cast_f32_bits(dtype::f32, x) == x);
  CHECK(gen::widen_to_f32_bits(dtype::f32, x) == x);
  static_assert(gen::bf16_from_f32_bits(0x3F808000u) == 0x3F80, "usable in constant expressions");
}
