// A test link that corrupts on request: wraps a transport and, when its counter reaches zero, flips one bit of
// the last byte of the bucket message it receives (as a damaged link or a bug upstream would). The counter is
// shared so the test can arm it while the link is owned by a receiver: store(n) corrupts the (n+1)-th bucket
// received from then on; -1 (the start) never.
#pragma once

#include <sparsesync/sync/protocol.hpp>
#include <sparsesync/transport/transport.hpp>

#include <atomic>
#include <memory>
#include <span>
#include <vector>

namespace sparsesync_test {

template <class Inner>
class tampering_link {
 public:
  using transport_concept = sparsesync::transport_tag;
  tampering_link(Inner inner, std::shared_ptr<std::atomic<long>> countdown) : inner_(std::move(inner)), countdown_(std::move(countdown)) {}
  void send(std::span<const std::byte> m) { inner_.send(m); }
  bool receive(std::vector<std::byte>& out) {
    if (!inner_.receive(out)) return false;
    if (!out.empty() && out[0] == static_cast<std::byte>(sparsesync::sync::message_type::bucket) && countdown_->fetch_sub(1) == 0)
      out.back() ^= std::byte{0x40};
    return true;
  }
  void close() { inner_.close(); }
  [[nodiscard]] std::size_t max_frame_size() const { return inner_.max_frame_size(); }

 private:
  Inner inner_;
  std::shared_ptr<std::atomic<long>> countdown_;
};

}  // namespace sparsesync_test
