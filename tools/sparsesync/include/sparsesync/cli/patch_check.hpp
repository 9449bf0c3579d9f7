// Structural validation of a whole patch file without the base model (the library's check_patch,
// format/patch_check.hpp) plus the CLI's own parts: the target-header record and a progress bar. Used by
// `inspect`, and by `apply` before it touches BASE.
#pragma once

#include "progress.hpp"
#include "target_header.hpp"

#include <sparsesync/format/patch_check.hpp>

#include <optional>
#include <span>

namespace sparsesync::cli {

using bucket_summary = checked_bucket;

struct patch_summary : checked_patch {
  std::uint64_t file_bytes = 0;
  target_header_ref target_header;               // how apply gets NEW's safetensors header
  status target_header_status;                   // why there is none / why it is unusable (apply needs it)
};

// Validates `in` (a whole patch file) and fills `out`. With `decode`, every chunk is decoded too.
inline status check_patch(std::span<const unsigned char> in, patch_summary& out, bool decode = true, bool show_progress = false) {
  out = patch_summary{};
  out.file_bytes = in.size();
  std::optional<progress> bar;
  const status s = sparsesync::check_patch(in, out, decode, [&](std::uint32_t done, std::uint32_t total) {
    if (!bar) {  // the first call: the prologue is read
      out.target_header_status = read_target_header_metadata(out.prologue.metadata, out.target_header);
      bar.emplace("inspect", total, show_progress);
    } else {
      bar->update(done);
    }
  });
  bar.reset();
  return s;
}

}  // namespace sparsesync::cli
