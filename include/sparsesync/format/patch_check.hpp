// Structural validation of a whole patch without the base model: everything FORMAT.md §6 lets a reader check
// on its own (the prologue, every bucket frame, the tiling of the layout, every chunk's decoding for encoders
// that do not need the base, the whole-model sums of the header). Tools that describe or pre-check a patch
// (the CLI's inspect and apply, Python's inspect) build on it; applying a patch checks all of it again.
#pragma once

#include <sparsesync/codec/registry.hpp>
#include <sparsesync/format/bucket_reader.hpp>
#include <sparsesync/format/patch_reader.hpp>

#include <algorithm>
#include <concepts>
#include <optional>
#include <span>
#include <string>
#include <vector>

SPARSESYNC_NS_BEGIN

struct checked_bucket {
  bucket_header header;
  std::uint64_t offset = 0;       // of the frame in the patch
  std::uint64_t frame_bytes = 0;  // header + segment table + chunk table + data
  std::vector<segment> segments;
  bool decoded = false;           // every chunk decoded (false for an encoder that needs the base, or without decoding)
};

struct checked_patch {
  patch_prologue prologue;
  std::vector<checked_bucket> buckets;
};

namespace detail {

template <class E, element_word W>
status check_bucket_chunks(const bucket_view& b) {
  if constexpr (E::needs_base) {
    return {};  // decodable only against the base
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
      // The built-in decoders refuse a zero delta themselves; this holds any encoder to it (a no-op change).
      if (h.mode == value_mode::ulp)
        for (std::size_t i = 0; i < values.size(); ++i)
          if (values[i] == 0) return {errc::non_canonical, "chunk " + std::to_string(c) + ": a ulp delta of 0 is not a change"};
    }
    return {};
  }
}

}  // namespace detail

// Validates `in` (a whole patch) and fills `out`. With `decode`, every chunk that can be decoded without the
// base is decoded too. `on_bucket(done, total)` is called once the prologue is read (done = 0) and after each
// bucket (for progress reports).
template <std::invocable<std::uint32_t, std::uint32_t> OnBucket>
status check_patch(std::span<const unsigned char> in, checked_patch& out, bool decode, OnBucket&& on_bucket) {
  out = checked_patch{};
  if (auto s = parse_patch_prologue(in, out.prologue); !s) {
    // Within one patch, a layout section that misses its own header's hash is damage, not another model.
    if (s.code() == errc::layout_mismatch) return {errc::malformed, "patch header: " + s.message()};
    // read_patch_header names the header itself; everything else in the prologue is named by what follows it.
    return s.message().rfind("patch header", 0) == 0 ? s : s.prefix("patch header");
  }
  const auto& ph = out.prologue.header;
  std::optional<tiling_check> tiling;
  if (out.prologue.layout) tiling.emplace(*out.prologue.layout);
  on_bucket(std::uint32_t{0}, ph.bucket_count);
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
    checked_bucket cb;
    cb.header = b.header;
    cb.offset = pos;
    cb.frame_bytes = b.frame_bytes;
    cb.segments = b.segments;
    if (decode) {
      status st;
      if (!visit_encoder(b.header.encoder, [&]<class E>(E) {
            cb.decoded = !E::needs_base;
            st = visit_word(b.header.dtype, [&]<class W>() { return detail::check_bucket_chunks<E, W>(b); });
          }))
        return {errc::malformed, where + ": unknown encoder"};  // (parse_bucket refuses ids outside the table)
      if (!st) return st.prefix(where);
    }
    numel += b.header.numel;
    base_sum += b.header.base_checksum;
    target_sum += b.header.target_checksum;
    pos += b.frame_bytes;
    out.buckets.push_back(std::move(cb));
    on_bucket(i + 1, ph.bucket_count);
  }
  if (pos != in.size()) return {errc::malformed, std::to_string(in.size() - pos) + " trailing bytes after the last bucket"};
  if (tiling)
    if (auto s = tiling->finish(); !s) return s;
  if (numel != ph.numel) return {errc::malformed, "buckets cover a different element count than the header's"};
  if (base_sum != ph.base_checksum) return {errc::malformed, "bucket base checksums do not add up to the patch's"};
  if (target_sum != ph.target_checksum) return {errc::malformed, "bucket target checksums do not add up to the patch's"};
  return {};
}

inline status check_patch(std::span<const unsigned char> in, checked_patch& out, bool decode = true) {
  return check_patch(in, out, decode, [](std::uint32_t, std::uint32_t) {});
}

SPARSESYNC_NS_END
