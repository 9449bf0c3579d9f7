// A full transfer of one version, made bucket by bucket as the sessions sending it reach each bucket, instead
// of a model-sized stream beside the snapshot: a bucket is encoded when the first session needs it, shared with
// the sessions that need it at the same time, and freed once they are past it. Memory: a few buckets, while the
// snapshot holds the version. Before a publish changes the snapshot, the sender parks (encodes now) every
// bucket some session still needs: only then does a full transfer in flight cost up to a model's size, as every
// full transfer did before.
//
// The bucket after the one a session just took is encoded ahead, on a thread of the full transfer's own, while
// that session authenticates and sends its bucket: on the 2-core VMs measured, encoding (a copy, a nonzero
// mask, the payload hash, fresh pages for the frame) was a quarter of the sending thread's work
// (bench/results/full-transfer.md). It costs one more bucket of memory per full transfer, not per session.
#pragma once

#include <sparsesync/core/error.hpp>
#include <sparsesync/sync/version_stream.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace sync {

class full_transfer {
 public:
  using message = version_stream::message;

  full_transfer(std::uint64_t version, std::uint64_t target_checksum, message begin, message end, std::size_t buckets)
      : version_(version), target_checksum_(target_checksum), begin_(std::move(begin)), end_(std::move(end)), live_(buckets), parked_(buckets),
        building_(buckets, false) {}
  full_transfer(const full_transfer&) = delete;
  full_transfer& operator=(const full_transfer&) = delete;
  ~full_transfer() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (ahead_.joinable()) ahead_.join();
  }

  [[nodiscard]] std::uint64_t version() const { return version_; }
  [[nodiscard]] std::uint64_t target_checksum() const { return target_checksum_; }
  [[nodiscard]] std::size_t buckets() const { return live_.size(); }
  [[nodiscard]] const message& begin_message() const { return begin_; }
  [[nodiscard]] const message& end_message() const { return end_; }

  // Session `id` starts sending (at bucket 0) / is past bucket `next - 1` / is done or gone.
  void join(std::size_t id) {
    std::lock_guard lock(mutex_);
    cursors_[id] = 0;
  }
  void advance(std::size_t id, std::size_t next) {
    std::lock_guard lock(mutex_);
    cursors_[id] = next;
    release_parked_locked();
  }
  // Also waits for a bucket being encoded ahead: the encoder a session handed over is not used once every
  // session has left (so it may refer to what outlives only the sessions).
  void leave(std::size_t id) {
    std::unique_lock lock(mutex_);
    cursors_.erase(id);
    release_parked_locked();
    if (cursors_.empty()) ahead_next_ = live_.size();
    cv_.wait(lock, [&] { return !ahead_busy_; });
  }

  // Bucket i: parked, being sent by another session, or encode(i) (called without the lock; one session
  // encodes a bucket while others that need it wait for it). Bucket i + 1 is then encoded ahead with a copy
  // of `encode`, which must stay callable from another thread for as long as this object lives.
  template <class Encode>
  message bucket(std::size_t i, Encode&& encode) {
    std::unique_lock lock(mutex_);
    message m;
    for (;;) {
      if (parked_[i]) {
        m = parked_[i];
        break;
      }
      if (auto live = live_[i].lock()) {
        m = std::move(live);
        break;
      }
      if (!building_[i]) {
        m = build_locked(i, encode, lock);
        break;
      }
      cv_.wait(lock);
    }
    if (i + 1 < live_.size()) {
      ahead_encode_ = encode;
      ahead_next_ = i + 1;
      if (!ahead_.joinable()) ahead_ = std::thread([this] { encode_ahead(); });
      cv_.notify_all();
    }
    return m;
  }

  // The parked copy of bucket i, if any (a session that waited for the snapshot while a publish parked it).
  message parked(std::size_t i) {
    std::lock_guard lock(mutex_);
    return parked_[i];
  }

  // Called while the snapshot still holds this version, just before it changes: every bucket some session
  // has yet to send is kept (reused if alive, else encode_now(i)).
  template <class Encode>
  void park_remaining(Encode&& encode_now) {
    std::lock_guard lock(mutex_);
    if (cursors_.empty()) return;
    std::size_t lowest = live_.size();
    for (const auto& [id, c] : cursors_) lowest = std::min(lowest, c);
    for (std::size_t i = lowest; i < live_.size(); ++i) {
      if (parked_[i]) continue;
      if (auto m = live_[i].lock()) parked_[i] = std::move(m);
      else parked_[i] = encode_now(i);
    }
  }

 private:
  static constexpr std::size_t keep_recent = 2;

  // Encodes bucket i (which no one has or is building): the lock is released meanwhile; rethrows encode's error.
  template <class Encode>
  message build_locked(std::size_t i, Encode& encode, std::unique_lock<std::mutex>& lock) {
    building_[i] = true;
    lock.unlock();
    message m;
    try {
      m = encode(i);
    } catch (...) {
      lock.lock();
      building_[i] = false;
      cv_.notify_all();
      throw;
    }
    lock.lock();
    building_[i] = false;
    live_[i] = m;
    // The newest few stay alive though their session has moved on: a session a little behind reuses them.
    recent_.push_back(m);
    if (recent_.size() > keep_recent) recent_.pop_front();
    cv_.notify_all();
    return m;
  }

  // The encode-ahead thread: builds the bucket after the last one taken, unless it exists or is being built.
  // A failure (the snapshot moved on) is left for the session that needs the bucket to meet.
  void encode_ahead() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || ahead_next_ < live_.size(); });
      if (stopping_) return;
      const std::size_t i = std::exchange(ahead_next_, live_.size());
      if (parked_[i] || building_[i] || !live_[i].expired()) continue;
      auto encode = ahead_encode_;
      ahead_busy_ = true;
      try {
        (void)build_locked(i, encode, lock);
      } catch (...) {
      }
      ahead_busy_ = false;
      cv_.notify_all();
    }
  }

  void release_parked_locked() {
    std::size_t lowest = live_.size();
    for (const auto& [id, c] : cursors_) lowest = std::min(lowest, c);
    for (std::size_t i = 0; i < lowest && i < parked_.size(); ++i) parked_[i].reset();
  }

  const std::uint64_t version_, target_checksum_;
  const message begin_, end_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::weak_ptr<const std::vector<std::byte>>> live_;
  std::vector<message> parked_;
  std::vector<bool> building_;
  std::deque<message> recent_;
  std::map<std::size_t, std::size_t> cursors_;  // session id -> next bucket it sends
  std::function<message(std::size_t)> ahead_encode_;
  std::size_t ahead_next_ = static_cast<std::size_t>(-1);  // the bucket to encode ahead; none when >= buckets()
  bool ahead_busy_ = false;  // encode_ahead is building a bucket
  bool stopping_ = false;
  std::thread ahead_;  // last: started after everything it uses
};

}  // namespace sync
SPARSESYNC_NS_END
