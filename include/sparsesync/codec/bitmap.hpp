// bitmap: one bit per chunk element (LSB first), then the values section. Empty when nothing changed.
#pragma once

#include <sparsesync/codec/encoder.hpp>
#include <sparsesync/codec/encoder_table.hpp>
#include <sparsesync/codec/values.hpp>

#include <bit>

SPARSESYNC_NS_BEGIN

struct bitmap {
  using encoder_concept = encoder_tag;
  static constexpr encoder_id id = encoder_id::bitmap;
  static constexpr std::string_view name = encoder_table_row(id).name;
  static constexpr bool needs_base = false;

  static constexpr std::size_t mask_bytes(std::uint32_t numel) { return (std::size_t{numel} + 7) / 8; }

  template <element_word W>
  static void encode(const chunk_changes<W>& in, std::vector<unsigned char>& out) {
    if (in.positions.empty()) return;
    const std::size_t at = out.size();
    out.resize(at + mask_bytes(in.numel), 0);
    for (auto pos : in.positions) out[at + pos / 8] |= static_cast<unsigned char>(1u << (pos % 8));
    detail::put_values<W>(out, in.mode, in.values);
  }

  // Bytes encode() appends, without encoding (best_of compares encoders with it).
  template <element_word W>
  static std::size_t encoded_size(const chunk_changes<W>& in) {
    if (in.positions.empty()) return 0;
    return mask_bytes(in.numel) + detail::values_bytes<W>(in.mode, in.values);
  }

  template <element_word W>
  static status decode(std::span<const unsigned char> data, const chunk_context<W>& ctx, std::vector<std::uint32_t>& positions,
                       std::vector<W>& values) {
    positions.clear();
    values.clear();
    if (ctx.changes == 0) return data.empty() ? status{} : status{errc::malformed, "data present for a chunk without changes"};
    const std::size_t mb = mask_bytes(ctx.numel);
    if (data.size() < mb) return {errc::truncated, "bitmap"};
    positions.reserve(ctx.changes);
    for (std::size_t b = 0; b < mb; ++b) {
      unsigned bits = data[b];
      if (b == mb - 1 && ctx.numel % 8 != 0 && (bits >> (ctx.numel % 8)) != 0)
        return {errc::index_out_of_range, "bitmap marks elements past the end of the chunk"};
      while (bits) {
        if (positions.size() == ctx.changes) return {errc::malformed, "bitmap has more set bits than the chunk's change count"};
        positions.push_back(static_cast<std::uint32_t>(8 * b + static_cast<unsigned>(std::countr_zero(bits))));
        bits &= bits - 1;
      }
    }
    if (positions.size() != ctx.changes) return {errc::malformed, "bitmap has fewer set bits than the chunk's change count"};
    const unsigned char* p = data.data() + mb;
    const unsigned char* end = data.data() + data.size();
    if (auto s = detail::get_values<W>(p, end, ctx.mode, ctx.changes, values); !s) return s;
    if (p != end) return {errc::malformed, "trailing bytes after the values section"};
    return {};
  }
};

SPARSESYNC_NS_END
