// What `inspect` reports about a patch, after checking everything a patch lets a reader check on its own
// (FORMAT.md section 6): the prologue, every bucket frame, the tiling of the layout, every chunk's decoding
// (for encoders that do not need the base) and the whole-model sums of the header.
#pragma once

#include <sparsesync/codec/registry.hpp>
#include <sparsesync/format/bucket_reader.hpp>
#include <sparsesync/format/patch_reader.hpp>

#include <map>
#include <optional>
#include <set>
#include <string>

namespace sparsesync::python {

struct patch_summary {
  patch_header header;
  std::optional<model_layout> layout;
  std::uint64_t payload_bytes = 0, changed = 0, dense_bytes = 0, data_bytes = 0;
  std::map<std::string, std::uint64_t> encoders;  // buckets per encoder name
  std::set<std::string> value_modes;
};

namespace detail_summary {

template <class E, element_word W>
status decode_all(const bucket_view& b) {
  if constexpr (E::needs_base) {
    return {};  // decodable only against the base, which inspect does not have
  } else {
    const auto& h = b.header;
    const std::uint64_t chunk = std::uint64_t{1} << h.log2_chunk;
    std::vector<std::uint32_t> positions;
    std::vector<W> values;
    for (std::uint32_t c = 0; c < h.chunk_count; ++c) {
      chunk_context<W> ctx;
      ctx.numel = static_cast<std::uint32_t>(std::min(chunk, h.numel - std::uint64_t{c} * chunk));
      ctx.changes = b.chunks[c].changes;
      ctx.mode = h.mode;
      positions.clear();
      values.clear();
      if (auto s = E::template decode<W>(b.data.subspan(b.chunk_offsets[c], b.chunks[c].data_bytes), ctx, positions, values); !s)
        return s.prefix("chunk " + std::to_string(c));
      if (positions.size() != ctx.changes || values.size() != ctx.changes)
        return {errc::malformed, "chunk " + std::to_string(c) + ": decoder returned the wrong change count"};
    }
    return {};
  }
}

}  // namespace detail_summary

inline status summarize(std::span<const unsigned char> in, patch_summary& out) {
  out = patch_summary{};
  out.payload_bytes = in.size();
  patch_prologue pro;
  if (auto s = parse_patch_prologue(in, pro); !s) {
    // Within one patch, a layout section that misses its own header's hash is damage, not another model.
    if (s.code() == errc::layout_mismatch) return {errc::malformed, "patch header: " + s.message()};
    return s.prefix("patch header");
  }
  out.header = pro.header;
  out.layout = pro.layout;
  std::optional<tiling_check> tiling;
  if (out.layout) tiling.emplace(*out.layout);
  std::uint64_t pos = pro.bytes, numel = 0, base_sum = 0, target_sum = 0;
  for (std::uint32_t i = 0; i < pro.header.bucket_count; ++i) {
    const std::string where = "bucket " + std::to_string(i);
    if (pos == in.size()) return {errc::truncated, where + ": the patch ends before it"};
    bucket_view b;
    if (auto s = parse_bucket(in.subspan(pos), b); !s) return s.prefix(where);
    if (b.header.index != i) return {errc::malformed, where + ": header says index " + std::to_string(b.header.index)};
    if (tiling)
      if (auto s = tiling->add(b); !s) return s.prefix(where);
    status st;
    if (!visit_encoder(b.header.encoder, [&]<class E>(E) {
          st = visit_word(b.header.dtype, [&]<class W>() { return detail_summary::decode_all<E, W>(b); });
        }))
      return {errc::malformed, where + ": unknown encoder"};
    if (!st) return st.prefix(where);
    numel += b.header.numel;
    base_sum += b.header.base_checksum;
    target_sum += b.header.target_checksum;
    out.changed += b.header.changed;
    out.dense_bytes += b.header.numel * size_of(b.header.dtype);
    out.data_bytes += b.header.data_bytes;
    ++out.encoders[std::string(encoder_name(b.header.encoder))];
    out.value_modes.insert(std::string(to_string(b.header.mode)));
    pos += b.frame_bytes;
  }
  if (pos != in.size()) return {errc::malformed, std::to_string(in.size() - pos) + " trailing bytes after the last bucket"};
  if (tiling)
    if (auto s = tiling->finish(); !s) return s;
  if (numel != pro.header.numel) return {errc::malformed, "buckets cover a different element count than the header's"};
  if (base_sum != pro.header.base_checksum) return {errc::malformed, "bucket base checksums do not add up to the patch's"};
  if (target_sum != pro.header.target_checksum) return {errc::malformed, "bucket target checksums do not add up to the patch's"};
  return {};
}

}  // namespace sparsesync::python
