// The entropy encoder at chunk level: round trips of every word width and value mode on edge cases and
// adversarial inputs, never more than rice plus its tag byte, canonical decoding (every accepted byte string
// is the one the encoder writes), and malformed data refused with a status.
#include <sparsesync/codec/entropy.hpp>
#include <sparsesync/core/hash.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace sparsesync;

namespace {

// A chunk: its base, and its changes as (position, new bit pattern).
template <class W>
struct chunk_case {
  std::string name;
  std::vector<W> base;
  std::vector<std::uint32_t> positions;
  std::vector<W> targets;
};

// A bit pattern of the word's float layout near `x` (BF16 for 16 bits, FP32, FP8 e5m2), by truncation.
template <class W>
W float_bits(float x) {
  std::uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  if constexpr (sizeof(W) == 4) return u;
  else if constexpr (sizeof(W) == 2) return static_cast<W>(u >> 16);
  else return static_cast<W>(u >> 24);
}

template <class W>
W other_than(W b, std::mt19937_64& rng) {
  W v = static_cast<W>(rng());
  return v == b ? static_cast<W>(b ^ 1u) : v;
}

// Weight-like base (normal, std 0.02) whose changes favour small magnitudes, mostly +-1 ULP.
template <class W>
chunk_case<W> weightlike(std::uint32_t n, double density, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  chunk_case<W> c{"weight-like", {}, {}, {}};
  c.base.resize(n);
  for (auto& b : c.base) b = float_bits<W>(normal(rng));
  for (std::uint32_t i = 0; i < n; ++i) {
    float x = 0;
    if constexpr (sizeof(W) == 4) std::memcpy(&x, &c.base[i], 4);
    else {
      const std::uint32_t u = std::uint32_t{c.base[i]} << (32 - 8 * sizeof(W));
      std::memcpy(&x, &u, 4);
    }
    const double p = std::min(0.9, density * 0.004 / (std::fabs(x) + 1e-6));
    if (std::uniform_real_distribution<double>(0, 1)(rng) >= p) continue;
    const int step = rng() % 10 == 0 ? 2 : rng() % 50 == 0 ? 9 : 1;
    c.positions.push_back(i);
    c.targets.push_back(apply_ulp_delta<W>(c.base[i], static_cast<W>((rng() & 1) ? step : -step)));
  }
  return c;
}

template <class W>
std::vector<chunk_case<W>> edge_cases() {
  std::mt19937_64 rng(99 + sizeof(W));
  std::vector<chunk_case<W>> cases;
  auto random_base = [&](std::uint32_t n) {
    std::vector<W> b(n);
    for (auto& x : b) x = static_cast<W>(rng());
    return b;
  };
  auto ulp_targets = [&](chunk_case<W>& c, int spread) {
    for (auto p : c.positions) {
      const int d = 1 + static_cast<int>(rng() % static_cast<unsigned>(spread));
      c.targets.push_back(apply_ulp_delta<W>(c.base[p], static_cast<W>((rng() & 1) ? d : -d)));
    }
  };
  {  // one element, changed
    chunk_case<W> c{"one element", random_base(1), {0}, {}};
    ulp_targets(c, 1);
    cases.push_back(c);
  }
  {  // every element changed
    chunk_case<W> c{"all changed", random_base(3000), {}, {}};
    for (std::uint32_t i = 0; i < 3000; ++i) c.positions.push_back(i);
    ulp_targets(c, 3);
    cases.push_back(c);
  }
  {  // first and last element only
    chunk_case<W> c{"first and last", random_base(65536), {0, 65535}, {}};
    ulp_targets(c, 2);
    cases.push_back(c);
  }
  {  // one class: every base element the same pattern
    chunk_case<W> c{"single class", std::vector<W>(20000, float_bits<W>(0.01f)), {}, {}};
    for (std::uint32_t i = 0; i < 20000; ++i)
      if (rng() % 50 == 0) c.positions.push_back(i);
    ulp_targets(c, 2);
    cases.push_back(c);
  }
  {  // alternating classes, changes in both
    chunk_case<W> c{"alternating classes", {}, {}, {}};
    for (std::uint32_t i = 0; i < 20000; ++i) c.base.push_back(float_bits<W>(i % 2 ? 0.5f : 0.001f));
    for (std::uint32_t i = 0; i < 20000; ++i)
      if (rng() % (i % 2 ? 200 : 10) == 0) c.positions.push_back(i);
    ulp_targets(c, 2);
    cases.push_back(c);
  }
  {  // uniformly random positions over random patterns: classes carry no information
    chunk_case<W> c{"uniform random", random_base(65536), {}, {}};
    for (std::uint32_t i = 0; i < 65536; ++i)
      if (rng() % 100 == 0) c.positions.push_back(i);
    ulp_targets(c, 2);
    cases.push_back(c);
  }
  {  // dense: half the elements
    chunk_case<W> c{"dense", random_base(5000), {}, {}};
    for (std::uint32_t i = 0; i < 5000; ++i)
      if (rng() % 2) c.positions.push_back(i);
    ulp_targets(c, 2);
    cases.push_back(c);
  }
  {  // large jumps: unrelated new patterns
    chunk_case<W> c{"large jumps", random_base(4000), {}, {}};
    for (std::uint32_t i = 0; i < 4000; i += 1 + static_cast<std::uint32_t>(rng() % 40)) c.positions.push_back(i);
    for (auto p : c.positions) c.targets.push_back(other_than<W>(c.base[p], rng));
    cases.push_back(c);
  }
  {  // sign flips near zero: +-tiny to -+tiny, and zeros to the smallest subnormals
    chunk_case<W> c{"sign flips near zero", {}, {}, {}};
    const W sign = static_cast<W>(W(1) << (8 * sizeof(W) - 1));
    for (std::uint32_t i = 0; i < 3000; ++i) c.base.push_back(static_cast<W>((i % 7 == 0 ? 0 : 1 + rng() % 3) | (rng() & 1 ? sign : 0)));
    for (std::uint32_t i = 0; i < 3000; i += 1 + static_cast<std::uint32_t>(rng() % 5)) {
      c.positions.push_back(i);
      c.targets.push_back(static_cast<W>(c.base[i] ^ sign) == c.base[i] ? static_cast<W>(c.base[i] + 1) : static_cast<W>(c.base[i] ^ sign));
    }
    cases.push_back(c);
  }
#if !defined(__SANITIZE_ADDRESS__)
  // Not under AddressSanitizer: there this case alone took minutes of the test command's sanitizer stage (every
  // decode walks the chunk's whole base); the Release run of the same test covers it. 16-bit words only (BF16 and
  // FP16, the formats that matter): positions are coded the same for every word size, and each word size cost
  // the test command ~14 s here.
  if constexpr (sizeof(W) == 2) {  // the largest chunk the format allows, sparse
    chunk_case<W> c{"2^24 elements", std::vector<W>(std::size_t{1} << 24, float_bits<W>(0.02f)), {}, {}};
    for (std::uint32_t i = 0; i < (1u << 24); i += 1 + static_cast<std::uint32_t>(rng() % 200000)) c.positions.push_back(i);
    c.base.back() = float_bits<W>(1e-3f);
    c.positions.push_back((1u << 24) - 1);
    ulp_targets(c, 2);
    cases.push_back(c);
  }
#endif
  for (std::uint64_t s = 0; s < 4; ++s) cases.push_back(weightlike<W>(65536, 0.01 * static_cast<double>(1 + 3 * s), s));
  cases.push_back(weightlike<W>(300, 0.05, 11));  // a short last chunk
  return cases;
}

template <class W>
chunk_changes<W> changes_of(const chunk_case<W>& c, value_mode mode, std::vector<W>& coded) {
  coded.clear();
  for (std::size_t i = 0; i < c.positions.size(); ++i) coded.push_back(code_value<W>(mode, c.base[c.positions[i]], c.targets[i]));
  chunk_changes<W> in;
  in.numel = static_cast<std::uint32_t>(c.base.size());
  in.mode = mode;
  in.positions = c.positions;
  in.values = coded;
  in.base = c.base;
  return in;
}

template <class W>
chunk_context<W> context_of(const chunk_changes<W>& in) {
  chunk_context<W> ctx;
  ctx.numel = in.numel;
  ctx.changes = static_cast<std::uint32_t>(in.positions.size());
  ctx.mode = in.mode;
  ctx.base = in.base;
  return ctx;
}

// Decodes `data`; where it is accepted, it must be exactly what the encoder writes for what it decoded to.
template <class W>
status decode_canonical(std::span<const unsigned char> data, chunk_context<W> ctx) {
  std::vector<std::uint32_t> pos;
  std::vector<W> val;
  auto s = entropy::decode<W>(data, ctx, pos, val);
  if (!s) return s;
  REQUIRE(pos.size() == ctx.changes);
  chunk_changes<W> again;
  again.numel = ctx.numel;
  again.mode = ctx.mode;
  again.positions = pos;
  again.values = val;
  again.base = ctx.base;
  std::vector<unsigned char> out;
  entropy::encode<W>(again, out);
  CHECK(std::vector<unsigned char>(data.begin(), data.end()) == out);
  return s;
}

template <class W>
void check_cases() {
  for (const auto& c : edge_cases<W>()) {
    for (auto mode : {value_mode::absolute, value_mode::ulp}) {
      CAPTURE(c.name);
      CAPTURE(sizeof(W));
      CAPTURE(to_string(mode));
      std::vector<W> coded;
      const auto in = changes_of(c, mode, coded);
      std::vector<unsigned char> out{0xEE};  // encoders append
      entropy::encode<W>(in, out);
      const std::span<const unsigned char> data(out.data() + 1, out.size() - 1);
      CHECK(entropy::encoded_size<W>(in) == data.size());
      // Never more than rice plus the tag byte.
      std::vector<unsigned char> r;
      rice::encode<W>(in, r);
      CHECK(data.size() <= r.size() + 1);
      std::vector<std::uint32_t> pos;
      std::vector<W> val;
      REQUIRE(entropy::decode<W>(data, context_of(in), pos, val).ok());
      CHECK(pos == c.positions);
      CHECK(val == coded);
      // Truncated data is refused (at every length for small chunks, sampled lengths for large ones; a few for
      // the 2^24-element chunk, where every decode walks the whole chunk's base and 16 samples per word size
      // and mode cost the test command half a minute).
      // Under the sanitizers at most 64 lengths per case: each decode walks the chunk's base, and every length of
      // every case cost the sanitizer stage ~35 s (the fuzz harnesses truncate at random lengths there too).
#if defined(__SANITIZE_ADDRESS__)
      constexpr std::size_t sampled = 64, every_length_below = 64;
#else
      constexpr std::size_t sampled = 128, every_length_below = 1024;
#endif
      // (The 2^24-element chunk's payload is small, a few hundred bytes: its few lengths are sampled whatever the
      // payload's size; every length of it took ~8 s of the test command.)
      const bool huge = c.base.size() > (1u << 20);
      const std::size_t samples = huge ? 4 : sampled;
      const std::size_t step = data.size() > every_length_below || huge ? std::max<std::size_t>(1, data.size() / samples) : 1;
      for (std::size_t len = 0; len < data.size(); len += step) CHECK_FALSE(entropy::decode<W>(data.first(len), context_of(in), pos, val).ok());
      // A byte too many is refused too.
      std::vector<unsigned char> longer(data.begin(), data.end());
      longer.push_back(0);
      CHECK_FALSE(entropy::decode<W>(longer, context_of(in), pos, val).ok());
    }
  }
}

// Flipped bits and bytes: refused, or (rarely) another valid payload, which must then be the canonical one.
template <class W>
void check_mutations() {
  std::mt19937_64 rng(5 + sizeof(W));
  int accepted = 0, refused = 0;
  for (const auto& c : edge_cases<W>()) {
    if (c.base.size() > 100000) continue;
    for (auto mode : {value_mode::absolute, value_mode::ulp}) {
      std::vector<W> coded;
      const auto in = changes_of(c, mode, coded);
      std::vector<unsigned char> out;
      entropy::encode<W>(in, out);
#if defined(__SANITIZE_ADDRESS__)
      constexpr int trials = 25;  // each decode walks the chunk's base; the fuzz harness mutates far more there
#else
      constexpr int trials = 100;
#endif
      for (int t = 0; t < trials; ++t) {
        auto bad = out;
        const std::size_t at = rng() % bad.size();
        if (t % 2) bad[at] ^= static_cast<unsigned char>(1u << (rng() % 8));
        else bad[at] = static_cast<unsigned char>(rng());
        if (bad == out) continue;
        auto ctx = context_of(in);
        if (decode_canonical<W>(bad, ctx).ok()) ++accepted;
        else ++refused;
      }
      // Other change counts (a chunk table that lies): refused, or the same bytes are the canonical encoding
      // of other changes (decode_canonical checks which).
      for (std::uint32_t delta : {1u, 2u, 1000u}) {
        auto ctx = context_of(in);
        ctx.changes += delta;
        if (ctx.changes <= ctx.numel) (void)decode_canonical<W>(out, ctx);
        ctx = context_of(in);
        if (ctx.changes > delta) {
          ctx.changes -= delta;
          (void)decode_canonical<W>(out, ctx);
        }
      }
    }
  }
  CHECK(refused > 0);
  MESSAGE("mutations of W=" << 8 * sizeof(W) << ": " << refused << " refused, " << accepted << " accepted (all canonical)");
}

}  // namespace

