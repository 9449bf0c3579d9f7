// Validating reader of a patch's header and its optional layout and metadata sections.
#pragma once

#include <sparsesync/core/layout.hpp>
#include <sparsesync/format/wire.hpp>

#include <optional>

SPARSESYNC_NS_BEGIN

struct patch_prologue {
  patch_header header;
  std::optional<model_layout> layout;        // present with flag_layout_section
  std::span<const unsigned char> metadata;   // empty without flag_metadata_section
  std::size_t bytes = 0;                     // header + sections: where the first bucket starts
};

inline status parse_patch_prologue(std::span<const unsigned char> in, patch_prologue& out) {
  if (auto s = detail::read_patch_header(in, out.header); !s) return s;
  std::size_t pos = patch_header_bytes;
  const auto& h = out.header;
  if (h.layout_bytes > in.size() - pos) return {errc::truncated, "layout section"};
  if (h.flags & flag_layout_section) {
    model_layout layout;
    std::size_t used = 0;
    const auto section = in.subspan(pos, h.layout_bytes);
    if (auto s = model_layout::parse(section, layout, used); !s) return s;
    if (used != h.layout_bytes) return {errc::malformed, "layout section length"};
    if (stream_hash(section.data(), section.size(), 0) != h.layout_hash)
      return {errc::layout_mismatch, "the layout section does not match the header's layout hash"};
    if (layout.numel() != h.numel) return {errc::malformed, "header element count differs from the layout's"};
    out.layout = std::move(layout);
    pos += h.layout_bytes;
  }
  if (h.metadata_bytes > in.size() - pos) return {errc::truncated, "metadata section"};
  out.metadata = in.subspan(pos, h.metadata_bytes);
  const std::uint64_t metadata_sum = h.metadata_bytes ? stream_hash(out.metadata.data(), out.metadata.size(), 0) : 0;
  if (metadata_sum != h.metadata_checksum) return {errc::payload_checksum, "metadata section altered"};
  pos += h.metadata_bytes;
  out.bytes = pos;
  return {};
}

SPARSESYNC_NS_END
