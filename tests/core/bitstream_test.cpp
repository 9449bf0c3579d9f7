#include <doctest/doctest.h>
#include <sparsesync/codec/bit_stream.hpp>
#include <sparsesync/codec/rice.hpp>
#include <sparsesync/codec/varint.hpp>

#include <random>

using namespace sparsesync;
using namespace sparsesync::detail;

TEST_CASE("varints round-trip and reject overlong, truncated and oversized encodings") {
  std::vector<unsigned char> buf;
  const std::uint64_t vals[] = {0, 1, 127, 128, 16383, 16384, 0xFFFFFFFFull};
  for (auto v : vals) put_varint(buf, v);
  const unsigned char* p = buf.data();
  for (auto v : vals) {
    std::uint64_t got = 0;
    REQUIRE(get_varint(p, buf.data() + buf.size(), 32, got) == varint_result::ok);
    CHECK(got == v);
  }
  CHECK(p == buf.data() + buf.size());
  std::uint64_t v = 0;
  const unsigned char overlong[] = {0x81, 0x00};
  p = overlong;
  CHECK(get_varint(p, overlong + 2, 32, v) == varint_result::overlong);
  const unsigned char trunc[] = {0x80, 0x80};
  p = trunc;
  CHECK(get_varint(p, trunc + 2, 32, v) == varint_result::truncated);
  const unsigned char big[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x1F};  // 2^35 - 1 does not fit 32 bits
  p = big;
  CHECK(get_varint(p, big + 5, 32, v) == varint_result::overflow);
  const unsigned char big16[] = {0xFF, 0xFF, 0x04};  // 2^16 + ... does not fit 16 bits
  p = big16;
  CHECK(get_varint(p, big16 + 3, 16, v) == varint_result::overflow);
}

namespace {
// Writes `count` random values of 0..32 bits, reads them back, then one read of `past` bits past the end.
void bit_round_trip(std::mt19937_64& rng, int count, unsigned past) {
  std::vector<unsigned char> buf;
  std::vector<std::pair<std::uint64_t, unsigned>> items;
  bit_writer w(buf);
  for (int i = 0; i < count; ++i) {
    const unsigned n = static_cast<unsigned>(rng() % 33);
    const std::uint64_t v = n == 0 ? 0 : rng() & ((std::uint64_t{1} << n) - 1);
    items.emplace_back(v, n);
    w.put(v, n);
  }
  w.flush();
  bit_reader r(buf.data(), buf.data() + buf.size());
  for (auto [v, n] : items) REQUIRE(r.get(n) == v);
  CHECK_FALSE(r.failed());
  CHECK(r.at_padded_end());
  r.get(past);
  CHECK(r.failed());
}
}  // namespace

TEST_CASE("bit writer and reader agree, and the reader never reads past the end") {
  std::mt19937_64 rng(3);
  bit_round_trip(rng, 5000, 16);
  // Short streams: values across 8-byte refills, near the end and past it.
  for (int trial = 0; trial < 300; ++trial) bit_round_trip(rng, static_cast<int>(rng() % 40), 9);
}

TEST_CASE("rice codes round-trip across parameters, with escapes only when needed") {
  std::mt19937_64 rng(5);
  for (unsigned k = 0; k <= 12; ++k) {
    std::vector<unsigned char> buf;
    bit_writer w(buf);
    std::vector<std::uint64_t> vals;
    for (int i = 0; i < 2000; ++i) vals.push_back(i % 50 == 0 ? rng() & 0xFFFFFFFF : rng() % (std::uint64_t{40} << k));
    for (auto v : vals) rice_put(w, v, k, 32);
    w.flush();
    bit_reader r(buf.data(), buf.data() + buf.size());
    for (auto v : vals) {
      std::uint64_t got = 0;
      REQUIRE(rice_get(r, k, 32, got));
      CHECK(got == v);
    }
  }
  // An escape carrying a value small enough for the unary form is not canonical.
  std::vector<unsigned char> buf;
  bit_writer w(buf);
  w.put_ones(rice_escape);
  w.put(3, 32);
  w.flush();
  bit_reader r(buf.data(), buf.data() + buf.size());
  std::uint64_t got = 0;
  CHECK_FALSE(rice_get(r, 2, 32, got));
  CHECK_FALSE(r.failed());
}
