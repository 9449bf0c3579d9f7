#include <sparsesync/gen/change_stats.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace gen = sparsesync::gen;
using sparsesync::dtype;

TEST_CASE("compare counts changes and signed ULP distances across zero") {
  // 0x0001 -> 0x8001: +tiny to -tiny is three order-key steps down (through +0 and -0).
  const std::vector<std::uint16_t> a{0x3F80, 0x3F80, 0x0001, 0x4000, 0x1234};
  const std::vector<std::uint16_t> b{0x3F80, 0x3F81, 0x8001, 0x3FFF, 0x1234};
  const auto s = gen::compare({a.data(), a.size(), dtype::bf16}, {b.data(), b.size(), dtype::bf16});
  CHECK(s.elements == 5);
  CHECK(s.changed == 3);
  CHECK(s.ulp_histogram.at(1) == 1);
  CHECK(s.ulp_histogram.at(-3) == 1);
  CHECK(s.ulp_histogram.at(-1) == 1);
  CHECK(s.density() == doctest::Approx(0.6));
  CHECK(s.share_within(1) == doctest::Approx(2.0 / 3.0));
  CHECK_THROWS_AS(gen::compare({a.data(), 4, dtype::bf16}, {b.data(), 5, dtype::bf16}), sparsesync::error);
}
