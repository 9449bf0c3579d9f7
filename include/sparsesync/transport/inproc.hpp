// In-process transport: two endpoints joined by a pair of bounded frame queues. For tests of the sync engine
// and for trainer and rollout threads of one process; it copies each frame once and has no authentication
// (nothing crosses a process boundary).
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/transport/error.hpp>
#include <sparsesync/transport/transport.hpp>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

SPARSESYNC_NS_BEGIN

struct inproc_options {
  std::size_t max_frame_size = default_max_frame_size;
  // Backpressure like a socket buffer: send() blocks while this many bytes wait unread (a single frame larger
  // than the bound is still accepted into an empty queue, so no frame size deadlocks).
  std::size_t max_queued_bytes = std::size_t{64} << 20;
  std::chrono::milliseconds send_timeout = no_timeout;
  std::chrono::milliseconds receive_timeout = no_timeout;
};

namespace detail {

// One direction of an inproc connection.
struct inproc_queue {
  std::mutex mutex;
  std::condition_variable readable;  // a frame arrived or the writer went away
  std::condition_variable writable;  // bytes were consumed or the reader went away
  std::deque<std::vector<std::byte>> frames;
  std::size_t queued_bytes = 0;
  bool writer_closed = false;  // orderly: the reader sees the end after the queued frames
  bool writer_gone = false;    // the writing endpoint was destroyed without close(): an abrupt end
  bool reader_gone = false;
  bool aborted = false;        // an endpoint tore the connection down (abort()): blocked calls on both ends fail
};

struct inproc_pipe {
  inproc_queue queues[2];
};

// Accounting charge of a frame: empty frames still take a slot, so a flood of them is also bounded.
inline std::size_t inproc_charge(std::size_t bytes) { return bytes + 64; }

template <class Pred>
bool wait_for_condition(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                        std::chrono::milliseconds timeout, Pred pred) {
  if (timeout == no_timeout) {
    cv.wait(lock, pred);
    return true;
  }
  return cv.wait_for(lock, timeout, pred);
}

}  // namespace detail

class inproc_transport {
 public:
  using transport_concept = transport_tag;

  inproc_transport(inproc_transport&& other) noexcept
      : pipe_(std::move(other.pipe_)), side_(other.side_), options_(other.options_) {}
  inproc_transport& operator=(inproc_transport&& other) noexcept {
    if (this != &other) {
      release();
      pipe_ = std::move(other.pipe_);
      side_ = other.side_;
      options_ = other.options_;
    }
    return *this;
  }
  inproc_transport(const inproc_transport&) = delete;
  inproc_transport& operator=(const inproc_transport&) = delete;
  ~inproc_transport() { release(); }

  void send(std::span<const std::byte> frame) {
    if (frame.size() > options_.max_frame_size)
      throw transport_error(transport_errc::frame_too_large, "inproc: frame of " + std::to_string(frame.size()) +
                                                                 " bytes exceeds max_frame_size " +
                                                                 std::to_string(options_.max_frame_size));
    auto& q = out();
    std::vector<std::byte> copy(frame.begin(), frame.end());
    std::unique_lock lock(q.mutex);
    if (q.writer_closed) throw transport_error(transport_errc::connection_closed, "inproc: send() after close()");
    const std::size_t charge = detail::inproc_charge(frame.size());
    const bool ready = detail::wait_for_condition(q.writable, lock, options_.send_timeout, [&] {
      return q.aborted || q.reader_gone || q.frames.empty() || q.queued_bytes + charge <= options_.max_queued_bytes;
    });
    if (!ready) throw transport_error(transport_errc::timed_out, "inproc: the peer did not read within send_timeout");
    if (q.aborted) throw transport_error(transport_errc::connection_closed, "inproc: the connection was aborted");
    if (q.reader_gone) throw transport_error(transport_errc::connection_closed, "inproc: the peer endpoint was destroyed");
    q.frames.push_back(std::move(copy));
    q.queued_bytes += charge;
    q.readable.notify_one();
  }

  bool receive(std::vector<std::byte>& frame) {
    frame.clear();
    auto& q = in();
    std::unique_lock lock(q.mutex);
    const bool ready = detail::wait_for_condition(q.readable, lock, options_.receive_timeout, [&] {
      return q.aborted || !q.frames.empty() || q.writer_closed || q.writer_gone;
    });
    if (!ready) throw transport_error(transport_errc::timed_out, "inproc: no frame within receive_timeout");
    if (q.aborted) throw transport_error(transport_errc::connection_closed, "inproc: the connection was aborted");
    if (!q.frames.empty()) {
      frame = std::move(q.frames.front());
      q.frames.pop_front();
      q.queued_bytes -= detail::inproc_charge(frame.size());
      q.writable.notify_all();
      return true;
    }
    if (q.writer_closed) return false;
    throw transport_error(transport_errc::truncated, "inproc: the peer endpoint was destroyed without close()");
  }