TEST_CASE("entropy round trips 8-, 16- and 32-bit words in both value modes, never above rice + 1 byte, truncation refused") {
  check_cases<std::uint8_t>();
  check_cases<std::uint16_t>();
  check_cases<std::uint32_t>();
}

TEST_CASE("entropy: mutated payloads are refused with a status or decode to the canonical encoding of what they say") {
  check_mutations<std::uint8_t>();
  check_mutations<std::uint16_t>();
  check_mutations<std::uint32_t>();
}

TEST_CASE("entropy: an empty chunk has no data; data for it is refused") {
  chunk_context<std::uint16_t> ctx;
  ctx.numel = 100;
  std::vector<std::uint16_t> base(100, 7);
  ctx.base = base;
  std::vector<std::uint32_t> pos;
  std::vector<std::uint16_t> val;
  CHECK(entropy::decode<std::uint16_t>({}, ctx, pos, val).ok());
  const unsigned char one = 0;
  CHECK(entropy::decode<std::uint16_t>(std::span(&one, 1), ctx, pos, val).code() == errc::malformed);
  chunk_changes<std::uint16_t> in;
  in.numel = 100;
  in.base = base;
  std::vector<unsigned char> out;
  entropy::encode<std::uint16_t>(in, out);
  CHECK(out.empty());
}

