// One encoded version as a list of protocol messages that may still be growing while later buckets are
// encoded: session threads send message i while the publisher encodes bucket i + 1.
#pragma once

#include <sparsesync/core/config.hpp>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace sync {

struct version_stream {
  using message = std::shared_ptr<const std::vector<std::byte>>;

  bool from_zero = false;
  std::uint64_t base_version = 0;
  std::uint64_t base_checksum = 0;    // the base every receiver of this stream must hold (unused when from_zero)
  std::uint64_t target_version = 0;
  std::uint64_t target_checksum = 0;  // valid once complete
  std::uint64_t payload_bytes = 0;    // wire-format bytes (prologue + buckets), valid once complete

  void push(std::vector<std::byte> m) {
    {
      std::lock_guard lock(mutex_);
      messages_.push_back(std::make_shared<const std::vector<std::byte>>(std::move(m)));
    }
    cv_.notify_all();
  }
  void finish(bool ok) {
    {
      std::lock_guard lock(mutex_);
      complete_ = true;
      failed_ = !ok;
    }
    cv_.notify_all();
  }
  // Blocks until message i exists (returns it) or the stream ended before it (returns null).
  message wait_for(std::size_t i) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return i < messages_.size() || complete_; });
    return i < messages_.size() && !failed_ ? messages_[i] : nullptr;
  }
  [[nodiscard]] bool failed() const {
    std::lock_guard lock(mutex_);
    return failed_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<message> messages_;
  bool complete_ = false;
  bool failed_ = false;
};

}  // namespace sync
SPARSESYNC_NS_END
