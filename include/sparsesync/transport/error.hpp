// Transport failures: one error code enum with a std::error_category (for the non-throwing overloads, Asio
// style) and an exception that is a sparsesync::error, so callers that catch the library's errors catch these.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/error.hpp>

#include <string>
#include <string_view>
#include <system_error>

SPARSESYNC_NS_BEGIN

enum class transport_errc : int {
  ok = 0,
  invalid_argument = 1,   // options or arguments that cannot work (no key, frame over the limit, ...)
  key_file,               // the pre-shared key file is missing, unreadable, too short or too open
  connect_failed,         // resolving or connecting to the peer failed
  timed_out,              // an operation ran past its deadline; the connection is closed
  connection_closed,      // the connection was closed by this side or ended abruptly by the peer
  truncated,              // the peer's stream ended inside a frame or without an orderly close frame
  protocol,               // bytes that are not a sparsesync frame or handshake message (framing lost)
  frame_too_large,        // a frame (sent or announced) exceeds the maximum frame size
  auth_failed,            // the peers do not share the pre-shared key, or one side refused the other
  auth_mode_mismatch,     // one side requires authentication and the other runs with insecure_no_auth
  integrity,              // a frame's authentication tag does not verify (tampered or forged)
  sequence,               // a frame arrived with the wrong sequence number (replayed, reordered or dropped)
  tls,                    // TLS setup or handshake failed (certificates, keys, peer verification)
  backend,                // the underlying library (UCX, NCCL, CUDA, OpenSSL) reported an error
};

constexpr std::string_view to_string(transport_errc e) noexcept {
  switch (e) {
    case transport_errc::ok: return "ok";
    case transport_errc::invalid_argument: return "invalid argument";
    case transport_errc::key_file: return "key file error";
    case transport_errc::connect_failed: return "connect failed";
    case transport_errc::timed_out: return "timed out";
    case transport_errc::connection_closed: return "connection closed";
    case transport_errc::truncated: return "stream truncated";
    case transport_errc::protocol: return "protocol error";
    case transport_errc::frame_too_large: return "frame too large";
    case transport_errc::auth_failed: return "authentication failed";
    case transport_errc::auth_mode_mismatch: return "authentication mode mismatch";
    case transport_errc::integrity: return "frame integrity check failed";
    case transport_errc::sequence: return "frame sequence error";
    case transport_errc::tls: return "TLS error";
    case transport_errc::backend: return "backend error";
  }
  return "unknown transport error";
}

namespace detail {
class transport_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "sparsesync.transport"; }
  std::string message(int v) const override { return std::string(to_string(static_cast<transport_errc>(v))); }
};

// The library-wide errc a transport failure maps to, so code that only knows sparsesync::errc still
// classifies it sensibly.
constexpr errc core_errc(transport_errc e) noexcept {
  switch (e) {
    case transport_errc::invalid_argument:
    case transport_errc::key_file: return errc::invalid_argument;
    case transport_errc::truncated: return errc::truncated;
    case transport_errc::protocol:
    case transport_errc::frame_too_large:
    case transport_errc::sequence: return errc::malformed;
    case transport_errc::integrity: return errc::payload_checksum;
    default: return errc::io;
  }
}
}  // namespace detail

inline const std::error_category& transport_category() noexcept {
  static const detail::transport_category_impl c;
  return c;
}

inline std::error_code make_error_code(transport_errc e) noexcept { return {static_cast<int>(e), transport_category()}; }

// what() reads "<core errc>: transport: <transport errc>: <context>", e.g.
// "i/o error: transport: authentication failed: 127.0.0.1:4000: the server rejected this client's key".
class transport_error : public error {
 public:
  transport_error(transport_errc code, const std::string& context)
      : error(detail::core_errc(code), "transport: " + std::string(to_string(code)) + ": " + context),
        code_(code) {}

  [[nodiscard]] transport_errc transport_code() const noexcept { return code_; }
  [[nodiscard]] std::error_code error_code() const noexcept { return make_error_code(code_); }

 private:
  transport_errc code_;
};

SPARSESYNC_NS_END

template <>
struct std::is_error_code_enum<sparsesync::transport_errc> : std::true_type {};