TEST_CASE("entropy: weight-like chunks take the class body and beat rice; the other body for them is refused") {
  const auto c = weightlike<std::uint16_t>(65536, 0.01, 3);
  std::vector<std::uint16_t> coded;
  const auto in = changes_of(c, value_mode::ulp, coded);
  std::vector<unsigned char> out, r;
  entropy::encode<std::uint16_t>(in, out);
  rice::encode<std::uint16_t>(in, r);
  REQUIRE(out[0] == entropy_params::tag_classes);
  CHECK(static_cast<double>(out.size()) < 0.9 * static_cast<double>(r.size()));
  // The same changes as rice's body behind tag 0: decodable, but not what the encoder writes.
  std::vector<unsigned char> fallback{static_cast<unsigned char>(entropy_params::tag_rice)};
  fallback.insert(fallback.end(), r.begin(), r.end());
  std::vector<std::uint32_t> pos;
  std::vector<std::uint16_t> val;
  CHECK(entropy::decode<std::uint16_t>(fallback, context_of(in), pos, val).code() == errc::non_canonical);
  // An unknown tag.
  auto bad = out;
  bad[0] = 2;
  CHECK(entropy::decode<std::uint16_t>(bad, context_of(in), pos, val).code() == errc::malformed);
  // A decoder without the base cannot decode: refused, not read out of bounds.
  auto ctx = context_of(in);
  ctx.base = {};
  CHECK(entropy::decode<std::uint16_t>(out, ctx, pos, val).code() == errc::invalid_argument);
}

