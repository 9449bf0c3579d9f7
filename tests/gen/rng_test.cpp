// The counter-based stream the generator is specified on: Philox known answers, the normal transform's
// accuracy and symmetry, and the deterministic log/exp2 against the C library.
#include <sparsesync/gen/normal.hpp>
#include <sparsesync/gen/philox.hpp>
#include <sparsesync/gen/rng_streams.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace gen = sparsesync::gen;

TEST_CASE("Philox4x32-10 matches Random123's known-answer vectors") {
  auto check = [](gen::philox_block ctr, gen::philox_key key, gen::philox_block want) {
    const auto got = gen::philox4x32_10(ctr, key);
    for (int i = 0; i < 4; ++i) CHECK(got.v[i] == want.v[i]);
  };
  check({{0, 0, 0, 0}}, {{0, 0}}, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
  check({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, {{0xffffffffu, 0xffffffffu}},
        {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
  check({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, {{0xa4093822u, 0x299f31d0u}},
        {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
}

TEST_CASE("rng_word packs the documented counter") {
  const std::uint64_t seed = 0x0123456789ABCDEFull;
  const std::uint64_t index = (std::uint64_t(5) << 34) + 4 * 7 + 2;  // block has bits above 32
  const auto want = gen::philox4x32_10({{7u, 5u | (4u << 24), 9u, 3u}}, {{0x89ABCDEFu, 0x01234567u}});
  CHECK(gen::rng_word(seed, gen::rng_stream::grad_noise, 9, index, 3) == want.v[2]);
}

TEST_CASE("deterministic log and exp2 agree with libm") {
  for (double x : {1e-300, 2.3283064365386963e-10, 1e-5, 0.02425, 0.3, 0.5, 0.7071, 1.0, 1.4142, 1.5, 2.0, 1e10}) {
    CHECK(gen::detail::log_det(x) == doctest::Approx(std::log(x)).epsilon(2e-16 * 8));
  }
  for (double x : {-30.0, -2.5, -0.5, -0.25, 0.0, 0.3, 0.5, 1.0, 7.75, 40.0}) {
    CHECK(gen::detail::exp2_det(x) == doctest::Approx(std::exp2(x)).epsilon(1e-15));
  }
  CHECK(gen::detail::exp2_det(0.0) == 1.0);
  CHECK(gen::detail::exp2_det(3.0) == 8.0);
}

TEST_CASE("normal_from_u32: symmetric, accurate quantiles, unit moments") {
  CHECK(gen::normal_from_u32(0x80000000u) == doctest::Approx(0.0).epsilon(1e-9));
  for (std::uint32_t u : {0u, 1u, 12345u, 0x10000000u, 0x7FFFFFFFu, 0xDEADBEEFu})
    CHECK(gen::normal_from_u32(u) == -gen::normal_from_u32(~u));
  // Phi(z) for the quantile of p recovers p.
  for (std::uint32_t u : {1u, 1000u, 0x06000000u, 0x20000000u, 0x60000000u, 0x7F000000u}) {
    const double p = gen::uniform_open01(u);
    const double z = gen::normal_from_u32(u);
    CHECK(0.5 * std::erfc(-z / std::sqrt(2.0)) == doctest::Approx(p).epsilon(1e-8));
  }
  double s1 = 0, s2 = 0, s4 = 0;
  const int n = 1 << 20;
  for (int i = 0; i < n; i += 4) {
    const auto b = gen::rng_block(42, gen::rng_stream::init_value, 0, static_cast<std::uint64_t>(i) / 4, 0);
    for (auto w : b.v) {
      const double z = gen::normal_from_u32(w);
      s1 += z;
      s2 += z * z;
      s4 += z * z * z * z;
    }
  }
  CHECK(std::fabs(s1 / n) < 0.01);
  CHECK(s2 / n == doctest::Approx(1.0).epsilon(0.01));
  CHECK(s4 / n == doctest::Approx(3.0).epsilon(0.03));
}
