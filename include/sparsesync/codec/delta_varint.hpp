// delta_varint: LEB128 gaps (first position, then distance to the previous position minus one), then values.
#pragma once

#include <sparsesync/codec/encoder.hpp>
#include <sparsesync/codec/encoder_table.hpp>
#include <sparsesync/codec/values.hpp>

SPARSESYNC_NS_BEGIN

struct delta_varint {
  using encoder_concept = encoder_tag;
  static constexpr encoder_id id = encoder_id::delta_varint;
  static constexpr std::string_view name = encoder_table_row(id).name;
  static constexpr bool needs_base = false;

  template <element_word W>
  static void encode(const chunk_changes<W>& in, std::vector<unsigned char>& out) {
    const std::size_t at = out.size();
    out.resize(at + gap_bytes(in.positions));
    unsigned char* p = out.data() + at;
    std::uint32_t next = 0;  // smallest position the next change may take
    for (auto pos : in.positions) {
      p = detail::write_varint(p, pos - next);
      next = pos + 1;
    }
    detail::put_values<W>(out, in.mode, in.values);
  }

  // Bytes encode() appends, without encoding (best_of compares encoders with it).
  template <element_word W>
  static std::size_t encoded_size(const chunk_changes<W>& in) {
    return gap_bytes(in.positions) + detail::values_bytes<W>(in.mode, in.values);
  }

  static std::size_t gap_bytes(std::span<const std::uint32_t> p) {  // p: below 2^24, strictly increasing
    std::size_t n = p.empty() ? 0 : detail::varint_bytes(p[0]);
    // 32-bit lanes vectorize best; the sum fits them for any chunk of the format (at most 2^24 elements).
    if (p.size() > (std::size_t{1} << 28)) {
      for (std::size_t i = 1; i < p.size(); ++i) n += detail::varint_bytes(p[i] - p[i - 1] - 1);
      return n;
    }
    std::uint32_t rest = 0;
    for (std::size_t i = 1; i < p.size(); ++i) {
      const std::uint32_t g = p[i] - p[i - 1] - 1;
      rest += 1u + (g >= (1u << 7)) + (g >= (1u << 14)) + (g >= (1u << 21)) + (g >= (1u << 28));
    }
    n += rest;
    return n;
  }

  template <element_word W>
  static status decode(std::span<const unsigned char> data, const chunk_context<W>& ctx, std::vector<std::uint32_t>& positions,
                       std::vector<W>& values) {
    const unsigned char* p = data.data();
    const unsigned char* end = p + data.size();
    // Each change takes at least one byte: a lying count fails here, before any allocation.
    if (data.size() < ctx.changes) return {errc::truncated, "gap section"};
    positions.resize(ctx.changes);
    std::uint64_t next = 0;
    for (std::uint32_t i = 0; i < ctx.changes; ++i) {
      std::uint64_t gap = 0;
      switch (detail::get_varint(p, end, 32, gap)) {
        case detail::varint_result::ok: break;
        case detail::varint_result::truncated: return {errc::truncated, "gap section, change " + std::to_string(i)};
        case detail::varint_result::overlong: return {errc::non_canonical, "overlong gap varint at change " + std::to_string(i)};
        case detail::varint_result::overflow: return {errc::index_out_of_range, "gap too large at change " + std::to_string(i)};
      }
      const std::uint64_t pos = next + gap;
      if (pos >= ctx.numel)
        return {errc::index_out_of_range, "position " + std::to_string(pos) + " outside a chunk of " + std::to_string(ctx.numel)};
      positions[i] = static_cast<std::uint32_t>(pos);
      next = pos + 1;
    }
    if (auto s = detail::get_values<W>(p, end, ctx.mode, ctx.changes, values); !s) return s;
    if (p != end) return {errc::malformed, "trailing bytes after the values section"};
    return {};
  }
};

SPARSESYNC_NS_END