TEST_CASE("entropy: random patterns with random positions fall back to rice's body") {
  std::mt19937_64 rng(8);
  std::vector<std::uint32_t> base(65536);
  for (auto& b : base) b = static_cast<std::uint32_t>(rng());
  chunk_case<std::uint32_t> c{"random", base, {}, {}};
  for (std::uint32_t i = 0; i < 65536; ++i)
    if (rng() % 64 == 0) {
      c.positions.push_back(i);
      c.targets.push_back(apply_ulp_delta<std::uint32_t>(base[i], 1));
    }
  std::vector<std::uint32_t> coded;
  const auto in = changes_of(c, value_mode::ulp, coded);
  std::vector<unsigned char> out, r;
  entropy::encode<std::uint32_t>(in, out);
  rice::encode<std::uint32_t>(in, r);
  CHECK(out[0] == entropy_params::tag_rice);
  CHECK(out.size() == r.size() + 1);
}

namespace {

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A BF16 chunk of weight-like patterns (exponents falling off geometrically below 2^-6) whose smaller
// magnitudes change more often, from splitmix64 only, so that its bytes are the same on every platform.
chunk_case<std::uint16_t> pinned_chunk() {
  std::uint64_t s = 2026;
  chunk_case<std::uint16_t> c{"pinned", {}, {}, {}};
  for (std::uint32_t i = 0; i < 4096; ++i) {
    const std::uint64_t r = splitmix(s);
    const unsigned below = static_cast<unsigned>(std::countr_zero(r | (std::uint64_t{1} << 12)));  // 0..12, geometric
    const auto exponent = static_cast<std::uint16_t>(127 - 6 - below);
    c.base.push_back(static_cast<std::uint16_t>(((r >> 32) & 0x8000u) | (exponent << 7) | ((r >> 40) & 0x7Fu)));
    if ((splitmix(s) & 1023) < (4u << below)) {
      const std::uint64_t v = splitmix(s);
      const int step = (v & 15) == 0 ? 2 : 1;
      c.positions.push_back(i);
      c.targets.push_back(apply_ulp_delta<std::uint16_t>(c.base.back(), static_cast<std::uint16_t>((v >> 8) & 1 ? step : -step)));
    }
  }
  return c;
}

}  // namespace

