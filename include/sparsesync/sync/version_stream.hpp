// One encoded version as a list of protocol messages that may still be growing while later buckets are
// encoded: session threads send message i while the publisher encodes bucket i + 1.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/sync/protocol.hpp>
#include <sparsesync/transport/device_link.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace sync {

// Recycles the buffers of protocol messages once every session and the history let go of them: a version's
// messages are as large as its payload, and fresh allocations of that size cost a page fault per 4 KiB every
// version. Keeps at most `max_free_bytes` of idle buffers.
class message_pool : public std::enable_shared_from_this<message_pool> {
 public:
  explicit message_pool(std::size_t max_free_bytes = std::size_t{256} << 20) : max_free_(max_free_bytes) {}

  // A message of type byte `type` followed by `body`, in a recycled buffer when one is large enough.
  std::shared_ptr<const std::vector<std::byte>> make(std::byte type, std::span<const unsigned char> body) {
    std::unique_ptr<std::vector<std::byte>> buf;
    {
      std::lock_guard lock(mutex_);
      auto best = free_.end();  // the smallest buffer that fits: a large one stays for a large message
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if ((*it)->capacity() >= body.size() + 1 && (best == free_.end() || (*it)->capacity() < (*best)->capacity())) best = it;
      if (best != free_.end()) {
        buf = std::move(*best);
        free_bytes_ -= buf->capacity();
        free_.erase(best);
      }
    }
    if (!buf) buf = std::make_unique<std::vector<std::byte>>();
    buf->resize(body.size() + 1);
    (*buf)[0] = type;
    if (!body.empty()) std::memcpy(buf->data() + 1, body.data(), body.size());
    std::weak_ptr<message_pool> home = weak_from_this();
    return {buf.release(), [home](const std::vector<std::byte>* p) {
              std::unique_ptr<std::vector<std::byte>> owned(const_cast<std::vector<std::byte>*>(p));
              if (auto pool = home.lock()) pool->give_back(std::move(owned));
            }};
  }

 private:
  void give_back(std::unique_ptr<std::vector<std::byte>> buf) {
    std::lock_guard lock(mutex_);
    if (free_bytes_ + buf->capacity() > max_free_) return;  // freed
    free_bytes_ += buf->capacity();
    free_.push_back(std::move(buf));
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<std::vector<std::byte>>> free_;
  std::size_t free_bytes_ = 0;
  std::size_t max_free_;
};

struct version_stream {
  using message = std::shared_ptr<const std::vector<std::byte>>;

  // Message i as a session sends it: the protocol message, and for a bucket left in GPU memory (a device
  // source's frames) the frame, announced by a bucket_device message.
  struct entry {
    message host;
    std::shared_ptr<const device_frame> device;
  };

  std::shared_ptr<message_pool> pool;  // where push_message() takes its buffers (null: fresh ones)

  bool from_zero = false;
  std::uint64_t base_version = 0;
  std::uint64_t base_checksum = 0;    // the base every receiver of this stream must hold (unused when from_zero)
  std::uint64_t target_version = 0;
  std::uint64_t target_checksum = 0;  // valid once complete
  std::uint64_t payload_bytes = 0;    // wire-format bytes (prologue + buckets), valid once complete

  void push(std::vector<std::byte> m) { push(std::make_shared<const std::vector<std::byte>>(std::move(m))); }
  void push(message m) { push_entry({std::move(m), nullptr}); }
  // A message of type byte `type` and `body`, in a pooled buffer when the stream has a pool.
  void push_message(std::byte type, std::span<const unsigned char> body) {
    if (pool) return push(pool->make(type, body));
    std::vector<std::byte> m(body.size() + 1);
    m[0] = type;
    if (!body.empty()) std::memcpy(m.data() + 1, body.data(), body.size());
    push(std::move(m));
  }
  // A bucket frame that stays in GPU memory: sessions on a device link send it as it is, the others a host
  // copy made once (host_bucket()).
  void push_device(device_frame f) {
    push_entry({std::make_shared<const std::vector<std::byte>>(encode_bucket_device(f.bytes)),
                std::make_shared<const device_frame>(std::move(f))});
  }
  void finish(bool ok) {
    {
      std::lock_guard lock(mutex_);
      complete_ = true;
      failed_ = !ok;
    }
    cv_.notify_all();
  }
  // Blocks until message i exists (returns it) or the stream ended before it (returns an empty entry).
  entry wait_for_entry(std::size_t i) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return i < entries_.size() || complete_; });
    if (i >= entries_.size() || failed_) return {};
    return {entries_[i]->host, entries_[i]->device};
  }
  // Message i as a host `bucket` message: for a device frame, copied from the GPU once and shared by every
  // session that needs it (kept while the stream lives).
  message host_bucket(std::size_t i) {
    slot* e = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (i >= entries_.size()) return nullptr;
      e = entries_[i].get();
    }
    if (!e->device) return e->host;
    if (!e->device->download) throw error(errc::invalid_argument, "version_stream: a device frame without a host path");
    std::call_once(e->downloaded, [&] {
      auto m = std::make_shared<std::vector<std::byte>>(e->device->bytes + 1);
      (*m)[0] = static_cast<std::byte>(message_type::bucket);
      e->device->download(reinterpret_cast<unsigned char*>(m->data() + 1));
      e->host_copy = std::move(m);
    });
    return e->host_copy;
  }
  [[nodiscard]] bool failed() const {
    std::lock_guard lock(mutex_);
    return failed_;
  }

 private:
  struct slot {
    message host;
    std::shared_ptr<const device_frame> device;
    std::once_flag downloaded;
    message host_copy;
  };
  void push_entry(entry e) {
    auto s = std::make_unique<slot>();
    s->host = std::move(e.host);
    s->device = std::move(e.device);
    {
      std::lock_guard lock(mutex_);
      entries_.push_back(std::move(s));
    }
    cv_.notify_all();
  }

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<slot>> entries_;
  bool complete_ = false;
  bool failed_ = false;
};

}  // namespace sync
SPARSESYNC_NS_END
