// rice: our entropy coder. Positions as Rice-coded gaps with the best parameter per chunk; in `ulp` mode
// values as Rice-coded zig-zag deltas (most changes move one or two ULPs, so they cost ~2 bits); in
// `absolute` mode values as raw bit patterns. Layout and escape rule: docs/FORMAT.md, "rice".
#pragma once

#include <sparsesync/codec/bit_stream.hpp>
#include <sparsesync/codec/encoder.hpp>
#include <sparsesync/codec/encoder_table.hpp>
#include <sparsesync/codec/rice_params.hpp>
#include <sparsesync/core/little_endian.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <string>

SPARSESYNC_NS_BEGIN

namespace detail {

inline constexpr unsigned rice_escape = rice_params::escape;

// Bits to Rice-code v with parameter k, escape included (raw_bits: width of the raw field after an escape).
SPARSESYNC_HD std::uint64_t rice_cost(std::uint64_t v, unsigned k, unsigned raw_bits) { return rice_params::code_bits(v, k, raw_bits); }

inline void rice_put(bit_writer& w, std::uint64_t v, unsigned k, unsigned raw_bits) {
  const std::uint64_t q = v >> k;
  if (q < rice_escape) {
    w.put_ones(static_cast<unsigned>(q));
    w.put(0, 1);
    w.put(v, k);
  } else {
    w.put_ones(rice_escape);
    w.put(v, raw_bits);
  }
}

// floor[b]: the fewest bits any parameter in [0, MaxK] codes a value of bit width b in (at a fixed parameter a
// value's cost only grows with it, so the width's least value, 2^(b-1), prices the whole width).
template <unsigned MaxK, unsigned RawBits>
inline constexpr std::array<std::uint8_t, 65> rice_floor = [] {
  std::array<std::uint8_t, 65> floor{};
  for (unsigned b = 0; b <= 64; ++b) {
    const std::uint64_t least = b == 0 ? 0 : std::uint64_t{1} << (b - 1);
    std::uint64_t best = ~std::uint64_t{0};
    for (unsigned k = 0; k <= MaxK; ++k) best = std::min(best, rice_params::code_bits<std::uint64_t>(least, k, RawBits));
    floor[b] = static_cast<std::uint8_t>(best);
  }
  return floor;
}();

// The index of v's top set bit (v != 0; rice::gap_floor and value_floor take it of 2v + 1).
inline unsigned rice_top_bit(std::uint64_t nonzero) { return 63 - static_cast<unsigned>(std::countl_zero(nonzero)); }

// Returns false on truncation or a non-canonical escape.
SPARSESYNC_ALWAYS_INLINE bool rice_get(bit_reader& r, unsigned k, unsigned raw_bits, std::uint64_t& v) {
  if (r.try_get_rice(k, rice_escape, v)) return true;
  const unsigned q = r.get_unary(rice_escape);
  if (q < rice_escape) {
    v = (std::uint64_t{q} << k) | r.get(k);
    return !r.failed();
  }
  v = r.get(raw_bits);
  return !r.failed() && (v >> k) >= rice_escape;
}

// The parameter in [0, max_k] with the smallest total cost (smallest k on ties).
template <class Values>
unsigned best_rice_parameter(const Values& values, unsigned max_k, unsigned raw_bits) {
  unsigned best_k = 0;
  std::uint64_t best = std::numeric_limits<std::uint64_t>::max();
  for (unsigned k = 0; k <= max_k; ++k) {
    std::uint64_t cost = 0;
    for (auto v : values) cost += rice_cost(v, k, raw_bits);
    if (cost < best) {
      best = cost;
      best_k = k;
    }
  }
  return best_k;
}

// Exact Rice costs for every parameter k of a set of values from one counting pass, instead of one pass
// per k. For k where v is not an escape (v >> k < 16), v >> k depends only on v's bit width and its top
// four bits; below 16, v is counted as itself.
class rice_cost_histogram {
 public:
  void add(std::uint64_t v) {
    // Without a branch (gaps fall on both sides of 16 unpredictably): both slots are computed, one counted.
    // Small values alternate between two copies, so that runs of equal values do not wait on one counter.
    const std::uint64_t w = v < 16 ? 16 : v;
    const auto b = static_cast<unsigned>(std::bit_width(w));
    const std::size_t wide = wide_at + 8 * std::size_t{b} + static_cast<std::size_t>((w >> (b - 4)) - 8);
    lane_ ^= 16;
    ++counts_[v < 16 ? lane_ + static_cast<std::size_t>(v) : wide];
    seen_ |= w;
  }

