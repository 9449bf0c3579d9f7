// `sparsesync diff BASE NEW -o PATCH`: encodes the change from BASE to NEW (docs/CLI.md).
#pragma once

#include <sparsesync/bucketing/fixed_bytes.hpp>
#include <sparsesync/cli/link_args.hpp>
#include <sparsesync/format/wire.hpp>

#include <cstdint>
#include <string>

namespace sparsesync::cli {

struct diff_args {
  std::string base, next, out;
  std::string encoder = "auto";
  link_args link;
  std::string values = "ulp";
  std::uint64_t bucket_bytes = fixed_bytes::default_bytes;
  unsigned chunk_log2 = default_log2_chunk;
  std::uint64_t base_version = 0;
  std::uint64_t target_version = 1;
  bool full_header = false;  // store NEW's header even when it equals BASE's
  bool quiet = false;
};

// Runs the command; returns the exit code (exit_codes.hpp) or throws failure / sparsesync::error.
int run_diff(const diff_args& a);

}  // namespace sparsesync::cli