  void send(std::span<const std::byte> frame, std::error_code& ec) noexcept {
    detail::capture_error(ec, [&] { send(frame); });
  }
  bool receive(std::vector<std::byte>& frame, std::error_code& ec) noexcept {
    return detail::capture_error(ec, [&] { return receive(frame); });
  }

  void close() noexcept {
    if (!pipe_) return;
    auto& q = out();
    std::lock_guard lock(q.mutex);
    q.writer_closed = true;
    q.readable.notify_all();
  }

  // Tears the connection down now, as asio_tcp's and ucx's abort(): calls blocked on either end, and later ones,
  // fail with connection_closed (frames not yet read are dropped). A device link uses it to end a session whose
  // peer stopped answering, on a control link that has no receive timeout of its own.
  void abort() noexcept {
    if (!pipe_) return;
    for (auto& q : pipe_->queues) {
      std::lock_guard lock(q.mutex);
      q.aborted = true;
      q.readable.notify_all();
      q.writable.notify_all();
    }
  }

  [[nodiscard]] std::size_t max_frame_size() const noexcept { return options_.max_frame_size; }

  friend std::pair<inproc_transport, inproc_transport> make_inproc_pair(const inproc_options& options);

 private:
  inproc_transport(std::shared_ptr<detail::inproc_pipe> pipe, int side, const inproc_options& options)
      : pipe_(std::move(pipe)), side_(side), options_(options) {}

  detail::inproc_queue& out() {
    if (!pipe_) throw transport_error(transport_errc::connection_closed, "inproc: use of a moved-from transport");
    return pipe_->queues[side_];
  }
  detail::inproc_queue& in() {
    if (!pipe_) throw transport_error(transport_errc::connection_closed, "inproc: use of a moved-from transport");
    return pipe_->queues[1 - side_];
  }

  void release() noexcept {
    if (!pipe_) return;
    {
      auto& q = pipe_->queues[side_];
      std::lock_guard lock(q.mutex);
      if (!q.writer_closed) q.writer_gone = true;
      q.readable.notify_all();
    }
    {
      auto& q = pipe_->queues[1 - side_];
      std::lock_guard lock(q.mutex);
      q.reader_gone = true;
      q.writable.notify_all();
    }
    pipe_.reset();
  }

  std::shared_ptr<detail::inproc_pipe> pipe_;
  int side_ = 0;
  inproc_options options_;
};

// Two connected endpoints: what one sends, the other receives.
inline std::pair<inproc_transport, inproc_transport> make_inproc_pair(const inproc_options& options = {}) {
  if (options.max_frame_size > hard_max_frame_size)
    throw transport_error(transport_errc::invalid_argument, "inproc: max_frame_size exceeds hard_max_frame_size (1 GiB)");
  auto pipe = std::make_shared<detail::inproc_pipe>();
  return {inproc_transport(pipe, 0, options), inproc_transport(pipe, 1, options)};
}

// A rendezvous point so that server code written against the `listener` concept runs in one process:
// connect() returns the client endpoint and queues the server endpoint for accept().
class inproc_listener {
 public:
  using listener_concept = listener_tag;
  using transport_type = inproc_transport;

  explicit inproc_listener(const inproc_options& options = {},
                           std::chrono::milliseconds accept_timeout = no_timeout)
      : options_(options), accept_timeout_(accept_timeout) {}
  inproc_listener(const inproc_listener&) = delete;
  inproc_listener& operator=(const inproc_listener&) = delete;

  inproc_transport connect() {
    auto [client, server] = make_inproc_pair(options_);
    std::lock_guard lock(mutex_);
    if (closed_) throw transport_error(transport_errc::connect_failed, "inproc: the listener is closed");
    pending_.push_back(std::move(server));
    ready_.notify_one();
    return std::move(client);
  }

  inproc_transport accept() {
    std::unique_lock lock(mutex_);
    const bool ready =
        detail::wait_for_condition(ready_, lock, accept_timeout_, [&] { return closed_ || !pending_.empty(); });
    if (!ready) throw transport_error(transport_errc::timed_out, "inproc: no connection within accept_timeout");
    if (closed_) throw transport_error(transport_errc::connection_closed, "inproc: the listener is closed");
    inproc_transport t = std::move(pending_.front());
    pending_.pop_front();
    return t;
  }

  void close() noexcept {
    std::lock_guard lock(mutex_);
    closed_ = true;
    pending_.clear();
    ready_.notify_all();
  }

 private:
  inproc_options options_;
  std::chrono::milliseconds accept_timeout_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<inproc_transport> pending_;
  bool closed_ = false;
};

static_assert(check_transport<inproc_transport>);
static_assert(check_listener<inproc_listener>);

SPARSESYNC_NS_END
