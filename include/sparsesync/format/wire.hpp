// Wire format v1: fixed-width little-endian headers (docs/FORMAT.md is the normative description).
#pragma once

#include <sparsesync/codec/encoder.hpp>
#include <sparsesync/codec/encoder_table.hpp>
#include <sparsesync/core/dtype.hpp>
#include <sparsesync/core/error.hpp>
#include <sparsesync/core/hash.hpp>
#include <sparsesync/core/little_endian.hpp>

#include <cstdint>
#include <span>
#include <string>

SPARSESYNC_NS_BEGIN

inline constexpr std::uint16_t format_version = 1;
inline constexpr std::uint32_t patch_magic = 0x54505353;   // "SSPT"
inline constexpr std::uint32_t bucket_magic = 0x4B425353;  // "SSBK"
inline constexpr std::size_t patch_header_bytes = 88;
inline constexpr std::size_t bucket_header_bytes = 80;
inline constexpr std::size_t segment_entry_bytes = 24;
inline constexpr std::size_t chunk_entry_bytes = 8;
inline constexpr unsigned min_log2_chunk = 8;
inline constexpr unsigned max_log2_chunk = 24;
inline constexpr unsigned default_log2_chunk = 16;

// Patch header flags.
inline constexpr std::uint32_t flag_layout_section = 1u << 0;    // the model layout follows the header
inline constexpr std::uint32_t flag_metadata_section = 1u << 1;  // opaque application bytes follow
inline constexpr std::uint32_t flag_from_zero = 1u << 2;         // the base is the all-zero model (a full transfer)
inline constexpr std::uint32_t known_flags = flag_layout_section | flag_metadata_section | flag_from_zero;

struct patch_header {
  std::uint32_t flags = 0;
  std::uint32_t bucket_count = 0;
  std::uint64_t layout_hash = 0;
  std::uint64_t base_version = 0;
  std::uint64_t target_version = 0;
  std::uint64_t numel = 0;             // elements the patch covers: the whole layout
  std::uint64_t base_checksum = 0;     // content checksum of the whole base model
  std::uint64_t target_checksum = 0;   // content checksum of the whole target model
  std::uint32_t layout_bytes = 0;      // length of the layout section (0 without flag_layout_section)
  std::uint32_t metadata_bytes = 0;    // length of the metadata section (0 without flag_metadata_section)
  std::uint64_t metadata_checksum = 0; // XXH64 of the metadata section, seed 0 (0 when there is none)
};

struct bucket_header {
  std::uint32_t index = 0;
  encoder_id encoder = encoder_id::raw_index32;
  value_mode mode = value_mode::absolute;
  sparsesync::dtype dtype = dtype::bf16;
  std::uint8_t log2_chunk = default_log2_chunk;
  std::uint32_t segment_count = 0;
  std::uint64_t numel = 0;
  std::uint64_t changed = 0;
  std::uint32_t chunk_count = 0;
  std::uint64_t data_bytes = 0;
  std::uint64_t base_checksum = 0;
  std::uint64_t target_checksum = 0;
  std::uint64_t payload_checksum = 0;

  [[nodiscard]] std::uint64_t total_bytes() const {
    return bucket_header_bytes + segment_entry_bytes * std::uint64_t{segment_count} + chunk_entry_bytes * std::uint64_t{chunk_count} +
           data_bytes;
  }
};

struct chunk_entry {
  std::uint32_t changes = 0;
  std::uint32_t data_bytes = 0;
};

