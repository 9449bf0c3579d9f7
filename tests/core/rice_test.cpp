// rice chunks: every chunk the encoder writes decodes back to its changes, and the decoder refuses the same
// changes under any other parameters (FORMAT.md §3.4: the encoder's choice; §6.3: canonical encodings only).
#include <sparsesync/codec/rice.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <random>
#include <utility>
#include <string>
#include <vector>

using namespace sparsesync;

namespace {

template <element_word W>
struct change_set {
  std::uint32_t numel = 0;
  value_mode mode = value_mode::absolute;
  std::vector<std::uint32_t> positions;
  std::vector<W> values;

  chunk_changes<W> view() const {
    chunk_changes<W> in;
    in.numel = numel;
    in.mode = mode;
    in.positions = positions;
    in.values = values;
    return in;
  }
  chunk_context<W> context() const {
    chunk_context<W> ctx;
    ctx.numel = numel;
    ctx.changes = static_cast<std::uint32_t>(positions.size());
    ctx.mode = mode;
    return ctx;
  }
};

// Densities from one change to all, and values from one ULP to the whole word, so that both parameters
// range widely and escapes occur.
template <element_word W>
change_set<W> random_changes(std::mt19937_64& rng, value_mode mode) {
  change_set<W> c;
  c.mode = mode;
  c.numel = 1 + static_cast<std::uint32_t>(rng() % (std::uint64_t{1} << (rng() % 15)));
  const double density = std::ldexp(1.0, -static_cast<int>(rng() % 12));
  std::bernoulli_distribution changed(density);
  for (std::uint32_t i = 0; i < c.numel; ++i)
    if (changed(rng)) c.positions.push_back(i);
  if (c.positions.empty()) c.positions.push_back(static_cast<std::uint32_t>(rng() % c.numel));
  const unsigned spread = 1 + static_cast<unsigned>(rng() % (8 * sizeof(W)));
  for (std::size_t i = 0; i < c.positions.size(); ++i) {
    W v = 0;
    while (v == 0) v = static_cast<W>(rng() & ((std::uint64_t{1} << spread) - 1)) * ((rng() & 1) ? W(1) : W(-1));
    c.values.push_back(v);  // ulp: a non-zero delta; absolute: a target pattern
  }
  return c;
}

// The encoding of `c` with the given parameters instead of the encoder's (the layout of encode(), priced as
// rice prices it).
template <element_word W>
std::vector<unsigned char> encode_with(const change_set<W>& c, unsigned k_gap, unsigned k_val) {
  rice::chunk_plan p;
  p.k_gap = k_gap;
  p.k_val = k_val;
  std::uint64_t bits = 0;
  std::uint32_t next = 0;
  for (auto pos : c.positions) {
    bits += detail::rice_cost(pos - next, k_gap, rice::gap_raw_bits);
    next = pos + 1;
  }
  for (W v : c.values) bits += c.mode == value_mode::ulp ? detail::rice_cost(rice::value_code(v), k_val, 8 * sizeof(W)) : 8 * sizeof(W);
  p.bytes = 2 + static_cast<std::size_t>((bits + 7) / 8);
  std::vector<unsigned char> out;
  rice::encode(c.view(), out, p);
  return out;
}

template <element_word W>
void check_round_trips_and_refusals(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 60; ++trial) {
    const value_mode mode = trial % 2 ? value_mode::ulp : value_mode::absolute;
    const auto c = random_changes<W>(rng, mode);
    std::vector<unsigned char> data;
    rice::encode(c.view(), data);
    std::vector<std::uint32_t> positions;
    std::vector<W> values;
    INFO(8 * sizeof(W), "-bit words, ", to_string(mode), ", ", c.positions.size(), " changes in ", c.numel, ", k_gap ",
         unsigned{data[0]}, ", k_val ", unsigned{data[1]});
    REQUIRE(rice::decode<W>(data, c.context(), positions, values).ok());
    CHECK(positions == c.positions);
    CHECK(values == c.values);
    // The same changes under other parameters in range, spelled correctly yet not the encoder's choice: the
    // neighbours of its choice (where ties fall) and a sample of the rest.
    const unsigned max_k_val = mode == value_mode::ulp ? 8 * sizeof(W) - 1 : 0;
    std::vector<std::pair<unsigned, unsigned>> others = {{data[0] + 1u, data[1]}, {data[0] - 1u, data[1]}, {data[0], data[1] + 1u},
                                                         {data[0], data[1] - 1u}};
    for (int i = 0; i < 12; ++i) others.emplace_back(rng() % (rice::max_gap_k + 1), rng() % (max_k_val + 1));
    for (const auto& [k_gap, k_val] : others) {
      if (k_gap > rice::max_gap_k || k_val > max_k_val || (k_gap == data[0] && k_val == data[1])) continue;
      const auto other = encode_with(c, k_gap, k_val);
      const status s = rice::decode<W>(other, c.context(), positions, values);
      INFO("k_gap ", k_gap, ", k_val ", k_val, ": ", s.message());
      REQUIRE(s.code() == errc::non_canonical);
    }
  }
}

}  // namespace

