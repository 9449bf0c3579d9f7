// raw_index32: u32 positions relative to the chunk, then the values section (the SparseRL-Sync layout).
#pragma once

#include <sparsesync/codec/encoder.hpp>
#include <sparsesync/codec/encoder_table.hpp>
#include <sparsesync/codec/values.hpp>

SPARSESYNC_NS_BEGIN

struct raw_index32 {
  using encoder_concept = encoder_tag;
  static constexpr encoder_id id = encoder_id::raw_index32;
  static constexpr std::string_view name = encoder_table_row(id).name;
  static constexpr bool needs_base = false;

  template <element_word W>
  static void encode(const chunk_changes<W>& in, std::vector<unsigned char>& out) {
    const std::size_t at = out.size();
    out.resize(at + 4 * in.positions.size());
    for (std::size_t i = 0; i < in.positions.size(); ++i) detail::store_le<std::uint32_t>(out.data() + at + 4 * i, in.positions[i]);
    detail::put_values<W>(out, in.mode, in.values);
  }

  // Bytes encode() appends, without encoding (best_of compares encoders with it).
  template <element_word W>
  static std::size_t encoded_size(const chunk_changes<W>& in) {
    return 4 * in.positions.size() + detail::values_bytes<W>(in.mode, in.values);
  }

  template <element_word W>
  static status decode(std::span<const unsigned char> data, const chunk_context<W>& ctx, std::vector<std::uint32_t>& positions,
                       std::vector<W>& values) {
    const unsigned char* p = data.data();
    const unsigned char* end = p + data.size();
    if (data.size() / 4 < ctx.changes) return {errc::truncated, "raw index section"};
    positions.resize(ctx.changes);
    for (std::uint32_t i = 0; i < ctx.changes; ++i) {
      const auto pos = detail::load_le<std::uint32_t>(p + 4 * std::size_t{i});
      if (pos >= ctx.numel)
        return {errc::index_out_of_range, "index " + std::to_string(pos) + " outside a chunk of " + std::to_string(ctx.numel)};
      if (i > 0 && pos <= positions[i - 1]) return {errc::malformed, "indices not strictly increasing at change " + std::to_string(i)};
      positions[i] = pos;
    }
    p += 4 * std::size_t{ctx.changes};
    if (auto s = detail::get_values<W>(p, end, ctx.mode, ctx.changes, values); !s) return s;
    if (p != end) return {errc::malformed, "trailing bytes after the values section"};
    return {};
  }
};

SPARSESYNC_NS_END