  // Total cost of the values with parameter k (as the sum of rice_cost); after best() has counted widths.
  [[nodiscard]] std::uint64_t cost(unsigned k, unsigned raw_bits) const {
    std::uint64_t c = 0;
    for (unsigned v = 0; v < 16; ++v) c += std::uint64_t{counts_[v] + counts_[16 + v]} * ((v >> k) + 1 + k);
    for (unsigned b = 5; b <= max_width_; ++b) {
      const std::uint64_t n = width_count_[b];
      if (n == 0) continue;
      if (b >= k + 5) {
        c += n * (rice_escape + raw_bits);  // v >> k has at least five bits
      } else if (b <= k) {
        c += n * (1 + k);  // v >> k == 0
      } else {
        for (unsigned t = 0; t < 8; ++t) c += std::uint64_t{counts_[wide_at + 8 * b + t]} * (((t + 8) >> (4 - (b - k))) + 1 + k);
      }
    }
    return c;
  }

  // The k in [0, max_k] with the smallest cost, the smallest on ties (as best_rice_parameter); `cost_out`
  // gets its cost.
  unsigned best(unsigned max_k, unsigned raw_bits, std::uint64_t& cost_out) {
    // Widths above the widest value counted are empty: not summed (most sets are far narrower than 64 bits, and
    // the decoder's canonical check prices one set per group of every chunk).
    const auto widest = static_cast<unsigned>(std::bit_width(seen_));
    for (unsigned b = 5; b <= widest; ++b) {
      std::uint64_t n = 0;
      for (unsigned t = 0; t < 8; ++t) n += counts_[wide_at + 8 * b + t];
      width_count_[b] = n;
      if (n) max_width_ = b;
    }
    // From k = max(widest, 4) on every value codes as q = 0, so the cost grows with k: no later k can win.
    const unsigned last_k = std::min(max_k, std::max(max_width_, 4u));
    unsigned best_k = 0;
    cost_out = std::numeric_limits<std::uint64_t>::max();
    for (unsigned k = 0; k <= last_k; ++k) {
      if (const std::uint64_t c = cost(k, raw_bits); c < cost_out) {
        cost_out = c;
        best_k = k;
      }
    }
    return best_k;
  }

 private:
  static constexpr unsigned widths = 65;
  static constexpr std::size_t wide_at = 32;  // counts_: two copies of the 16 small values, then the wide bins
  unsigned lane_ = 0;
  unsigned max_width_ = 0;
  std::uint64_t seen_ = 0;  // the OR of the values counted (16 for the small ones)
  std::array<std::uint32_t, wide_at + 8 * widths> counts_{};
  std::array<std::uint64_t, widths> width_count_{};
};

// Appends bits LSB first into a zeroed buffer sized beforehand (rice knows its exact length from the
// costs), a 32-bit store at a time instead of a capacity check per byte.
class bit_sink {
 public:
  explicit bit_sink(unsigned char* p) : p_(p) {}

  // Appends the low n bits of v (n <= 32; v has no bits above them).
  void put(std::uint64_t v, unsigned n) {
    acc_ |= v << fill_;
    fill_ += n;
    if (fill_ >= 32) {
      store_le<std::uint32_t>(p_, static_cast<std::uint32_t>(acc_));
      p_ += 4;
      acc_ >>= 32;
      fill_ -= 32;
    }
  }
  void rice(std::uint64_t v, unsigned k, unsigned raw_bits) {
    const std::uint64_t q = v >> k;
    if (q < rice_escape) {
      put((std::uint64_t{1} << q) - 1, static_cast<unsigned>(q) + 1);  // q ones, then the zero
      put(v & ((std::uint64_t{1} << k) - 1), k);
    } else {
      put((std::uint64_t{1} << rice_escape) - 1, rice_escape);
      put(v, raw_bits);
    }
  }
  // Writes the last partial bytes (their unused bits zero); returns the byte after them.
  unsigned char* finish() {
    for (; fill_ > 0; fill_ = fill_ > 8 ? fill_ - 8 : 0) {
      *p_++ = static_cast<unsigned char>(acc_);
      acc_ >>= 8;
    }
    return p_;
  }

