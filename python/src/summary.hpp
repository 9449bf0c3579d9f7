// What `inspect` reports about a patch, after checking everything a patch lets a reader check on its own
// (the library's check_patch, format/patch_check.hpp): totals over the buckets, for the Python dict.
#pragma once

#include <sparsesync/format/patch_check.hpp>

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

inline status summarize(std::span<const unsigned char> in, patch_summary& out) {
  out = patch_summary{};
  out.payload_bytes = in.size();
  checked_patch p;
  if (auto s = check_patch(in, p); !s) return s;
  out.header = p.prologue.header;
  out.layout = std::move(p.prologue.layout);
  for (const auto& b : p.buckets) {
    out.changed += b.header.changed;
    out.dense_bytes += b.header.numel * size_of(b.header.dtype);
    out.data_bytes += b.header.data_bytes;
    ++out.encoders[std::string(encoder_name(b.header.encoder))];
    out.value_modes.insert(std::string(to_string(b.header.mode)));
  }
  return {};
}

}  // namespace sparsesync::python
