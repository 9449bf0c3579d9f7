// The CLI's use of a patch's metadata section: how apply gets NEW's safetensors header back, byte for byte.
// Two forms (docs/CLI.md, "Patch metadata"); the patch header's metadata checksum protects both:
//
//  * stored:       le64(n) || n bytes of JSON — NEW's exact header, as it stands at the start of NEW;
//  * same as BASE: "SSTHSAME" || le64(XXH64(BASE's header bytes, seed 0)) — 16 bytes, written when NEW's
//                  header is byte-identical to BASE's (the usual case between two checkpoints of one run);
//                  apply then copies BASE's header after checking its hash.
// The forms cannot be confused: a stored record of 16 bytes has n = 8, and the magic read as le64 is not 8.
#pragma once

#include <sparsesync/core/error.hpp>
#include <sparsesync/core/hash.hpp>
#include <sparsesync/core/little_endian.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

namespace sparsesync::cli {

inline constexpr unsigned char same_header_magic[8] = {'S', 'S', 'T', 'H', 'S', 'A', 'M', 'E'};
inline constexpr std::size_t same_header_record_bytes = 16;

struct target_header_ref {
  std::span<const unsigned char> stored;     // the stored form: NEW's header (empty for the other form)
  std::optional<std::uint64_t> same_as_base; // the reference form: XXH64 of BASE's (and NEW's) header bytes
};

inline std::uint64_t header_hash(std::span<const unsigned char> header) { return stream_hash(header.data(), header.size(), 0); }

inline std::vector<unsigned char> make_same_header_record(std::span<const unsigned char> base_header) {
  std::vector<unsigned char> out(same_header_record_bytes);
  std::memcpy(out.data(), same_header_magic, 8);
  detail::store_le<std::uint64_t>(out.data() + 8, header_hash(base_header));
  return out;
}

// Decodes the metadata section.
inline status read_target_header_metadata(std::span<const unsigned char> metadata, target_header_ref& out) {
  out = {};
  if (metadata.empty()) return {errc::malformed, "the patch carries no target file header (not made by `sparsesync diff`)"};
  if (metadata.size() == same_header_record_bytes && std::memcmp(metadata.data(), same_header_magic, 8) == 0) {
    out.same_as_base = detail::load_le<std::uint64_t>(metadata.data() + 8);
    return {};
  }
  if (metadata.size() < 8) return {errc::malformed, "stored target header: shorter than its 8-byte length"};
  const std::uint64_t n = detail::load_le<std::uint64_t>(metadata.data());
  if (n != metadata.size() - 8) return {errc::malformed, "stored target header: its length field does not match the metadata section"};
  out.stored = metadata;
  return {};
}

}  // namespace sparsesync::cli