 private:
  unsigned char* p_;
  std::uint64_t acc_ = 0;
  unsigned fill_ = 0;
};

}  // namespace detail

struct rice {
  using encoder_concept = encoder_tag;
  static constexpr encoder_id id = encoder_id::rice;
  static constexpr std::string_view name = encoder_table_row(id).name;
  static constexpr bool needs_base = false;

  static constexpr unsigned gap_raw_bits = rice_params::gap_raw_bits;
  static constexpr unsigned max_gap_k = rice_params::max_gap_k;

  // A chunk's parameters (FORMAT.md: the smallest total length, ties to the smaller k) and its data length.
  struct chunk_plan {
    unsigned k_gap = 0, k_val = 0;
    std::size_t bytes = 0;
  };

  // What the ulp-mode value stream codes: zigzag(delta) - 1 (zigzag is never 0 for a real change).
  template <element_word W>
  static std::uint64_t value_code(W delta) {
    return std::uint64_t{zigzag(delta)} - 1;
  }

  template <element_word W>
  static chunk_plan plan(const chunk_changes<W>& in) {
    constexpr unsigned value_bits = 8 * sizeof(W);
    chunk_plan p;
    if (in.positions.empty()) return p;  // no data at all
    detail::rice_cost_histogram gaps;
    std::uint32_t next = 0;
    for (auto pos : in.positions) {
      gaps.add(pos - next);
      next = pos + 1;
    }
    std::uint64_t bits = 0, value_cost = 0;
    p.k_gap = gaps.best(max_gap_k, gap_raw_bits, bits);
    if (in.mode == value_mode::ulp) {
      detail::rice_cost_histogram codes;
      for (W v : in.values) codes.add(value_code(v));
      p.k_val = codes.best(value_bits - 1, value_bits, value_cost);
    } else {
      value_cost = std::uint64_t{value_bits} * in.values.size();
    }
    bits += value_cost;
    p.bytes = static_cast<std::size_t>(rice_params::data_bytes(bits));
    return p;
  }

  // A floor under plan().bytes that a caller comparing another body against rice's (entropy's canonical check)
  // can sum in a loop it runs anyway: each gap and value code priced at its own best parameter, which one
  // parameter for all cannot beat. bytes_at_least(sum of gap_floor and value_floor (ulp) or 8 sizeof(W) (absolute)
  // over the changes) <= plan(those changes).bytes.
  // (bit_width(v) as the top bit's index of 2v + 1, never zero: bit_width itself tests for zero, a branch that
  // mispredicts on every other value code, zero being -1 ULP.)
  static unsigned gap_floor(std::uint32_t gap) { return detail::rice_floor<max_gap_k, gap_raw_bits>[detail::rice_top_bit(2 * std::uint64_t{gap} + 1)]; }
  template <element_word W>
  static unsigned value_floor(std::uint32_t code) {
    return detail::rice_floor<8 * sizeof(W) - 1, 8 * sizeof(W)>[detail::rice_top_bit(2 * std::uint64_t{code} + 1)];
  }
  static std::size_t bytes_at_least(std::uint64_t floor_bits) { return static_cast<std::size_t>(rice_params::data_bytes(floor_bits)); }
  // The same floor in one loop over the changes (entropy's encoder: ~1% of its time where plan() took ~7%).
  template <element_word W>
  static std::size_t least_bytes(const chunk_changes<W>& in) {
    if (in.positions.empty()) return 0;
    std::uint64_t bits = 0;
    std::uint32_t next = 0;
    for (auto pos : in.positions) {
      bits += gap_floor(pos - next);
      next = pos + 1;
    }
    if (in.mode == value_mode::ulp) {
      for (W v : in.values) bits += value_floor<W>(static_cast<std::uint32_t>(value_code(v)));
    } else {
      bits += std::uint64_t{8 * sizeof(W)} * in.values.size();
    }
    return bytes_at_least(bits);
  }

  template <element_word W>
  static void encode(const chunk_changes<W>& in, std::vector<unsigned char>& out) {
    encode(in, out, plan(in));
  }

