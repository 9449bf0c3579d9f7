// The host codec's fast paths against their plain definitions: the block scan of changed elements, the
// one-pass Rice parameter choice, encoded_size (best_of's size comparison) and the bit sink.
#include <doctest/doctest.h>
#include <sparsesync/codec/registry.hpp>
#include <sparsesync/format/diff_scan.hpp>
#include <sparsesync/format/patch_writer.hpp>

#include <random>
#include <vector>

using namespace sparsesync;
using namespace sparsesync::detail;

namespace {

template <class W>
std::vector<std::uint32_t> scalar_differences(const W* a, const W* b, std::uint64_t n) {
  std::vector<std::uint32_t> out;
  for (std::uint64_t i = 0; i < n; ++i)
    if (a[i] != (b ? b[i] : W{0})) out.push_back(static_cast<std::uint32_t>(i));
  return out;
}

template <class W>
void check_scan_at_every_length_and_offset() {
  std::mt19937_64 rng(11 + sizeof(W));
  for (double density : {0.0, 0.01, 0.1, 0.5, 1.0}) {
    std::vector<W> a(280), b(280);
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<W>(rng());
      b[i] = std::uniform_real_distribution<double>(0, 1)(rng) < density ? static_cast<W>(a[i] ^ (W{1} << (rng() % (8 * sizeof(W))))) : a[i];
      if (rng() % 7 == 0) a[i] = 0;  // zeros, for the comparison with an all-zero base
    }
    for (std::uint64_t offset = 0; offset < 9; ++offset) {
      for (std::uint64_t n = 0; n <= 200; ++n) {
        for (const W* base : {static_cast<const W*>(b.data() + offset), static_cast<const W*>(nullptr)}) {
          std::vector<std::uint32_t> got(n + 2);
          got.resize(static_cast<std::size_t>(find_differences(a.data() + offset, base, n, got.data()) - got.data()));
          REQUIRE(got == scalar_differences(a.data() + offset, base, n));
        }
      }
    }
  }
}

std::vector<std::uint64_t> random_values(std::mt19937_64& rng, unsigned max_bits, std::size_t n) {
  std::vector<std::uint64_t> v(n);
  const unsigned scale = static_cast<unsigned>(rng() % (max_bits + 1));
  for (auto& x : v) {
    switch (rng() % 4) {
      case 0: x = rng() % 4; break;                                                       // ulp codes
      case 1: x = scale ? rng() % (std::uint64_t{1} << (rng() % scale + 1)) : 0; break;   // around the scale
      case 2: x = max_bits == 64 ? rng() : rng() & ((std::uint64_t{1} << max_bits) - 1); break;  // escapes
      default: x = rng() % 100; break;
    }
  }
  return v;
}

template <class W>
void check_encoded_sizes(value_mode mode) {
  std::mt19937_64 rng(17 + sizeof(W));
  for (int trial = 0; trial < 300; ++trial) {
    const std::uint32_t numel = 1 + static_cast<std::uint32_t>(rng() % 5000);
    const double density = trial % 3 == 0 ? 0.9 : 0.02;
    std::vector<std::uint32_t> pos;
    std::vector<W> val;
    for (std::uint32_t p = 0; p < numel; ++p) {
      if (std::uniform_real_distribution<double>(0, 1)(rng) >= density) continue;
      pos.push_back(p);
      W v = static_cast<W>(trial % 5 == 0 ? rng() : rng() % 5);
      if (v == 0) v = 1;  // a change is never a no-op
      val.push_back(v);
    }
    chunk_changes<W> in;
    in.numel = numel;
    in.mode = mode;
    in.positions = pos;
    in.values = val;
    std::vector<W> base(numel);  // for encoders that read it (entropy's classes)
    for (auto& b : base) b = static_cast<W>(rng());
    in.base = base;
    auto check = [&]<class E>() {
      std::vector<unsigned char> out(3, 0xAB);  // encoders append
      E::template encode<W>(in, out);
      CHECK(E::template encoded_size<W>(in) == out.size() - 3);
    };
    [&]<class... Es>(encoder_list<Es...>) { (check.template operator()<Es>(), ...); }(builtin_encoders{});
  }
}

// raw_index32 that reads the base: in absolute mode a change's value is its target, which the base it is
// given must still differ from (it would not if the base had been advanced before encoding).
struct raw_reading_base : raw_index32 {
  static constexpr bool needs_base = true;
  template <element_word W>
  static void encode(const chunk_changes<W>& in, std::vector<unsigned char>& out) {
    REQUIRE(in.base.size() == in.numel);
    for (std::size_t i = 0; i < in.positions.size(); ++i) REQUIRE(in.base[in.positions[i]] != in.values[i]);
    raw_index32::encode(in, out);
  }
};

}  // namespace

TEST_CASE("block scan of differences equals the scalar scan at every length 0..200 and unaligned starts") {
  check_scan_at_every_length_and_offset<std::uint8_t>();
  check_scan_at_every_length_and_offset<std::uint16_t>();
  check_scan_at_every_length_and_offset<std::uint32_t>();
}

