// Exit codes of the `sparsesync` command-line tool: a contract that scripts rely on (docs/CLI.md).
#pragma once

#include <sparsesync/core/error.hpp>

#include <stdexcept>
#include <string>

namespace sparsesync::cli {

enum exit_code : int {
  exit_ok = 0,               // success
  exit_usage = 1,            // bad command line (unknown option, missing argument, value out of range)
  exit_io = 2,               // a file cannot be read or written, or an input is not a valid safetensors file
  exit_bad_patch = 3,        // the patch is damaged, truncated, not a patch, or of an unsupported version
  exit_base_mismatch = 4,    // BASE is not the patch's base (layout or contents), or diff inputs' layouts differ
  exit_target_mismatch = 5,  // the rebuilt weights do not hash to the patch's target checksum
  exit_internal = 6,         // unexpected internal error (a bug: please report it)
};

inline constexpr const char* exit_code_help =
    "Exit codes:\n"
    "  0  success\n"
    "  1  usage error (bad command line)\n"
    "  2  I/O error, or an input is not a valid safetensors file\n"
    "  3  invalid or damaged patch (nothing written)\n"
    "  4  BASE is not the patch's base: layout or contents differ (nothing written);\n"
    "     for diff: BASE and NEW have different layouts\n"
    "  5  the rebuilt weights differ from the patch's target (nothing written)\n"
    "  6  internal error\n";

// The exit code for a library error code.
inline int exit_code_for(errc e) {
  switch (e) {
    case errc::ok: return exit_ok;
    case errc::io: return exit_io;
    case errc::layout_mismatch:
    case errc::base_mismatch: return exit_base_mismatch;
    case errc::target_mismatch: return exit_target_mismatch;
    case errc::invalid_argument: return exit_internal;
    case errc::truncated:
    case errc::bad_magic:
    case errc::unsupported_version:
    case errc::header_checksum:
    case errc::payload_checksum:
    case errc::malformed:
    case errc::index_out_of_range:
    case errc::non_canonical:
    case errc::unsupported: return exit_bad_patch;
  }
  return exit_internal;
}

// A failure that ends the command: message for stderr, and the process exit code.
class failure : public std::runtime_error {
 public:
  failure(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

// Throws a failure for a non-ok status, with its category ("payload checksum mismatch: ...") and a context.
inline void check(const status& s, const std::string& context = {}) {
  if (s.ok()) return;
  std::string msg = context.empty() ? std::string() : context + ": ";
  msg += std::string(to_string(s.code())) + ": " + s.message();
  throw failure(exit_code_for(s.code()), msg);
}

}  // namespace sparsesync::cli
