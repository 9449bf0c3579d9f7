// The public face that a device link's handle only forwards to its shared state (nccl_link, ucx_device_link):
// the control link's close and frame size, the device path's calls, abort, and the flags and counters the state
// keeps under its lock. Each link adds what differs: its send and receive of host messages, its connect calls.
// The state (`Derived::s_`, a unique_ptr) has `control`, `mutex`, `aborted`, `stats`, `send(frame)`,
// `receive(dst, bytes, stream, head)` (and, with Pipelined, `post_receive` and `complete_receive`) and
// `abort(reason)`; Derived befriends this class to let it reach `s_`.
#pragma once

#include <sparsesync/transport/device_link.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>
#include <span>

SPARSESYNC_NS_BEGIN
namespace detail {

template <class Derived, bool Pipelined = false>
class device_link_forwarding {
 public:
  void close() noexcept { state().control.close(); }
  [[nodiscard]] std::size_t max_frame_size() const noexcept { return state().control.max_frame_size(); }

  void send_device(const device_frame& f) { state().send(f); }
  void receive_device(void* dst, std::size_t bytes, void* after_stream, std::span<unsigned char> head) {
    state().receive(dst, bytes, static_cast<cudaStream_t>(after_stream), head);
  }
  // A pipelined device link (device_link requirements 6 and 7): its state has post_receive and complete_receive.
  void post_receive_device(void* dst, std::size_t bytes, void* after_stream)
    requires Pipelined
  {
    state().post_receive(dst, bytes, static_cast<cudaStream_t>(after_stream));
  }
  void complete_receive_device(std::span<unsigned char> head)
    requires Pipelined
  {
    state().complete_receive(head);
  }
  // Requirement 8: the state's receive_arrived().
  [[nodiscard]] bool received_device()
    requires Pipelined
  {
    return state().receive_arrived();
  }
  void abort() noexcept { state().abort("aborted by its owner"); }

  [[nodiscard]] bool aborted() const {
    std::lock_guard lock(state().mutex);
    return state().aborted;
  }
  [[nodiscard]] auto& control() { return state().control; }
  [[nodiscard]] auto stats() const {
    std::lock_guard lock(state().mutex);
    return state().stats;
  }

 private:
  auto& state() const { return *static_cast<const Derived*>(this)->s_; }
};

}  // namespace detail
SPARSESYNC_NS_END