// The class body's bytes, pinned (the golden patches, with random patterns, only reach the rice body): a change
// here is a wire format change (FORMAT.md §7), and the GPU twin must produce these bytes too.
TEST_CASE("entropy: the class body of a fixed weight-like chunk is pinned") {
  for (auto mode : {value_mode::absolute, value_mode::ulp}) {
    const auto c = pinned_chunk();
    std::vector<std::uint16_t> coded;
    const auto in = changes_of(c, mode, coded);
    std::vector<unsigned char> out;
    entropy::encode<std::uint16_t>(in, out);
    REQUIRE(out[0] == entropy_params::tag_classes);
    std::vector<std::uint32_t> pos;
    std::vector<std::uint16_t> val;
    REQUIRE(entropy::decode<std::uint16_t>(out, context_of(in), pos, val).ok());
    CHECK(pos == c.positions);
    CHECK(out.size() == (mode == value_mode::ulp ? 70u : 196u));
    CHECK(stream_hash(out.data(), out.size(), 0) == (mode == value_mode::ulp ? 10517236371137008122ull : 154602863536907531ull));
  }
}

namespace {

// Ranks by the definition: for each change, the elements of its group before it (one counter per group).
template <class W>
std::vector<std::uint32_t> ranks_by_definition(const detail::entropy_groups& g, const std::vector<W>& base, const std::vector<std::uint32_t>& pos) {
  std::vector<std::uint32_t> seen(256), out;
  std::size_t j = 0;
  for (std::uint32_t i = 0; i < base.size(); ++i) {
    const unsigned grp = detail::entropy_group_of(g, base[i]);
    if (j < pos.size() && pos[j] == i) out.push_back(seen[grp]), ++j;
    ++seen[grp];
  }
  return out;
}

template <class W>
void check_lanes() {
  std::mt19937_64 rng(29);
  constexpr unsigned shift = entropy_params::class_shift<W>;
  constexpr unsigned classes = entropy_params::class_count<W>;
  // Sizes around the lane split (four lanes of a multiple of 8 / sizeof(W) elements, the rest in the last).
  for (std::size_t n : {1, 2, 3, 5, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 1000, 4099, 20000, 65536, 65552}) {
    std::vector<W> base(n);
    for (auto& x : base) {
      // A few common classes and many rare ones: groups of one class and groups of several (with both signs).
      const unsigned c = rng() % 64 ? 3 + rng() % 4 : rng() % classes;
      x = static_cast<W>((W(c) << shift) | (rng() & ((W(1) << shift) - 1)) | ((rng() & 1) ? W(W(1) << (8 * sizeof(W) - 1)) : W(0)));
    }
    std::vector<std::uint32_t> pos;
    std::vector<W> val;
    for (std::uint32_t i = 0; i < n; ++i)
      if (rng() % 7 == 0 || i == 0 || i + 1 == n || i == n / 4 || i == n / 2) pos.push_back(i), val.push_back(static_cast<W>(1 + rng() % 3));
    detail::entropy_scratch s;
    detail::entropy_class_plan p;
    detail::entropy_plan_classes<W>(p, value_mode::absolute, std::span<const W>(base), pos, val, s);
    CHECK(s.rank == ranks_by_definition(detail::make_entropy_groups<W>(std::span<const W>(base)), base, pos));
    // The decoder's lane walk puts every change back where it was.
    chunk_changes<W> in;
    in.numel = static_cast<std::uint32_t>(n);
    in.mode = value_mode::absolute;
    in.positions = pos;
    in.values = val;
    in.base = base;
    std::vector<unsigned char> out;
    entropy::encode<W>(in, out);
    chunk_context<W> ctx;
    ctx.numel = in.numel;
    ctx.changes = static_cast<std::uint32_t>(pos.size());
    ctx.mode = in.mode;
    ctx.base = base;
    std::vector<std::uint32_t> got;
    std::vector<W> got_val;
    REQUIRE(entropy::decode<W>(out, ctx, got, got_val).ok());
    CHECK(got == pos);
    CHECK(got_val == val);
  }
}

}  // namespace

