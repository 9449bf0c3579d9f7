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
namespace detail {
// One concept per numbered requirement, shared by `transport` and its diagnostics below.
template <class T>
concept transport_req1_opts_in = requires { requires std::same_as<typename T::transport_concept, transport_tag>; };
template <class T>
concept transport_req2_movable = std::move_constructible<T>;
template <class T>
concept transport_req3_send = requires(T& t, std::span<const std::byte> in) { t.send(in); };
template <class T>
concept transport_req4_receive = requires(T& t, std::vector<std::byte>& out) {
  { t.receive(out) } -> std::same_as<bool>;
};
template <class T>
concept transport_req5_close = requires(T& t) { t.close(); };
template <class T>
concept transport_req6_max_frame_size = requires(const T& t) {
  { t.max_frame_size() } -> std::convertible_to<std::size_t>;
};
}  // namespace detail

template <class T>
concept transport = detail::transport_req1_opts_in<T> && detail::transport_req2_movable<T> && detail::transport_req3_send<T> &&
                    detail::transport_req4_receive<T> && detail::transport_req5_close<T> && detail::transport_req6_max_frame_size<T>;

// A type L is a `listener` when:
//  1. it opts in with `using listener_concept = sparsesync::listener_tag;`
//  2. `L::transport_type` names a `transport`;
//  3. `l.accept()` blocks until a peer connects (and, where the transport authenticates, proves itself),
//     returning the connected transport; it throws sparsesync::transport_error on failure, after which the
//     listener still accepts further peers unless it was closed;
//  4. `l.close()` stops listening; an accept() blocked in another thread then throws
//     transport_errc::connection_closed. It never throws and is idempotent.
namespace detail {
template <class L>
concept listener_req1_opts_in = requires { requires std::same_as<typename L::listener_concept, listener_tag>; };
template <class L>
concept listener_req2_transport_type = requires { typename L::transport_type; requires transport<typename L::transport_type>; };
template <class L>
concept listener_req3_accept = requires(L& l) {
  { l.accept() } -> std::same_as<typename L::transport_type>;
};
template <class L>
concept listener_req4_close = requires(L& l) { l.close(); };
}  // namespace detail

template <class L>
concept listener = detail::listener_req1_opts_in<L> && detail::listener_req2_transport_type<L> && detail::listener_req3_accept<L> &&
                   detail::listener_req4_close<L>;

namespace detail {
// Each failed requirement is its own error, in requirement order: the first one printed is the first to fix.
template <class T>
struct transport_diagnostics {
  static_assert(transport_req1_opts_in<T>,
                "sparsesync: transport requirement 1: a transport opts in with `using transport_concept = sparsesync::transport_tag;`");
  static_assert(transport_req2_movable<T>, "sparsesync: transport requirement 2: a transport must be move constructible");
  static_assert(transport_req3_send<T>,
                "sparsesync: transport requirement 3: a transport needs `void send(std::span<const std::byte> frame);`");
  static_assert(transport_req4_receive<T>,
                "sparsesync: transport requirement 4: a transport needs `bool receive(std::vector<std::byte>& frame);` "
                "returning false on orderly close");
  static_assert(transport_req5_close<T>, "sparsesync: transport requirement 5: a transport needs `void close() noexcept;`");
  static_assert(transport_req6_max_frame_size<T>,
                "sparsesync: transport requirement 6: a transport needs `std::size_t max_frame_size() const noexcept;`");
  static constexpr bool value = transport<T>;
};

// The transport a listener names, diagnosed only when it names one (requirement 2 reports a missing name).
template <class L>
struct listener_transport_diagnostics {
  static constexpr bool value = false;
};
template <class L>
  requires requires { typename L::transport_type; }
struct listener_transport_diagnostics<L> : transport_diagnostics<typename L::transport_type> {};

template <class L>
struct listener_diagnostics {
  static_assert(listener_req1_opts_in<L>,
                "sparsesync: listener requirement 1: a listener opts in with `using listener_concept = sparsesync::listener_tag;`");
  static_assert(requires { typename L::transport_type; },
                "sparsesync: listener requirement 2: a listener needs `using transport_type = <the transport accept() returns>;`");
  static constexpr bool transport_ok = listener_transport_diagnostics<L>::value;
  static_assert(listener_req3_accept<L>, "sparsesync: listener requirement 3: a listener needs `transport_type accept();`");
  static_assert(listener_req4_close<L>, "sparsesync: listener requirement 4: a listener needs `void close() noexcept;`");
  static constexpr bool value = listener<L>;
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