namespace detail {

inline void write_patch_header(unsigned char* p, const patch_header& h) {
  store_le<std::uint32_t>(p + 0, patch_magic);
  store_le<std::uint16_t>(p + 4, format_version);
  store_le<std::uint16_t>(p + 6, static_cast<std::uint16_t>(patch_header_bytes));
  store_le<std::uint32_t>(p + 8, h.flags);
  store_le<std::uint32_t>(p + 12, h.bucket_count);
  store_le<std::uint64_t>(p + 16, h.layout_hash);
  store_le<std::uint64_t>(p + 24, h.base_version);
  store_le<std::uint64_t>(p + 32, h.target_version);
  store_le<std::uint64_t>(p + 40, h.numel);
  store_le<std::uint64_t>(p + 48, h.base_checksum);
  store_le<std::uint64_t>(p + 56, h.target_checksum);
  store_le<std::uint32_t>(p + 64, h.layout_bytes);
  store_le<std::uint32_t>(p + 68, h.metadata_bytes);
  store_le<std::uint64_t>(p + 72, h.metadata_checksum);
  store_le<std::uint64_t>(p + 80, stream_hash(p, 80, 0));
}

inline status read_patch_header(std::span<const unsigned char> in, patch_header& h) {
  if (in.size() < patch_header_bytes)
    return {errc::truncated, "patch header: " + std::to_string(in.size()) + " of its " + std::to_string(patch_header_bytes) + " bytes"};
  const unsigned char* p = in.data();
  if (load_le<std::uint32_t>(p) != patch_magic) return {errc::bad_magic, "not a sparsesync patch (bad magic)"};
  const auto version = load_le<std::uint16_t>(p + 4);
  if (version != format_version)
    return {errc::unsupported_version, "patch format version " + std::to_string(version) + ", this build reads version 1"};
  if (load_le<std::uint16_t>(p + 6) != patch_header_bytes) return {errc::malformed, "patch header length"};
  if (load_le<std::uint64_t>(p + 80) != stream_hash(p, 80, 0)) return {errc::header_checksum, "patch header: its checksum does not match"};
  h.flags = load_le<std::uint32_t>(p + 8);
  h.bucket_count = load_le<std::uint32_t>(p + 12);
  h.layout_hash = load_le<std::uint64_t>(p + 16);
  h.base_version = load_le<std::uint64_t>(p + 24);
  h.target_version = load_le<std::uint64_t>(p + 32);
  h.numel = load_le<std::uint64_t>(p + 40);
  h.base_checksum = load_le<std::uint64_t>(p + 48);
  h.target_checksum = load_le<std::uint64_t>(p + 56);
  h.layout_bytes = load_le<std::uint32_t>(p + 64);
  h.metadata_bytes = load_le<std::uint32_t>(p + 68);
  h.metadata_checksum = load_le<std::uint64_t>(p + 72);
  if (h.flags & ~known_flags) return {errc::unsupported_version, "patch uses unknown flags " + std::to_string(h.flags)};
  if (!(h.flags & flag_layout_section) && h.layout_bytes != 0) return {errc::malformed, "layout length without a layout section"};
  if (!(h.flags & flag_metadata_section) && h.metadata_bytes != 0) return {errc::malformed, "metadata length without a metadata section"};
  return {};
}

inline void write_bucket_header(unsigned char* p, const bucket_header& h) {
  store_le<std::uint32_t>(p + 0, bucket_magic);
  store_le<std::uint32_t>(p + 4, h.index);
  p[8] = static_cast<unsigned char>(h.encoder);
  p[9] = static_cast<unsigned char>(h.mode);
  p[10] = static_cast<unsigned char>(h.dtype);
  p[11] = h.log2_chunk;
  store_le<std::uint32_t>(p + 12, h.segment_count);
  store_le<std::uint64_t>(p + 16, h.numel);
  store_le<std::uint64_t>(p + 24, h.changed);
  store_le<std::uint32_t>(p + 32, h.chunk_count);
  store_le<std::uint32_t>(p + 36, 0);
  store_le<std::uint64_t>(p + 40, h.data_bytes);
  store_le<std::uint64_t>(p + 48, h.base_checksum);
  store_le<std::uint64_t>(p + 56, h.target_checksum);
  store_le<std::uint64_t>(p + 64, h.payload_checksum);
  store_le<std::uint64_t>(p + 72, stream_hash(p, 72, 0));
}

// Reads and checks a bucket header on its own (fields that need the layout are checked by the reader).
inline status read_bucket_header(std::span<const unsigned char> in, bucket_header& h) {
  if (in.size() < bucket_header_bytes) return {errc::truncated, "bucket header"};
  const unsigned char* p = in.data();
  if (load_le<std::uint32_t>(p) != bucket_magic) return {errc::bad_magic, "bucket header magic"};
  if (load_le<std::uint64_t>(p + 72) != stream_hash(p, 72, 0)) return {errc::header_checksum, "bucket header"};
  h.index = load_le<std::uint32_t>(p + 4);
  const auto enc = p[8];
  const auto mode = p[9];
  const auto dt = p[10];
  h.log2_chunk = p[11];
  h.segment_count = load_le<std::uint32_t>(p + 12);
  h.numel = load_le<std::uint64_t>(p + 16);
  h.changed = load_le<std::uint64_t>(p + 24);
  h.chunk_count = load_le<std::uint32_t>(p + 32);
  const auto reserved = load_le<std::uint32_t>(p + 36);
  h.data_bytes = load_le<std::uint64_t>(p + 40);
  h.base_checksum = load_le<std::uint64_t>(p + 48);
  h.target_checksum = load_le<std::uint64_t>(p + 56);
  h.payload_checksum = load_le<std::uint64_t>(p + 64);
  if (!is_builtin_encoder(enc)) return {errc::malformed, "unknown encoder id " + std::to_string(enc)};
  if (mode > 1) return {errc::malformed, "unknown value mode " + std::to_string(mode)};
  if (!is_valid(static_cast<dtype>(dt))) return {errc::malformed, "unknown dtype " + std::to_string(dt)};
  if (h.log2_chunk < min_log2_chunk || h.log2_chunk > max_log2_chunk)
    return {errc::malformed, "chunk size 2^" + std::to_string(h.log2_chunk) + " outside 2^8..2^24"};
  if (reserved != 0) return {errc::malformed, "reserved field is not zero"};
  h.encoder = static_cast<encoder_id>(enc);
  h.mode = static_cast<value_mode>(mode);
  h.dtype = static_cast<dtype>(dt);
  if (h.numel == 0) return {errc::malformed, "empty bucket"};
  if (h.changed > h.numel) return {errc::malformed, "more changes than elements"};
  const std::uint64_t chunks = ((h.numel - 1) >> h.log2_chunk) + 1;
  if (chunks != h.chunk_count) return {errc::malformed, "chunk count does not match the element count"};
  if (h.segment_count == 0) return {errc::malformed, "bucket without segments"};
  return {};
}

}  // namespace detail
SPARSESYNC_NS_END
