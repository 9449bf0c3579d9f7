#include <doctest/doctest.h>
#include <sparsesync/core/hash.hpp>
#include <sparsesync/core/hash_x86.hpp>
#include <sparsesync/core/layout.hpp>
#include <sparsesync/core/little_endian.hpp>

#include <random>
#include <string>
#include <vector>

using namespace sparsesync;

TEST_CASE("element_hash equals XXH3_64bits of the 16-byte record") {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 10000; ++i) {
    const std::uint64_t index = (i < 100) ? static_cast<std::uint64_t>(i) : rng();
    const std::uint64_t bits = (i % 3 == 0) ? rng() & 0xFFFF : rng() & 0xFFFFFFFF;
    unsigned char rec[16];
    detail::store_le(rec, index);
    detail::store_le(rec + 8, bits);
    REQUIRE(element_hash(index, bits) == XXH3_64bits(rec, 16));
  }
}

TEST_CASE("content checksum is additive and updates from changed elements alone") {
  std::vector<std::uint16_t> a(1000), b;
  std::mt19937 rng(1);
  for (auto& x : a) x = static_cast<std::uint16_t>(rng());
  b = a;
  b[17] ^= 1;
  b[999] ^= 0x8000;
  const auto ha = content_checksum(a.data(), a.size(), 5000);
  const auto hb = content_checksum(b.data(), b.size(), 5000);
  CHECK(ha != hb);
  const auto updated = ha - element_hash(5017, a[17]) + element_hash(5017, b[17]) - element_hash(5999, a[999]) + element_hash(5999, b[999]);
  CHECK(updated == hb);
  // Split anywhere: the sum of the parts is the whole.
  CHECK(content_checksum(a.data(), 400, 5000) + content_checksum(a.data() + 400, 600, 5400) == ha);
  // The index matters: the same bits at other positions hash differently.
  CHECK(content_checksum(a.data(), a.size(), 0) != ha);
}

TEST_CASE("the fast content checksum equals the specification's, for every word size, length and start") {
  // On a CPU with AVX-512 the fast path hashes eight elements at a time; elsewhere both are the scalar loop.
#if SPARSESYNC_HASH_AVX512
  const std::string avx512 = detail::cpu_has_avx512_hash() ? "yes" : "no";
  MESSAGE("AVX-512 element hash on this CPU: " << avx512);
#endif
  std::mt19937_64 rng(11);
  std::vector<std::uint8_t> w1(300);
  std::vector<std::uint16_t> w2(300);
  std::vector<std::uint32_t> w4(300);
  for (std::size_t i = 0; i < 300; ++i) {
    w1[i] = static_cast<std::uint8_t>(rng());
    w2[i] = static_cast<std::uint16_t>(rng());
    w4[i] = static_cast<std::uint32_t>(rng());
  }
  w4[5] = 0xFFFFFFFFu;  // the largest bits a lane can hold
  w4[6] = 0;
  // Starts whose indices cross a multiple of 2^32 (the fast path's runs share their high 32 bits) near the first
  // element, after several rounds, and where they wrap past 2^64.
  const std::uint64_t starts[] = {0, 1, 7, 4095, (1ull << 32) - 3, (1ull << 32) - 150, (1ull << 40) + 5, ~0ull - 400, ~0ull - 150};
  for (const std::uint64_t first : starts) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9}, std::size_t{64}, std::size_t{299}}) {
      for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {  // unaligned starts too
        CHECK(detail::content_checksum_fast(w1.data() + offset, n, first) == content_checksum(w1.data() + offset, n, first));
        CHECK(detail::content_checksum_fast(w2.data() + offset, n, first) == content_checksum(w2.data() + offset, n, first));
        CHECK(detail::content_checksum_fast(w4.data() + offset, n, first) == content_checksum(w4.data() + offset, n, first));
      }
    }
  }
}

TEST_CASE("the fast checksum change of scattered elements equals the specification's") {
  std::mt19937_64 rng(12);
  std::vector<std::uint64_t> index(100);
  std::vector<std::uint32_t> after(100), before(100);
  for (std::size_t i = 0; i < 100; ++i) {
    index[i] = rng() >> (rng() % 64);  // indices of every size, up to 2^64 - 1
    after[i] = static_cast<std::uint32_t>(rng());
    before[i] = static_cast<std::uint32_t>(rng() >> 16);
  }
  index[3] = ~0ull;
  after[4] = 0xFFFFFFFFu;
  before[5] = 0;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9}, std::size_t{16}, std::size_t{99}}) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      std::uint64_t expect = 0;
      for (std::size_t i = offset; i < offset + n; ++i) expect += element_hash(index[i], after[i]) - element_hash(index[i], before[i]);
      CHECK(detail::hash_deltas_fast(index.data() + offset, after.data() + offset, before.data() + offset, n) == expect);
    }
  }
}

TEST_CASE("layout hash covers names, dtypes, shapes and order; serialization round-trips") {
  model_layout a({{"w", dtype::bf16, {4, 8}}, {"b", dtype::f32, {8}}});
  model_layout renamed({{"w2", dtype::bf16, {4, 8}}, {"b", dtype::f32, {8}}});
  model_layout retyped({{"w", dtype::f16, {4, 8}}, {"b", dtype::f32, {8}}});
  model_layout reshaped({{"w", dtype::bf16, {8, 4}}, {"b", dtype::f32, {8}}});
  model_layout reordered({{"b", dtype::f32, {8}}, {"w", dtype::bf16, {4, 8}}});
  CHECK(a.hash() != renamed.hash());
  CHECK(a.hash() != retyped.hash());
  CHECK(a.hash() != reshaped.hash());
  CHECK(a.hash() != reordered.hash());
  const auto bytes = a.serialize();
  model_layout back;
  std::size_t used = 0;
  REQUIRE(model_layout::parse(bytes, back, used).ok());
  CHECK(used == bytes.size());
  CHECK(back.hash() == a.hash());
  CHECK(back.numel() == 40);
  CHECK(back.first_element(1) == 32);
  // Every truncation is refused without a crash.
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    model_layout x;
    CHECK_FALSE(model_layout::parse(std::span(bytes).first(n), x, used).ok());
  }
}
