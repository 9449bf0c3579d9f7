// `sparsesync pull HOST:PORT -o OUT`: brings OUT to the newest version a `sparsesync serve` publishes
// (docs/CLI.md, "Network mode"), and with --follow keeps it there.
//
// State between runs: OUT itself, and a sidecar OUT.sparsesync.json naming the version OUT holds. The sidecar
// only supplies the version number: OUT's content checksum, recomputed at every start, is what the server
// matches against its history, so an edited OUT, a stale sidecar or one from another server costs a full
// transfer, never a wrong file.
#pragma once

#include "net_args.hpp"

#include <string>

namespace sparsesync::cli {

struct pull_args {
  std::string server, out;
  net_security_args security;
  bool follow = false;
  unsigned retries = 0;         // without --follow: further attempts after a network failure
  unsigned timeout_s = 120;     // without --follow: longest silence from the server (0: none)
  bool quiet = false;
};

// Runs the command; returns the exit code (exit_codes.hpp) or throws failure / sparsesync::error.
int run_pull(const pull_args& a);

}  // namespace sparsesync::cli
