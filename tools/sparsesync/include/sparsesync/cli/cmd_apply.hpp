// `sparsesync apply BASE PATCH -o OUT`: verifies everything, then writes OUT atomically (docs/CLI.md).
#pragma once

#include <string>

namespace sparsesync::cli {

struct apply_args {
  std::string base, patch, out;
  bool quiet = false;
};

// Runs the command; returns the exit code (exit_codes.hpp) or throws failure / sparsesync::error.
int run_apply(const apply_args& a);

}  // namespace sparsesync::cli