TEST_CASE("one-pass Rice parameter choice equals trying every parameter") {
  std::mt19937_64 rng(23);
  for (int trial = 0; trial < 2000; ++trial) {
    const unsigned raw_bits = trial % 3 == 0 ? 32 : (trial % 3 == 1 ? 16 : 8);
    const unsigned max_k = trial % 2 ? 24 : raw_bits - 1;
    const auto values = random_values(rng, raw_bits, 1 + rng() % 300);
    rice_cost_histogram h;
    for (auto v : values) h.add(v);
    std::uint64_t cost = 0;
    const unsigned k = h.best(max_k, raw_bits, cost);
    REQUIRE(k == best_rice_parameter(values, max_k, raw_bits));
    std::uint64_t direct = 0;
    for (auto v : values) direct += rice_cost(v, k, raw_bits);
    REQUIRE(cost == direct);
  }
}

TEST_CASE("bit sink writes what bit_writer writes") {
  std::mt19937_64 rng(29);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<unsigned char> ref;
    bit_writer w(ref);
    const unsigned k = static_cast<unsigned>(rng() % 25);
    const auto values = random_values(rng, 32, rng() % 100);
    std::uint64_t bits = 0;
    for (auto v : values) {
      rice_put(w, v, k, 32);
      bits += rice_cost(v, k, 32);
    }
    w.put(5, 3);
    w.flush();
    std::vector<unsigned char> got((bits + 3 + 7) / 8, 0);
    bit_sink s(got.data());
    for (auto v : values) s.rice(v, k, 32);
    s.put(5, 3);
    CHECK(s.finish() == got.data() + got.size());
    CHECK(got == ref);
  }
}

TEST_CASE("encoded_size is the length encode appends, for every encoder, word and value mode") {
  for (auto mode : {value_mode::absolute, value_mode::ulp}) {
    check_encoded_sizes<std::uint8_t>(mode);
    check_encoded_sizes<std::uint16_t>(mode);
    check_encoded_sizes<std::uint32_t>(mode);
  }
}

TEST_CASE("advance_base turns the base's memory into the target, and the patch stays the same") {
  model_layout layout({{"a", dtype::bf16, {300, 7}}, {"b", dtype::f32, {1000}}, {"c", dtype::f8_e4m3, {77}}, {"d", dtype::bf16, {5000}}});
  std::mt19937_64 rng(37);
  std::vector<std::vector<unsigned char>> base(layout.size()), target(layout.size());
  for (std::size_t t = 0; t < layout.size(); ++t) {
    base[t].resize(layout[t].bytes());
    for (auto& x : base[t]) x = static_cast<unsigned char>(rng());
    target[t] = base[t];
    for (auto& x : target[t])
      if (rng() % 50 == 0) x = static_cast<unsigned char>(x + 1 + rng() % 255);
  }
  const auto original = base;
  std::vector<const_tensor_view> bv, tv;
  std::vector<tensor_view> storage;
  for (std::size_t t = 0; t < layout.size(); ++t) {
    bv.push_back({base[t].data(), layout[t].numel(), layout[t].dtype});
    tv.push_back({target[t].data(), layout[t].numel(), layout[t].dtype});
    storage.push_back({base[t].data(), layout[t].numel(), layout[t].dtype});
  }
  patch_options opt;
  opt.encode.mode = value_mode::ulp;
  opt.encode.log2_chunk = 10;
  const auto expected = encode_patch<auto_encoder>(layout, bv, tv, opt, fixed_bytes{4096});
  const auto encode_advancing = [&](auto&& enc) {
    enc.advance_base(storage);
    std::vector<unsigned char> out;
    enc.prologue(out);
    while (enc.next_bucket() < enc.bucket_count()) enc.encode_next(out);
    enc.final_header(out.data());
    return out;
  };
  CHECK(encode_advancing(patch_encoder<auto_encoder, fixed_bytes>(layout, bv, tv, opt, fixed_bytes{4096})) == expected);
  CHECK(base == target);
  // An encoder that reads the base gets it unchanged: the base is advanced only after the bucket is encoded.
  for (std::size_t t = 0; t < layout.size(); ++t) base[t] = original[t];
  opt.encode.mode = value_mode::absolute;
  const auto got3 = encode_advancing(patch_encoder<raw_reading_base, fixed_bytes>(layout, bv, tv, opt, fixed_bytes{4096}));
  CHECK(base == target);
  for (std::size_t t = 0; t < layout.size(); ++t) base[t] = original[t];
  CHECK(got3 == encode_patch<raw_index32>(layout, bv, tv, opt, fixed_bytes{4096}));
  std::vector<tensor_view> elsewhere = storage;
  std::vector<unsigned char> other(layout[0].bytes());
  elsewhere[0].data = other.data();
  patch_encoder<auto_encoder, fixed_bytes> enc2(layout, bv, tv, opt, fixed_bytes{4096});
  CHECK_THROWS_AS(enc2.advance_base(elsewhere), error);
}