// The host codec counts classes and walks the chunk in independent lanes and ranks changes of multi-class
// groups by magnitude ranges: each must give the ranks of the definition (FORMAT.md), whatever the sizes.
TEST_CASE("entropy: ranks from the lanes equal a direct count, and the lane walk places every change") {
  check_lanes<std::uint8_t>();
  check_lanes<std::uint16_t>();
  check_lanes<std::uint32_t>();
}

namespace {

// The decoder's placing walk, 1024 elements a step with AVX-512 VBMI for 16-bit words (entropy_x86.hpp), against
// the scalar walk: the same positions and values at every density and around the lane split and the steps (lanes
// of n / 4 elements: 1023, 1024 and 1025 elements long at n = 4092, 4096, 4100).
void check_vector_walk() {
  std::mt19937_64 rng(57);
  int walked = 0;
  for (std::size_t n : {64, 255, 256, 257, 511, 1000, 4092, 4096, 4099, 4100, 20000, 65536}) {
    for (double density : {0.001, 0.01, 0.03, 0.1, 0.2, 1.0}) {
      chunk_case<std::uint16_t> c{"walk", std::vector<std::uint16_t>(n), {}, {}};
      std::normal_distribution<float> normal(0.0f, 0.02f);
      for (auto& x : c.base) x = float_bits<std::uint16_t>(normal(rng));
      // Changes far likelier in every other class (as small weights change more often on real streams), so that
      // the class body wins over rice's and the walk runs.
      for (std::uint32_t i = 0; i < n; ++i) {
        const double p = density * ((entropy_params::class_of<std::uint16_t>(c.base[i]) & 1u) ? 1.8 : 0.2);
        if (std::uniform_real_distribution<double>(0, 1)(rng) < p) c.positions.push_back(i), c.targets.push_back(static_cast<std::uint16_t>(c.base[i] ^ 1));
      }
      std::vector<std::uint16_t> values;
      const auto in = changes_of(c, value_mode::absolute, values);
      std::vector<unsigned char> out;
      entropy::encode<std::uint16_t>(in, out);
      if (out.empty() || out[0] != entropy_params::tag_classes) continue;  // rice's body: no walk
      ++walked;
      const chunk_context<std::uint16_t> ctx = context_of(in);
      std::vector<std::uint32_t> pos_scalar, pos_vector;
      std::vector<std::uint16_t> val_scalar, val_vector;
      entropy::placing_walk() = entropy::walk_mode::scalar;
      REQUIRE(entropy::decode<std::uint16_t>(out, ctx, pos_scalar, val_scalar).ok());
      entropy::placing_walk() = entropy::walk_mode::vector;
      REQUIRE(entropy::decode<std::uint16_t>(out, ctx, pos_vector, val_vector).ok());
      entropy::placing_walk() = entropy::walk_mode::automatic;
      CHECK(pos_scalar == c.positions);
      CHECK(val_scalar == values);
      CHECK(pos_vector == pos_scalar);
      CHECK(val_vector == val_scalar);
    }
  }
  CHECK(walked >= 40);  // (43 of the 72 cases with this seed; the rest are rice bodies: few changes or tiny chunks)
}

}  // namespace

TEST_CASE("entropy: the vector placing walk places every change where the scalar walk does") {
#if SPARSESYNC_HASH_AVX512
  if (!detail::cpu_has_avx512_walk()) MESSAGE("this CPU has no AVX-512 VBMI: both walks were the scalar one");
#else
  MESSAGE("not an x86-64 GCC/Clang build: both walks were the scalar one");
#endif
  check_vector_walk();
}

