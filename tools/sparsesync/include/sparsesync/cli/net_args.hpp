// The network commands' exit codes and security options, apart from the transport so that main.cpp and the
// command headers stay light.
#pragma once

#include <string>

namespace sparsesync::cli {

// Network failures get their own codes, so that a script can tell "retry later" from "fix the key".
inline constexpr int exit_network = 7;  // cannot connect, connection lost or timed out, the server refused or broke the protocol
inline constexpr int exit_auth = 8;     // authentication failed: wrong key, one side without a key, TLS certificate, unusable key file

inline constexpr const char* net_exit_code_help =
    "Exit codes:\n"
    "  0  success (pull: OUT holds the newest version; serve and pull --follow: stopped by SIGINT/SIGTERM)\n"
    "  1  usage error (bad command line)\n"
    "  2  I/O error (a file cannot be read or written), or an input is not a valid safetensors file\n"
    "  3  the server sent data that failed verification (nothing written)\n"
    "  6  internal error\n"
    "  7  network error: cannot connect, connection lost or timed out, server refused\n"
    "  8  authentication failed: wrong key, key or TLS on one side only (a client without TLS facing a TLS\n"
    "     server sees only a closed connection: 7), bad certificate, unusable key file\n"
    "  130, 143  interrupted by SIGINT, SIGTERM before the work was done (OUT untouched or a complete version)\n";

// ---- connection security ----

struct net_security_args {
  std::string key_file;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  bool insecure_no_auth = false;
};

}  // namespace sparsesync::cli
