// Error codes and the two error-reporting styles: status values for code that must not throw
// (decoders of untrusted input), and an exception for host-side convenience layers.
#pragma once

#include <sparsesync/core/config.hpp>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

SPARSESYNC_NS_BEGIN

enum class errc : int {
  ok = 0,
  invalid_argument,   // caller passed inconsistent inputs (sizes, dtypes, options)
  truncated,          // payload ends before a length it announced
  bad_magic,          // not a sparsesync payload, or framing lost
  unsupported_version,
  header_checksum,    // a header's own checksum does not match its bytes
  payload_checksum,   // chunk tables or chunk data were altered
  layout_mismatch,    // patch made for another model layout
  base_mismatch,      // receiver's current weights are not the patch's base
  target_mismatch,    // reconstructed weights differ from what the sender had
  malformed,          // a field is out of its allowed range or inconsistent with another
  index_out_of_range, // a change position lies outside its chunk
  non_canonical,      // a valid-looking encoding the encoder never produces (overlong varint, no-op change)
  io,                 // file or stream failure
  unsupported,        // valid, but not decodable here (an encoder without a GPU decoder on a GPU receiver)
};

constexpr std::string_view to_string(errc e) noexcept {
  switch (e) {
    case errc::ok: return "ok";
    case errc::invalid_argument: return "invalid argument";
    case errc::truncated: return "truncated";
    case errc::bad_magic: return "bad magic";
    case errc::unsupported_version: return "unsupported version";
    case errc::header_checksum: return "header checksum mismatch";
    case errc::payload_checksum: return "payload checksum mismatch";
    case errc::layout_mismatch: return "layout mismatch";
    case errc::base_mismatch: return "base mismatch";
    case errc::target_mismatch: return "target mismatch";
    case errc::malformed: return "malformed";
    case errc::index_out_of_range: return "index out of range";
    case errc::non_canonical: return "non-canonical encoding";
    case errc::io: return "i/o error";
    case errc::unsupported: return "unsupported here";
  }
  return "unknown error";
}

// The outcome of an operation on untrusted input. A default-constructed status is success.
class [[nodiscard]] status {
 public:
  status() = default;
  status(errc code, std::string message) : code_(code), message_(std::move(message)) {}

  [[nodiscard]] bool ok() const noexcept { return code_ == errc::ok; }
  explicit operator bool() const noexcept { return ok(); }
  [[nodiscard]] errc code() const noexcept { return code_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

  // "bucket 3: " + message: context added while the error travels outwards.
  status& prefix(std::string_view context) {
    if (!ok()) message_ = std::string(context) + ": " + message_;
    return *this;
  }

 private:
  errc code_ = errc::ok;
  std::string message_;
};

class error : public std::runtime_error {
 public:
  explicit error(const status& s)
      : std::runtime_error(std::string(to_string(s.code())) + ": " + s.message()), code_(s.code()) {}
  error(errc code, const std::string& message)
      : std::runtime_error(std::string(to_string(code)) + ": " + message), code_(code) {}
  [[nodiscard]] errc code() const noexcept { return code_; }

 private:
  errc code_;
};

inline void throw_if_error(const status& s) {
  if (!s.ok()) throw error(s);
}

SPARSESYNC_NS_END
