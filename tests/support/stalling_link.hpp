// A worker's link that hangs mid-version, for the fault tests' worker processes: it passes every message through
// until the first message of type `stall_on` in version `stall_at`, then prints "stalled V" and sleeps for ever
// (alive, reading nothing: the test kills it or leaves it stalled). Over a device_link it is a device_link too,
// pipelined where the inner link is.
#pragma once

#include <sparsesync/format/wire.hpp>
#include <sparsesync/sync/protocol.hpp>
#include <sparsesync/transport/device_link.hpp>

#include <chrono>
#include <cstdio>
#include <thread>
#include <type_traits>

namespace sparsesync_test {

template <class Inner>
class stalling_link {
 public:
  using transport_concept = sparsesync::transport_tag;
  using device_link_concept = std::conditional_t<sparsesync::device_link<Inner>, sparsesync::device_link_tag, void>;

  stalling_link(Inner inner, std::uint64_t stall_at, sparsesync::sync::message_type stall_on)
      : inner_(std::move(inner)), stall_at_(stall_at), stall_on_(stall_on) {}

  void send(std::span<const std::byte> m) { inner_.send(m); }
  bool receive(std::vector<std::byte>& out) {
    if (!inner_.receive(out)) return false;
    const auto type = sparsesync::sync::type_of(out);
    if (type == sparsesync::sync::message_type::version_begin) {
      sparsesync::patch_prologue pro;
      if (sparsesync::parse_patch_prologue(sparsesync::sync::body_of(out), pro)) version_ = pro.header.target_version;
    } else if (type == stall_on_ && stall_at_ && version_ == stall_at_) {
      std::printf("stalled %llu\n", static_cast<unsigned long long>(version_));
      std::fflush(stdout);
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    return true;
  }
  void close() noexcept { inner_.close(); }
  [[nodiscard]] std::size_t max_frame_size() const noexcept { return inner_.max_frame_size(); }

  void send_device(const sparsesync::device_frame& f)
    requires sparsesync::device_link<Inner>
  {
    inner_.send_device(f);
  }
  void receive_device(void* dst, std::size_t bytes, void* after, std::span<unsigned char> head)
    requires sparsesync::device_link<Inner>
  {
    inner_.receive_device(dst, bytes, after, head);
  }
  void post_receive_device(void* dst, std::size_t bytes, void* after)
    requires sparsesync::pipelined_device_link<Inner>
  {
    inner_.post_receive_device(dst, bytes, after);
  }
  void complete_receive_device(std::span<unsigned char> head)
    requires sparsesync::pipelined_device_link<Inner>
  {
    inner_.complete_receive_device(head);
  }
  void abort() noexcept
    requires sparsesync::device_link<Inner>
  {
    inner_.abort();
  }

 private:
  Inner inner_;
  std::uint64_t stall_at_;
  sparsesync::sync::message_type stall_on_;
  std::uint64_t version_ = 0;
};

}  // namespace sparsesync_test
