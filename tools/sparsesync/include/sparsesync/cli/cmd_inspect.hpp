// `sparsesync inspect PATCH [--json]`: validates a patch on its own and reports what it holds.
#pragma once

#include <string>

namespace sparsesync::cli {

struct inspect_args {
  std::string patch;
  bool json = false;
  bool quiet = false;
};

// Runs the command; returns the exit code (exit_codes.hpp) or throws failure / sparsesync::error.
int run_inspect(const inspect_args& a);

}  // namespace sparsesync::cli