  // encode() with the chunk's plan already made (best_of plans once to compare sizes and to encode).
  template <element_word W>
  static void encode(const chunk_changes<W>& in, std::vector<unsigned char>& out, const chunk_plan& p) {
    if (in.positions.empty()) return;
    constexpr unsigned value_bits = 8 * sizeof(W);
    const std::size_t at = out.size();
    out.resize(at + p.bytes, 0);
    out[at] = static_cast<unsigned char>(p.k_gap);
    out[at + 1] = static_cast<unsigned char>(p.k_val);
    detail::bit_sink w(out.data() + at + 2);
    std::uint32_t next = 0;
    for (auto pos : in.positions) {
      w.rice(pos - next, p.k_gap, gap_raw_bits);
      next = pos + 1;
    }
    if (in.mode == value_mode::ulp) {
      for (W v : in.values) w.rice(value_code(v), p.k_val, value_bits);
    } else {
      for (W v : in.values) w.put(v, value_bits);
    }
    w.finish();
  }

  // Bytes encode() appends, without encoding (best_of compares encoders with it).
  template <element_word W>
  static std::size_t encoded_size(const chunk_changes<W>& in) {
    return plan(in).bytes;
  }

  template <element_word W>
  static status decode(std::span<const unsigned char> data, const chunk_context<W>& ctx, std::vector<std::uint32_t>& positions,
                       std::vector<W>& values) {
    constexpr unsigned value_bits = 8 * sizeof(W);
    positions.clear();
    values.clear();
    if (ctx.changes == 0) return data.empty() ? status{} : status{errc::malformed, "data present for a chunk without changes"};
    // Each change takes at least one bit per gap: a lying count fails here, before any allocation.
    if (data.size() < 2 || (data.size() - 2) * 8 < ctx.changes) return {errc::truncated, "rice chunk"};
    const unsigned k_gap = data[0];
    const unsigned k_val = data[1];
    if (k_gap > max_gap_k) return {errc::malformed, "rice gap parameter " + std::to_string(k_gap) + " out of range"};
    if (ctx.mode == value_mode::absolute ? k_val != 0 : k_val >= value_bits)
      return {errc::malformed, "rice value parameter " + std::to_string(k_val) + " out of range"};
    detail::bit_reader r(data.data() + 2, data.data() + data.size());
    positions.resize(ctx.changes);
    std::uint64_t next = 0;
    for (std::uint32_t i = 0; i < ctx.changes; ++i) {
      std::uint64_t gap = 0;
      if (!detail::rice_get(r, k_gap, gap_raw_bits, gap))
        return {r.failed() ? errc::truncated : errc::non_canonical, "rice gap at change " + std::to_string(i)};
      const std::uint64_t pos = next + gap;
      if (pos >= ctx.numel)
        return {errc::index_out_of_range, "position " + std::to_string(pos) + " outside a chunk of " + std::to_string(ctx.numel)};
      positions[i] = static_cast<std::uint32_t>(pos);
      next = pos + 1;
    }
    values.resize(ctx.changes);
    for (std::uint32_t i = 0; i < ctx.changes; ++i) {
      if (ctx.mode == value_mode::absolute) {
        values[i] = static_cast<W>(r.get(value_bits));
        if (r.failed()) return {errc::truncated, "rice value at change " + std::to_string(i)};
        continue;
      }
      std::uint64_t code = 0;
      if (!detail::rice_get(r, k_val, value_bits, code))
        return {r.failed() ? errc::truncated : errc::non_canonical, "rice value at change " + std::to_string(i)};
      if (code >= (std::uint64_t{1} << value_bits) - 1) return {errc::malformed, "rice value out of range at change " + std::to_string(i)};
      values[i] = unzigzag(static_cast<W>(code + 1));
    }
    if (!r.at_padded_end()) return {errc::malformed, "trailing bits after the last value"};
    // One change set, one encoding (FORMAT.md §3.4, §6.3): the parameters must be those plan() picks for the
    // decoded changes, priced by the encoder's own code so the two cannot drift apart.
    chunk_changes<W> in;
    in.numel = ctx.numel;
    in.mode = ctx.mode;
    in.positions = positions;
    in.values = values;
    if (const chunk_plan fit = plan(in); fit.k_gap != k_gap || fit.k_val != k_val)
      return {errc::non_canonical, "rice parameters k_gap " + std::to_string(k_gap) + ", k_val " + std::to_string(k_val) +
                                       " where the encoder picks " + std::to_string(fit.k_gap) + ", " + std::to_string(fit.k_val)};
    return {};
  }
};

SPARSESYNC_NS_END
