// rice: our entropy coder. Positions as Rice-coded gaps with the best parameter per chunk; in `ulp` mode
// values as Rice-coded zig-zag deltas (most changes move one or two ULPs, so they cost ~2 bits); in
// `absolute` mode values as raw bit patterns. Layout and escape rule: docs/FORMAT.md, "rice".
#pragma once

#include <sparsesync/codec/bit_stream.hpp>
#include <sparsesync/codec/encoder.hpp>
#include <sparsesync/core/little_endian.hpp>

#include <array>
#include <limits>
#include <string>

SPARSESYNC_NS_BEGIN

namespace detail {

inline constexpr unsigned rice_escape = 16;  // a quotient this large is sent as an escape plus raw bits

// Bits to Rice-code v with parameter k, escape included (raw_bits: width of the raw field after an escape).
SPARSESYNC_HD std::uint64_t rice_cost(std::uint64_t v, unsigned k, unsigned raw_bits) {
  const std::uint64_t q = v >> k;
  return q < rice_escape ? q + 1 + k : rice_escape + raw_bits;
}

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

// Returns false on truncation or a non-canonical escape.
inline bool rice_get(bit_reader& r, unsigned k, unsigned raw_bits, std::uint64_t& v) {
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

}  // namespace detail

struct rice {
  using encoder_concept = encoder_tag;
  static constexpr encoder_id id = encoder_id::rice;
  static constexpr std::string_view name = "rice";
  static constexpr bool needs_base = false;

  static constexpr unsigned gap_raw_bits = 32;
  static constexpr unsigned max_gap_k = 24;

  template <element_word W>
  static void encode(const chunk_changes<W>& in, std::vector<unsigned char>& out) {
    if (in.positions.empty()) return;
    constexpr unsigned value_bits = 8 * sizeof(W);
    std::vector<std::uint64_t> gaps(in.positions.size());
    std::uint32_t next = 0;
    for (std::size_t i = 0; i < gaps.size(); ++i) {
      gaps[i] = in.positions[i] - next;
      next = in.positions[i] + 1;
    }
    const unsigned k_gap = detail::best_rice_parameter(gaps, max_gap_k, gap_raw_bits);
    std::vector<std::uint64_t> codes;
    unsigned k_val = 0;
    if (in.mode == value_mode::ulp) {
      codes.resize(in.values.size());
      for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = std::uint64_t{zigzag(in.values[i])} - 1;
      k_val = detail::best_rice_parameter(codes, value_bits - 1, value_bits);
    }
    out.push_back(static_cast<unsigned char>(k_gap));
    out.push_back(static_cast<unsigned char>(k_val));
    detail::bit_writer w(out);
    for (auto g : gaps) detail::rice_put(w, g, k_gap, gap_raw_bits);
    if (in.mode == value_mode::ulp) {
      for (auto c : codes) detail::rice_put(w, c, k_val, value_bits);
    } else {
      for (auto v : in.values) w.put(v, value_bits);
    }
    w.flush();
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
    return {};
  }
};

SPARSESYNC_NS_END
