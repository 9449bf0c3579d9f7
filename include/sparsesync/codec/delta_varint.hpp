// delta_varint: LEB128 gaps (first position, then distance to the previous position minus one), then values.
#pragma once

#include <sparsesync/codec/encoder.hpp>
#include <sparsesync/codec/values.hpp>

SPARSESYNC_NS_BEGIN

struct delta_varint {
  using encoder_concept = encoder_tag;
  static constexpr encoder_id id = encoder_id::delta_varint;
  static constexpr std::string_view name = "varint";
  static constexpr bool needs_base = false;

  template <element_word W>
  static void encode(const chunk_changes<W>& in, std::vector<unsigned char>& out) {
    std::uint32_t next = 0;  // smallest position the next change may take
    for (auto pos : in.positions) {
      detail::put_varint(out, pos - next);
      next = pos + 1;
    }
    detail::put_values<W>(out, in.mode, in.values);
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
