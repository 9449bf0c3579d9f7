// Structural validation of a whole patch file without the base model: everything FORMAT.md §6 lets a reader
// check on its own (prologue, every bucket frame, tiling, chunk decoding, the sums of the header) plus the
// CLI's target-header record. Used by `inspect`, and by `apply` before it touches BASE.
#pragma once

#include "progress.hpp"
#include "target_header.hpp"

#include <sparsesync/codec/registry.hpp>
#include <sparsesync/format/bucket_reader.hpp>
#include <sparsesync/format/patch_reader.hpp>

#include <string>
#include <vector>

namespace sparsesync::cli {

struct bucket_summary {
  bucket_header header;
  std::uint64_t offset = 0;       // of the frame in the patch file
  std::uint64_t frame_bytes = 0;  // header + segment table + chunk table + data
  std::vector<segment> segments;
  bool decoded = false;           // every chunk decoded (false only for an encoder that needs the base)
};

struct patch_summary {
  patch_prologue prologue;
  std::vector<bucket_summary> buckets;
  std::uint64_t file_bytes = 0;
  target_header_ref target_header;               // how apply gets NEW's safetensors header
  status target_header_status;                   // why there is none / why it is unusable (apply needs it)
};

namespace detail_check {

template <class E, element_word W>
status decode_chunks(const bucket_view& b) {
  if constexpr (E::needs_base) {
    return {};
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
      if (h.mode == value_mode::ulp)
        for (std::size_t i = 0; i < values.size(); ++i)
          if (values[i] == 0) return {errc::non_canonical, "chunk " + std::to_string(c) + ": a ulp delta of 0 is not a change"};
    }
    return {};
  }
}

}  // namespace detail_check

// Validates `in` (a whole patch file) and fills `out`. With `decode`, every chunk is decoded too.
inline status check_patch(std::span<const unsigned char> in, patch_summary& out, bool decode = true, bool show_progress = false) {
  out = patch_summary{};
  out.file_bytes = in.size();
  if (auto s = parse_patch_prologue(in, out.prologue); !s) {
    // Within one file, a layout section that misses its own header's hash is damage, not another model.
    if (s.code() == errc::layout_mismatch) return {errc::malformed, "patch header: " + s.message()};
    // read_patch_header names the header itself; everything else in the prologue is named by what follows it.
    return s.message().rfind("patch header", 0) == 0 ? s : s.prefix("patch header");
  }
  const auto& ph = out.prologue.header;
  out.target_header_status = read_target_header_metadata(out.prologue.metadata, out.target_header);

  std::optional<tiling_check> tiling;
  if (out.prologue.layout) tiling.emplace(*out.prologue.layout);
  progress bar("inspect", ph.bucket_count, show_progress);
  std::uint64_t pos = out.prologue.bytes, numel = 0, base_sum = 0, target_sum = 0;
  // Never trust bucket_count for a reservation: each frame takes at least a header.
  out.buckets.reserve(std::min<std::uint64_t>(ph.bucket_count, (in.size() - pos) / bucket_header_bytes));
  for (std::uint32_t i = 0; i < ph.bucket_count; ++i) {
    const std::string where = "bucket " + std::to_string(i);
    if (pos == in.size()) return {errc::truncated, where + ": the file ends before bucket " + std::to_string(i) + " of " + std::to_string(ph.bucket_count)};
    bucket_view b;
    if (auto s = parse_bucket(in.subspan(pos), b); !s) return s.prefix(where);
    if (b.header.index != i) return {errc::malformed, where + ": header says index " + std::to_string(b.header.index)};
    if (tiling)
      if (auto s = tiling->add(b); !s) return s.prefix(where);
    bucket_summary bs;
    bs.header = b.header;
    bs.offset = pos;
    bs.frame_bytes = b.frame_bytes;
    bs.segments = b.segments;
    if (decode) {
      status st;
      visit_encoder(b.header.encoder, [&]<class E>(E) {
        bs.decoded = !E::needs_base;
        st = visit_word(b.header.dtype, [&]<class W>() { return detail_check::decode_chunks<E, W>(b); });
      });
      if (!st) return st.prefix(where);
    }
    numel += b.header.numel;
    base_sum += b.header.base_checksum;
    target_sum += b.header.target_checksum;
    pos += b.frame_bytes;
    out.buckets.push_back(std::move(bs));
    bar.update(i + 1);
  }
  bar.done();
  if (pos != in.size()) return {errc::malformed, std::to_string(in.size() - pos) + " trailing bytes after the last bucket"};
  if (tiling)
    if (auto s = tiling->finish(); !s) return s;
  if (numel != ph.numel) return {errc::malformed, "buckets cover a different element count than the header's"};
  if (base_sum != ph.base_checksum) return {errc::malformed, "bucket base checksums do not add up to the patch's"};
  if (target_sum != ph.target_checksum) return {errc::malformed, "bucket target checksums do not add up to the patch's"};
  return {};
}

}  // namespace sparsesync::cli
