// `sparsesync serve --listen HOST:PORT --watch DIR`: publishes every new checkpoint that appears in DIR as the
// next version to every subscriber (docs/CLI.md, "Network mode").
//
// Threads: the main thread watches DIR and publishes; one thread accepts connections and does nothing else;
// each accepted connection gets a short-lived handler thread for the transport handshake (bounded by its
// timeout, so a silent peer holds only its own thread), the pull request and the catalog, then belongs to
// the sync::sender, which runs its session on a thread of its own. At most max_handshakes connections may be
// unauthenticated at once; one more is closed at once. A file whose layout differs from the current one starts a new sender:
// the old one ends its sessions in order and pullers reconnect to the new layout.
#pragma once

#include <sparsesync/cli/link_args.hpp>

#include "net_args.hpp"

#include <sparsesync/format/wire.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace sparsesync::cli {

struct serve_args {
  std::string listen, watch, port_file;
  net_security_args security;
  std::string encoder = "auto";
  link_args link;
  std::string values = "ulp";
  std::uint64_t bucket_bytes = 16ull << 20;  // small buckets pipeline better; each costs ~100 bytes
  unsigned chunk_log2 = default_log2_chunk;
  unsigned poll_ms = 500;
  std::size_t history = 8;
  unsigned ack_timeout_ms = 60'000;
  unsigned peer_timeout_s = 300;
  unsigned max_handshakes = 512;  // connections not yet authenticated (each holds a thread until it is)
  bool quiet = false;
};

// Runs the command; returns the exit code (exit_codes.hpp) or throws failure / sparsesync::error.
int run_serve(const serve_args& a);

}  // namespace sparsesync::cli
