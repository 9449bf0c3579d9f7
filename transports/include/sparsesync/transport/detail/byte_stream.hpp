// What the framing and handshake layers need from a connection (an Asio socket, a TLS stream, a UCX stream
// endpoint), so that authentication and framing are written, and reviewed, once.
#pragma once

#include <sparsesync/core/config.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>

SPARSESYNC_NS_BEGIN
namespace detail {

using clock = std::chrono::steady_clock;
using deadline = clock::time_point;

inline deadline deadline_after(std::chrono::milliseconds timeout) {
  return timeout.count() <= 0 ? deadline::max() : clock::now() + timeout;
}

// A `byte_stream` S:
//  1. `s.write(pieces, deadline)` writes every byte of the pieces in order, or throws transport_error;
//  2. `s.read(out, deadline)` fills `out` and returns its size, or returns fewer bytes only when the peer ended
//     the stream; it throws transport_error on failure and transport_errc::timed_out at the deadline;
//  3. `s.shutdown_send()` ends the sending direction after the last write (TCP FIN), noexcept;
//  4. `s.abort()` tears the connection down from any thread, making pending and later calls fail, noexcept;
//  5. `s.describe()` names the connection for error messages ("tcp 127.0.0.1:4000").
// Calls 1 and 2 may run concurrently (one writer, one reader); the framing layer serialises each direction.
template <class S>
concept byte_stream = requires(S& s, const S& cs, std::span<const std::span<const std::byte>> pieces,
                               std::span<std::byte> out, deadline d) {
  s.write(pieces, d);
  { s.read(out, d) } -> std::same_as<std::size_t>;
  s.shutdown_send();
  s.abort();
  { cs.describe() } -> std::convertible_to<std::string>;
};

}  // namespace detail
SPARSESYNC_NS_END
