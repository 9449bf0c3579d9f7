// Frames received ahead on a thread of their own: reading and authenticating the next frames (the socket
// copy and the MAC of every byte, ~0.45 s per GiB on the VM measured) overlaps verifying and writing this
// one, instead of taking turns with it on one thread (bench/results/full-transfer.md). At most `depth`
// frames wait; their buffers are recycled, so no frame needs fresh memory after the first few.
#pragma once

#include <sparsesync/transport/asio_tcp.hpp>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace sparsesync::cli {

class read_ahead {
 public:
  read_ahead(std::shared_ptr<asio_tcp_transport> link, std::size_t depth) : link_(std::move(link)), depth_(depth) {}
  read_ahead(const read_ahead&) = delete;
  read_ahead& operator=(const read_ahead&) = delete;
  // A reader still waiting for a frame is cut off (the connection is aborted): the session is over.
  ~read_ahead() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) {
      if (!finished()) link_->abort();
      thread_.join();
    }
  }

  // The next frame, as asio_tcp_transport::receive gives it (false at an orderly close; errors rethrown).
  bool receive(std::vector<std::byte>& frame) {
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return !ready_.empty(); });
    item it = std::move(ready_.front());
    ready_.pop_front();
    if (it.error) {
      ready_.push_front(it);  // every later call fails the same way
      std::rethrow_exception(it.error);
    }
    if (!it.got) {
      ready_.push_front(it);
      return false;
    }
    std::swap(frame, it.frame);
    free_.push_back(std::move(it.frame));  // the caller's old buffer, for a later frame
    cv_.notify_all();
    return true;
  }

 private:
  struct item {
    bool got = false;
    std::vector<std::byte> frame;
    std::exception_ptr error;
  };

  bool finished() {
    std::lock_guard lock(mutex_);
    return done_;
  }

  void run() {
    for (;;) {
      std::vector<std::byte> buf;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || ready_.size() < depth_; });
        if (stopping_) break;
        if (!free_.empty()) {
          buf = std::move(free_.back());
          free_.pop_back();
        }
      }
      item it;
      try {
        it.got = link_->receive(buf);
        it.frame = std::move(buf);
      } catch (...) {
        it.error = std::current_exception();
      }
      const bool last = !it.got;
      {
        std::lock_guard lock(mutex_);
        ready_.push_back(std::move(it));
      }
      cv_.notify_all();
      if (last) break;
    }
    std::lock_guard lock(mutex_);
    done_ = true;
  }

  std::shared_ptr<asio_tcp_transport> link_;
  const std::size_t depth_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<item> ready_;
  std::vector<std::vector<std::byte>> free_;
  bool stopping_ = false;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace sparsesync::cli