TEST_CASE("rice refuses the fuzzer's chunk with parameters the encoder would not pick (regressions/chunk_decode/rice-suboptimal-k)") {
  // 32-bit words, ulp mode, 13 elements, 2 changes: the finding's data, then what the encoder writes.
  chunk_context<std::uint32_t> ctx;
  ctx.numel = 13;
  ctx.changes = 2;
  ctx.mode = value_mode::ulp;
  const std::vector<unsigned char> suboptimal = {0x00, 0x01, 0xfa, 0x02};
  const std::vector<unsigned char> canonical = {0x00, 0x02, 0xda, 0x00};
  std::vector<std::uint32_t> positions;
  std::vector<std::uint32_t> values;
  const status s = rice::decode<std::uint32_t>(suboptimal, ctx, positions, values);
  INFO(s.message());
  CHECK(s.code() == errc::non_canonical);
  // The same changes from the encoder's bytes, which re-encode to themselves.
  REQUIRE(rice::decode<std::uint32_t>(canonical, ctx, positions, values).ok());
  CHECK(positions.size() == 2);
  chunk_changes<std::uint32_t> in;
  in.numel = ctx.numel;
  in.mode = ctx.mode;
  in.positions = positions;
  in.values = values;
  std::vector<unsigned char> again;
  rice::encode(in, again);
  CHECK(again == canonical);
  // The suboptimal bytes spell the same changes: only the parameters are refused.
  change_set<std::uint32_t> c;
  c.numel = ctx.numel;
  c.mode = ctx.mode;
  c.positions = positions;
  c.values = values;
  CHECK(encode_with(c, 0, 1) == suboptimal);
}

TEST_CASE("every rice chunk the encoder writes decodes to its changes; any other parameters are refused") {
  check_round_trips_and_refusals<std::uint8_t>(41);
  check_round_trips_and_refusals<std::uint16_t>(42);
  check_round_trips_and_refusals<std::uint32_t>(43);
}

namespace {

// rice's floor summed change by change, as entropy's decoder sums it.
template <element_word W>
std::uint64_t floor_bits(const change_set<W>& c) {
  std::uint64_t bits = 0;
  std::uint32_t next = 0;
  for (std::size_t j = 0; j < c.positions.size(); ++j) {
    bits += rice::gap_floor(c.positions[j] - next);
    bits += c.mode == value_mode::ulp ? rice::value_floor<W>(static_cast<std::uint32_t>(rice::value_code(c.values[j]))) : 8 * sizeof(W);
    next = c.positions[j] + 1;
  }
  return bits;
}

template <element_word W>
void check_floor(std::mt19937_64& rng) {
  int tight = 0;
  for (int t = 0; t < 400; ++t) {
    const auto c = random_changes<W>(rng, (t & 1) ? value_mode::ulp : value_mode::absolute);
    const std::size_t floor = rice::bytes_at_least(floor_bits(c)), planned = rice::plan(c.view()).bytes;
    CHECK(floor <= planned);
    CHECK(rice::least_bytes(c.view()) == floor);
    tight += floor == planned;
  }
  CHECK(tight > 0);  // (equal where one parameter suits every gap and value: the floor is not loose by design)
}

}  // namespace

TEST_CASE("rice's floor (each gap and value at its own best parameter) never exceeds the planned body") {
  std::mt19937_64 rng(91);
  check_floor<std::uint8_t>(rng);
  check_floor<std::uint16_t>(rng);
  check_floor<std::uint32_t>(rng);
  // Where a value's width is at most the largest parameter + 1 (every gap of a chunk, every value code of a word),
  // the floor is bit_width(2v + 1): what the GPU's size pass sums (cuda/detail/entropy_plan.cuh).
  for (std::uint64_t v = 0; v < (1u << 24); v = v < 64 ? v + 1 : v * 3 / 2 + 1) {
    CHECK(rice::gap_floor(static_cast<std::uint32_t>(v)) == std::bit_width(2 * v + 1));
    if (v < (1u << 16)) CHECK(rice::value_floor<std::uint16_t>(static_cast<std::uint32_t>(v)) == std::bit_width(2 * v + 1));
    CHECK(rice::value_floor<std::uint32_t>(static_cast<std::uint32_t>(v)) == std::bit_width(2 * v + 1));
  }
  CHECK(rice::value_floor<std::uint32_t>(0xFFFFFFFEu) == 33u);
  // Per value, against rice_cost at every parameter: the table is the least of them (zero, one, escapes).
  for (std::uint64_t v : {0ull, 1ull, 2ull, 3ull, 15ull, 16ull, 17ull, 1000ull, 65535ull, 1ull << 24, (1ull << 32) - 1}) {
    std::uint64_t least = ~0ull;
    for (unsigned k = 0; k <= rice::max_gap_k; ++k) least = std::min(least, detail::rice_cost(v, k, rice::gap_raw_bits));
    CHECK(rice::gap_floor(static_cast<std::uint32_t>(v)) <= least);
    if ((v & (v - 1)) == 0) CHECK(rice::gap_floor(static_cast<std::uint32_t>(v)) == least);  // a width's least value: exact
  }
}
