// The `transport` and `listener` concepts: how the sync engine moves framed messages between two processes.
//
// A transport is a reliable, ordered, point-to-point channel of frames. A frame is a byte vector of at most
// max_frame_size() bytes (never more than hard_max_frame_size); it arrives whole and byte-identical, or the
// receiver gets an error: frames are never split, merged, reordered or silently dropped. The API blocks: the
// engine pipelines with threads, and one thread may send while another receives on the same transport.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/transport/error.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

SPARSESYNC_NS_BEGIN

// No transport accepts a frame above 1 GiB: an announced length past the limit is refused before any
// allocation, so a corrupt or hostile length field can never make the receiver allocate more.
inline constexpr std::size_t hard_max_frame_size = std::size_t{1} << 30;
inline constexpr std::size_t default_max_frame_size = hard_max_frame_size;

// "No deadline" for the timeout options of every transport.
inline constexpr std::chrono::milliseconds no_timeout{0};

struct transport_tag {};
struct listener_tag {};

// A type T is a `transport` when:
//  1. it opts in with `using transport_concept = sparsesync::transport_tag;`
//  2. it is move constructible (connections are handed between threads and containers), copying is not required;
//  3. `t.send(std::span<const std::byte>)` sends one frame, blocking until the transport owns the bytes
//     (the span may be reused on return); it throws sparsesync::transport_error on failure, and frames above
//     max_frame_size() are refused with transport_errc::frame_too_large;
//  4. `t.receive(std::vector<std::byte>&)` -> bool blocks for the next frame and replaces the vector's
//     contents with it, returning true; it returns false once the peer has closed in
//     order (every frame the peer sent before close() has been received). An abrupt end, a tampered frame
//     or a frame announcing more than max_frame_size() bytes throws, and leaves the vector empty;
//  5. `t.close()` closes the sending direction in order: the peer's receive() returns false after the frames
//     already sent. It never throws, is idempotent, and the transport can still receive afterwards;
//  6. `t.max_frame_size()` (const) returns the largest frame the transport sends and accepts.
// Transports also provide `send(data, std::error_code&)` and `receive(out, std::error_code&)` overloads
// that report errors through the code instead of throwing, but the concept does not require them.
template <class T>
concept transport =
    std::same_as<typename T::transport_concept, transport_tag> && std::move_constructible<T> &&
    requires(T& t, const T& ct, std::span<const std::byte> in, std::vector<std::byte>& out) {
      t.send(in);
      { t.receive(out) } -> std::same_as<bool>;
      t.close();
      { ct.max_frame_size() } -> std::convertible_to<std::size_t>;
    };

// A type L is a `listener` when:
//  1. it opts in with `using listener_concept = sparsesync::listener_tag;`
//  2. `L::transport_type` names a `transport`;
//  3. `l.accept()` blocks until a peer connects (and, where the transport authenticates, proves itself),
//     returning the connected transport; it throws sparsesync::transport_error on failure, after which the
//     listener still accepts further peers unless it was closed;
//  4. `l.close()` stops listening; an accept() blocked in another thread then throws
//     transport_errc::connection_closed. It never throws and is idempotent.
template <class L>
concept listener = std::same_as<typename L::listener_concept, listener_tag> && transport<typename L::transport_type> &&
                   requires(L& l) {
                     { l.accept() } -> std::same_as<typename L::transport_type>;
                     l.close();
                   };

namespace detail {
template <class T>
struct transport_diagnostics {
  static_assert(requires { typename T::transport_concept; },
                "sparsesync: a transport must opt in with `using transport_concept = sparsesync::transport_tag;`");
  static_assert(std::move_constructible<T>, "sparsesync: a transport must be move constructible");
  static_assert(requires(T& t, std::span<const std::byte> in) { t.send(in); },
                "sparsesync: a transport needs `void send(std::span<const std::byte> frame);`");
  static_assert(requires(T& t, std::vector<std::byte>& out) {
    { t.receive(out) } -> std::same_as<bool>;
  }, "sparsesync: a transport needs `bool receive(std::vector<std::byte>& frame);` returning false on orderly close");
  static_assert(requires(T& t) { t.close(); }, "sparsesync: a transport needs `void close() noexcept;`");
  static_assert(requires(const T& t) {
    { t.max_frame_size() } -> std::convertible_to<std::size_t>;
  }, "sparsesync: a transport needs `std::size_t max_frame_size() const noexcept;`");
  static_assert(transport<T>, "sparsesync: the type is not a transport (transport_concept must be sparsesync::transport_tag)");
  static constexpr bool value = true;
};

template <class L>
struct listener_diagnostics {
  static_assert(requires { typename L::listener_concept; },
                "sparsesync: a listener must opt in with `using listener_concept = sparsesync::listener_tag;`");
  static_assert(requires { typename L::transport_type; },
                "sparsesync: a listener needs `using transport_type = <the transport accept() returns>;`");
  static constexpr bool transport_ok = transport_diagnostics<typename L::transport_type>::value;
  static_assert(requires(L& l) {
    { l.accept() } -> std::same_as<typename L::transport_type>;
  }, "sparsesync: a listener needs `transport_type accept();`");
  static_assert(requires(L& l) { l.close(); }, "sparsesync: a listener needs `void close() noexcept;`");
  static_assert(listener<L>, "sparsesync: the type is not a listener (listener_concept must be sparsesync::listener_tag)");
  static constexpr bool value = true;
};

// Runs `f`, turning a transport_error into `ec`: the non-throwing overloads share the throwing code path,
// which keeps one implementation of every check (errors are rare, so the exception's cost does not matter).
template <class F>
auto capture_error(std::error_code& ec, F&& f) noexcept -> decltype(f()) {
  ec.clear();
  try {
    return std::forward<F>(f)();
  } catch (const transport_error& e) {
    ec = e.error_code();
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  } catch (...) {
    ec = make_error_code(transport_errc::backend);
  }
  if constexpr (!std::is_void_v<decltype(f())>) return {};
}
}  // namespace detail

// In templates that take a transport: `static_assert(sparsesync::check_transport<T>)` explains what is missing.
template <class T>
inline constexpr bool check_transport = detail::transport_diagnostics<T>::value;
template <class L>
inline constexpr bool check_listener = detail::listener_diagnostics<L>::value;

SPARSESYNC_NS_END
