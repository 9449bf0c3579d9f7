// Validating reader of one bucket frame: structure, lengths, tiling against the layout and the payload
// checksum are all checked before a single change is decoded.
#pragma once

#include <sparsesync/bucketing/bucket_plan.hpp>
#include <sparsesync/core/layout.hpp>
#include <sparsesync/format/wire.hpp>

#include <vector>

SPARSESYNC_NS_BEGIN

struct bucket_view {
  bucket_header header;
  std::vector<segment> segments;
  std::vector<chunk_entry> chunks;
  std::vector<std::uint64_t> chunk_offsets;  // start of each chunk's data within `data`
  std::span<const unsigned char> data;
  std::size_t frame_bytes = 0;               // header + tables + data
};

// Parses the bucket frame at the start of `in` (which may continue with more bytes).
inline status parse_bucket(std::span<const unsigned char> in, bucket_view& out) {
  if (auto s = detail::read_bucket_header(in, out.header); !s) return s;
  const auto& h = out.header;
  // Bound every table by the bytes actually present before allocating for it.
  const std::uint64_t avail = in.size() - bucket_header_bytes;
  if (std::uint64_t{h.segment_count} > avail / segment_entry_bytes) return {errc::truncated, "segment table"};
  const std::uint64_t after_segments = avail - segment_entry_bytes * std::uint64_t{h.segment_count};
  if (std::uint64_t{h.chunk_count} > after_segments / chunk_entry_bytes) return {errc::truncated, "chunk table"};
  const std::uint64_t after_tables = after_segments - chunk_entry_bytes * std::uint64_t{h.chunk_count};
  if (h.data_bytes > after_tables) return {errc::truncated, "chunk data"};

  const unsigned char* seg = in.data() + bucket_header_bytes;
  const unsigned char* table = seg + segment_entry_bytes * h.segment_count;
  const unsigned char* data = table + chunk_entry_bytes * std::uint64_t{h.chunk_count};
  out.segments.resize(h.segment_count);
  std::uint64_t numel = 0;
  for (std::uint32_t s = 0; s < h.segment_count; ++s) {
    const unsigned char* p = seg + segment_entry_bytes * s;
    auto& sg = out.segments[s];
    sg.tensor = detail::load_le<std::uint32_t>(p);
    if (detail::load_le<std::uint32_t>(p + 4) != 0) return {errc::malformed, "segment " + std::to_string(s) + ": reserved field is not zero"};
    sg.offset = detail::load_le<std::uint64_t>(p + 8);
    sg.count = detail::load_le<std::uint64_t>(p + 16);
    if (sg.count == 0 || sg.count > h.numel) return {errc::malformed, "segment " + std::to_string(s) + ": bad element count"};
    numel += sg.count;
  }
  if (numel != h.numel) return {errc::malformed, "segments do not add up to the bucket's element count"};

  const std::uint64_t chunk = std::uint64_t{1} << h.log2_chunk;
  out.chunks.resize(h.chunk_count);
  out.chunk_offsets.resize(h.chunk_count);
  std::uint64_t offset = 0, changed = 0;
  std::uint64_t payload = stream_hash(seg, segment_entry_bytes * h.segment_count, 0);
  for (std::uint32_t c = 0; c < h.chunk_count; ++c) {
    const unsigned char* e = table + chunk_entry_bytes * c;
    auto& ce = out.chunks[c];
    ce.changes = detail::load_le<std::uint32_t>(e);
    ce.data_bytes = detail::load_le<std::uint32_t>(e + 4);
    const std::uint64_t chunk_numel = std::min(chunk, h.numel - std::uint64_t{c} * chunk);
    if (ce.changes > chunk_numel) return {errc::malformed, "chunk " + std::to_string(c) + ": more changes than elements"};
    if (ce.data_bytes > h.data_bytes - offset) return {errc::malformed, "chunk " + std::to_string(c) + ": data runs past the bucket"};
    out.chunk_offsets[c] = offset;
    stream_hasher hs(c);
    hs.update(e, chunk_entry_bytes);
    hs.update(data + offset, ce.data_bytes);
    payload += hs.digest();
    offset += ce.data_bytes;
    changed += ce.changes;
  }
  if (offset != h.data_bytes) return {errc::malformed, "chunk sizes do not add up to the bucket's data length"};
  if (changed != h.changed) return {errc::malformed, "chunk change counts do not add up to the bucket's change count"};
  if (payload != h.payload_checksum) return {errc::payload_checksum, "segment table, chunk table or chunk data altered"};
  out.data = {data, static_cast<std::size_t>(h.data_bytes)};
  out.frame_bytes = static_cast<std::size_t>(h.total_bytes());
  return {};
}

// Checks that buckets, in order, tile the layout's non-empty tensors exactly once, in layout order.
class tiling_check {
 public:
  explicit tiling_check(const model_layout& layout) : layout_(layout) { skip_empty(); }

  status add(const bucket_view& b) {
    for (std::size_t s = 0; s < b.segments.size(); ++s) {
      const auto& sg = b.segments[s];
      if (tensor_ >= layout_.size()) return {errc::malformed, "segment " + std::to_string(s) + " lies past the last tensor"};
      if (sg.tensor != tensor_ || sg.offset != offset_)
        return {errc::malformed, "segment " + std::to_string(s) + " (tensor " + std::to_string(sg.tensor) + ", offset " +
                                     std::to_string(sg.offset) + ") does not continue the layout at tensor " + std::to_string(tensor_) +
                                     ", offset " + std::to_string(offset_)};
      const auto& info = layout_[tensor_];
      if (info.dtype != b.header.dtype)
        return {errc::malformed, "segment " + std::to_string(s) + ": tensor '" + info.name + "' is " + std::string(to_string(info.dtype)) +
                                     ", the bucket is " + std::string(to_string(b.header.dtype))};
      if (sg.count > info.numel() - offset_) return {errc::malformed, "segment " + std::to_string(s) + " runs past tensor '" + info.name + "'"};
      offset_ += sg.count;
      if (offset_ == info.numel()) {
        ++tensor_;
        offset_ = 0;
        skip_empty();
      }
    }
    return {};
  }

  [[nodiscard]] status finish() const {
    if (tensor_ != layout_.size())
      return {errc::malformed, "the patch does not cover tensor '" + layout_[tensor_].name + "' and those after it"};
    return {};
  }

 private:
  void skip_empty() {
    while (tensor_ < layout_.size() && layout_[tensor_].numel() == 0) ++tensor_;
  }

  const model_layout& layout_;
  std::size_t tensor_ = 0;
  std::uint64_t offset_ = 0;
};

SPARSESYNC_NS_END
