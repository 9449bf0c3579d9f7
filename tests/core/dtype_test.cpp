#include <doctest/doctest.h>
#include <sparsesync/codec/value_mode.hpp>
#include <sparsesync/core/dtype.hpp>

#include <bit>
#include <cmath>
#include <vector>
#include <cstring>

using namespace sparsesync;

TEST_CASE("order key is a bijection that follows the number line (all 16-bit patterns)") {
  std::vector<bool> seen(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto k = order_key<std::uint16_t>(static_cast<std::uint16_t>(b));
    CHECK_FALSE(seen[k]);
    seen[k] = true;
    CHECK(from_order_key<std::uint16_t>(k) == b);
    // FORMAT.md's definition, as written there: positives get the sign bit set, negatives are inverted.
    CHECK(k == ((b & 0x8000u) ? (~b & 0xFFFFu) : (b | 0x8000u)));
  }
  // The same definition for the other word sizes (the key is one xor with a mask made from the sign bit).
  for (std::uint32_t b = 0; b < 256; ++b)
    CHECK(order_key<std::uint8_t>(static_cast<std::uint8_t>(b)) == ((b & 0x80u) ? (~b & 0xFFu) : (b | 0x80u)));
  for (const std::uint32_t b : {0u, 1u, 0x3F800000u, 0x7FFFFFFFu, 0x80000000u, 0x80000001u, 0xBF800000u, 0xFFFFFFFFu}) {
    CHECK(order_key<std::uint32_t>(b) == ((b & 0x80000000u) ? ~b : (b | 0x80000000u)));
    CHECK(from_order_key<std::uint32_t>(order_key<std::uint32_t>(b)) == b);
  }
  // bf16 patterns of -1.0, -0.0, +0.0, +1.0 in increasing key order; -0 and +0 are one key apart.
  const std::uint16_t neg1 = 0xBF80, negz = 0x8000, posz = 0x0000, pos1 = 0x3F80;
  CHECK(order_key(neg1) < order_key(negz));
  CHECK(order_key<std::uint16_t>(negz) + 1 == order_key<std::uint16_t>(posz));
  CHECK(order_key(posz) < order_key(pos1));
}

TEST_CASE("ulp delta round-trips every pair of patterns with wrapping (8-bit exhaustive)") {
  for (unsigned a = 0; a < 256; ++a)
    for (unsigned b = 0; b < 256; ++b) {
      const auto d = ulp_delta<std::uint8_t>(static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(b));
      CHECK(apply_ulp_delta<std::uint8_t>(static_cast<std::uint8_t>(a), d) == b);
      CHECK(decode_value<std::uint8_t>(value_mode::ulp, static_cast<std::uint8_t>(a),
                                       code_value<std::uint8_t>(value_mode::ulp, static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(b))) == b);
    }
}

TEST_CASE("one ULP step of a float moves to the adjacent representable value") {
  const float x = 1.5f;
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const auto up = apply_ulp_delta<std::uint32_t>(bits, 1);
  CHECK(std::bit_cast<float>(up) == std::nextafter(x, 2.0f));
  const float y = -1.5f;
  const auto dn = apply_ulp_delta<std::uint32_t>(std::bit_cast<std::uint32_t>(y), 1);
  CHECK(std::bit_cast<float>(dn) == std::nextafter(y, 0.0f));
  // +inf and the first NaN pattern are neighbours in key space: NaN payloads round-trip exactly.
  const std::uint32_t inf = 0x7F800000, nan = 0x7F800001;
  CHECK(ulp_delta(inf, nan) == 1u);
}

TEST_CASE("zigzag maps small signed deltas to small codes and back") {
  CHECK(zigzag<std::uint16_t>(0) == 0);
  CHECK(zigzag<std::uint16_t>(static_cast<std::uint16_t>(-1)) == 1);
  CHECK(zigzag<std::uint16_t>(1) == 2);
  CHECK(zigzag<std::uint16_t>(static_cast<std::uint16_t>(-2)) == 3);
  for (std::uint32_t d = 0; d < 65536; ++d) CHECK(unzigzag<std::uint16_t>(zigzag<std::uint16_t>(static_cast<std::uint16_t>(d))) == d);
}

TEST_CASE("dtype names parse both spellings and sizes are right") {
  CHECK(parse_dtype("BF16") == dtype::bf16);
  CHECK(parse_dtype("f32") == dtype::f32);
  CHECK(parse_dtype("F8_E4M3") == dtype::f8_e4m3);
  CHECK_FALSE(parse_dtype("I64").has_value());
  CHECK(size_of(dtype::bf16) == 2);
  CHECK(size_of(dtype::f32) == 4);
  CHECK(size_of(dtype::f8_e5m2) == 1);
}
