// The `device_link` concept: a transport whose peer also takes frames straight from GPU memory into GPU memory.
//
// The sync engine speaks its protocol on the link's host frames (the `transport` concept) and, where both ends
// hold their weights on GPUs and the link is a device_link, moves each bucket frame as a device frame instead:
// the host message announces it (message_type::bucket_device, docs/PROTOCOL.md) and the frame follows on the
// device path (nccl_link: ncclSend / ncclRecv on a communicator of the two ends alone). This header needs no
// CUDA compiler: streams and events are opaque here (cudaStream_t and cudaEvent_t are pointers).
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/transport/transport.hpp>

#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>

SPARSESYNC_NS_BEGIN

// One frame in GPU memory, as the sender hands it to a device_link.
struct device_frame {
  const void* data = nullptr;  // device memory, valid while `owner` lives
  std::size_t bytes = 0;
  void* ready = nullptr;       // a cudaEvent_t recorded once the frame is written (null: written already)
  std::shared_ptr<const void> owner;  // keeps `data` and `ready` alive: a link holds it until the GPU sent the frame
  // Copies the frame into `bytes` bytes of host memory (for receivers on a host path); set by the producer.
  std::function<void(unsigned char* host)> download;
};

struct device_link_tag {};

// Largest prefix of a device frame that receive_device() also copies to the host (a bucket header is 80 bytes).
inline constexpr std::size_t max_device_frame_head = 256;

// A type L is a `device_link` when:
//  1. it is a `transport` (the protocol's host messages travel there, in order with the device frames);
//  2. it opts in with `using device_link_concept = sparsesync::device_link_tag;`
//  3. `l.send_device(const device_frame&)` sends one frame to the peer once its `ready` event has passed, and
//     returns without waiting for the GPU; the link holds `owner` until the frame has left. A frame that has
//     not left within the link's timeout aborts the link (no later device call succeeds);
//  4. `l.receive_device(void* dst, std::size_t bytes, void* after_stream, std::span<unsigned char> head)` receives the peer's
//     next device frame, of `bytes` bytes, into device memory `dst` (written only after the work already
//     enqueued on the cudaStream_t `after_stream`, when not null), and returns once it is there, with its first
//     head.size() (<= max_device_frame_head) bytes copied to `head`; throws transport_error, the link aborted,
//     when it has not arrived within the link's timeout or the device path failed;
//  5. `l.abort()` ends device traffic at once (transfers in flight are cancelled, later device calls throw);
//     it never blocks on the peer and never throws.
//
// A device_link L is also a `pipelined_device_link` when it can take a receive in two halves, so that a receiver
// posts the receive of a frame as soon as it is announced, before the frames announced earlier are handed on (the
// sender's next transfer then waits for no round trip through the receiver's host thread):
//  6. `l.post_receive_device(void* dst, std::size_t bytes, void* after_stream)` enqueues the receive of the peer's
//     next device frame as requirement 4 describes and returns without waiting for it. Frames arrive in the order
//     their receives were posted; at most max_posted_device_receives are posted and not yet completed;
//  7. `l.complete_receive_device(std::span<unsigned char> head)` waits for the oldest posted receive as requirement 4
//     waits (same errors, same timeout), with its first head.size() bytes copied to `head`.
// receive_device() is then post_receive_device() followed by complete_receive_device().
// A pipelined device link L is also a `polled_device_link` when it can say, without waiting, whether the oldest
// posted receive is done, so that a receiver hands each frame on as soon as it has landed instead of when the
// posting window is full (three frames later):
//  8. `l.received_device()` returns true when complete_receive_device() would not wait for the GPU (the oldest
//     posted receive's frame is there, or the receive failed and complete_receive_device() will say so), false
//     otherwise (also when no receive is posted); it never throws and never blocks on the peer.
inline constexpr std::size_t max_posted_device_receives = 4;

namespace detail {
template <class L>
concept device_link_req2_opts_in = requires { requires std::same_as<typename L::device_link_concept, device_link_tag>; };
template <class L>
concept device_link_req3_send_device = requires(L& l, const device_frame& f) { l.send_device(f); };
template <class L>
concept device_link_req4_receive_device = requires(L& l, void* dst, std::size_t n, void* after, std::span<unsigned char> head) {
  l.receive_device(dst, n, after, head);
};
template <class L>
concept device_link_req5_abort = requires(L& l) { l.abort(); };
template <class L>
concept device_link_req6_post_receive = requires(L& l, void* dst, std::size_t n, void* after) { l.post_receive_device(dst, n, after); };
template <class L>
concept device_link_req7_complete_receive = requires(L& l, std::span<unsigned char> head) { l.complete_receive_device(head); };
template <class L>
concept device_link_req8_received = requires(L& l) {
  { l.received_device() } -> std::same_as<bool>;
};
}  // namespace detail

template <class L>
concept device_link = transport<L> && detail::device_link_req2_opts_in<L> && detail::device_link_req3_send_device<L> &&
                      detail::device_link_req4_receive_device<L> && detail::device_link_req5_abort<L>;

template <class L>
concept pipelined_device_link = device_link<L> && detail::device_link_req6_post_receive<L> && detail::device_link_req7_complete_receive<L>;

template <class L>
concept polled_device_link = pipelined_device_link<L> && detail::device_link_req8_received<L>;

namespace detail {
template <class L>
struct device_link_diagnostics {
  static constexpr bool transport_ok = transport_diagnostics<L>::value;  // requirement 1 reports through the transport's own
  static_assert(device_link_req2_opts_in<L>,
                "sparsesync: device_link requirement 2: a device link opts in with `using device_link_concept = sparsesync::device_link_tag;`");
  static_assert(device_link_req3_send_device<L>,
                "sparsesync: device_link requirement 3: a device link needs `void send_device(const sparsesync::device_frame&);`");
  static_assert(device_link_req4_receive_device<L>,
                "sparsesync: device_link requirement 4: a device link needs "
                "`void receive_device(void* dst, std::size_t bytes, void* after_stream, std::span<unsigned char> head);`");
  static_assert(device_link_req5_abort<L>, "sparsesync: device_link requirement 5: a device link needs `void abort() noexcept;`");
  // Half of a pipelined receive would silently leave the link unpipelined.
  static_assert(device_link_req6_post_receive<L> == device_link_req7_complete_receive<L>,
                "sparsesync: device_link requirements 6 and 7 go together: a pipelined device link needs both "
                "`void post_receive_device(void* dst, std::size_t bytes, void* after_stream);` and "
                "`void complete_receive_device(std::span<unsigned char> head);`");
  static constexpr bool value = device_link<L>;
};
}  // namespace detail

// `static_assert(sparsesync::check_device_link<L>)` names the requirement L lacks.
template <class L>
inline constexpr bool check_device_link = detail::device_link_diagnostics<L>::value;

namespace detail {
template <class L, bool = device_link_req2_opts_in<L>>
struct declared_device_link_diagnostics {
  static constexpr bool value = true;
};
template <class L>
struct declared_device_link_diagnostics<L, true> : device_link_diagnostics<L> {};
}  // namespace detail

// For the engine's entry points: a transport that opts in as a device_link must meet every requirement (one that
// fell short would otherwise be taken for a host transport, its frames quietly sent through host memory).
template <class L>
inline constexpr bool check_declared_device_link = detail::declared_device_link_diagnostics<L>::value;

SPARSESYNC_NS_END