namespace {

// The decoder's class count and the encoder's scan may hash the base in the same pass (chunk_base_hash,
// AVX-512 for 16-bit words): the same results as the plain passes and the specification's content checksum, at
// every size around the lane split (lanes of a multiple of eight elements, and of four more: 65552), at flat indices
// near 2^32 (crossing it in the first or a later lane: the count then hashes in a pass of its own) and 2^40. Other
// widths leave it undone.
template <class W>
void check_count_and_hash() {
  std::mt19937_64 rng(41);
  for (std::size_t n : {1, 2, 3, 5, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 1000, 4099, 20000, 65536, 65552}) {
    std::vector<W> base(n);
    for (auto& x : base) x = static_cast<W>(rng());
    // (2^32 - n / 2: indices that cross 2^32 in a later lane, where the fast hash's run constants change.)
    for (std::uint64_t first : {std::uint64_t{0}, std::uint64_t{7}, (std::uint64_t{1} << 32) - 5, (std::uint64_t{1} << 32) - n / 2,
                                (std::uint64_t{1} << 40) + 3}) {
      detail::entropy_lane_counts plain{}, fused{};
      detail::entropy_count_classes<W>(std::span<const W>(base), plain);
      fused[1][3] = 12345;  // (stale counts from an earlier chunk must not survive)
      chunk_base_hash hash;
      hash.first = first;
      hash.sum = 99;
      detail::entropy_count_classes<W>(std::span<const W>(base), fused, hash);
      for (unsigned l = 0; l < detail::entropy_lanes; ++l)
        CHECK(std::equal(plain[l].begin(), plain[l].begin() + detail::entropy_key_count<W>, fused[l].begin()));
      if (hash.done) CHECK(hash.sum == 99 + content_checksum(base.data(), n, first));
      else CHECK(hash.sum == 99);
#if SPARSESYNC_HASH_AVX512
      CHECK(hash.done == (sizeof(W) == 2 && detail::cpu_has_avx512_hash()));
#endif
      // The encoder's scan, likewise: same counts, class ranks and keys of the changes.
      std::vector<std::uint32_t> pos;
      for (std::uint32_t i = 0; i < n; ++i)
        if (rng() % 5 == 0 || i == 0 || i + 1 == n) pos.push_back(i);
      std::vector<std::uint32_t> rank_plain(pos.size()), rank_fused(pos.size(), 7);
      std::vector<std::uint16_t> key_plain(pos.size()), key_fused(pos.size(), 7);
      detail::entropy_scan_changes<W>(std::span<const W>(base), pos, plain, rank_plain.data(), key_plain.data());
      chunk_base_hash scan_hash;
      scan_hash.first = first;
      detail::entropy_scan_changes<W>(std::span<const W>(base), pos, fused, rank_fused.data(), key_fused.data(), scan_hash);
      for (unsigned l = 0; l < detail::entropy_lanes; ++l)
        CHECK(std::equal(plain[l].begin(), plain[l].begin() + detail::entropy_key_count<W>, fused[l].begin()));
      CHECK(rank_fused == rank_plain);
      CHECK(key_fused == key_plain);
      // And by the definition: the elements of the change's class (either sign) before it in its lane.
      {
        const std::size_t q = detail::entropy_lane_length<W>(n);
        constexpr unsigned sign = entropy_params::class_count<W>;
        bool as_defined = true;
        for (std::size_t c = 0; c < pos.size(); ++c) {
          const std::size_t p = pos[c], l = q == 0 ? detail::entropy_lanes - 1 : std::min<std::size_t>(p / q, detail::entropy_lanes - 1);
          const unsigned k = detail::entropy_key_of(base[p]);
          std::uint32_t r = 0;
          for (std::size_t i = l * q; i < p; ++i) r += (detail::entropy_key_of(base[i]) | sign) == (k | sign);
          as_defined &= key_plain[c] == k && rank_plain[c] == r;
        }
        CHECK(as_defined);
      }
      CHECK(scan_hash.done == hash.done);
      if (scan_hash.done) CHECK(scan_hash.sum == content_checksum(base.data(), n, first));
    }
  }
}

}  // namespace

TEST_CASE("entropy: the class count and the scan that hash the base give the plain results and the content checksum") {
  check_count_and_hash<std::uint8_t>();
  check_count_and_hash<std::uint16_t>();
  check_count_and_hash<std::uint32_t>();
}

