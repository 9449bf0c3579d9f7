// Frames over a byte stream: sequence numbers, optional per-frame MAC, length limits, orderly close, and the
// rule that after any failure the connection is dead (a stream that lost sync must never deliver more bytes).
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/transport/detail/byte_stream.hpp>
#include <sparsesync/transport/detail/crypto.hpp>
#include <sparsesync/transport/detail/frame.hpp>
#include <sparsesync/transport/detail/handshake.hpp>
#include <sparsesync/transport/error.hpp>
#include <sparsesync/transport/transport.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace detail {

struct channel_options {
  std::size_t max_frame_size = default_max_frame_size;
  std::chrono::milliseconds receive_timeout = no_timeout;  // wait for the first byte of the next frame
  std::chrono::milliseconds stall_timeout{60'000};          // longest pause inside a frame or a send
  // Answer the peer's close frame with a close_ack, and let linger() wait for ours: for streams that lose
  // unread data when the sender disconnects (UCX), unlike TCP where the kernel keeps it.
  bool acknowledge_close = false;
};

// Payloads move in slices so that the stall timeout measures progress, not the time a 1 GiB frame takes.
inline constexpr std::size_t io_slice = std::size_t{8} << 20;

template <byte_stream Stream>
class framed_channel {
 public:
  framed_channel(Stream stream, std::optional<session_keys> keys, const channel_options& options)
      : stream_(std::move(stream)), options_(options) {
    if (keys) {
      send_mac_.emplace(keys->send.bytes());
      receive_mac_.emplace(keys->receive.bytes());
    }
  }
  framed_channel(const framed_channel&) = delete;
  framed_channel& operator=(const framed_channel&) = delete;
  // Destruction without close() leaves teardown to the stream (the peer then sees an end without a close frame).
  ~framed_channel() = default;

  [[nodiscard]] bool authenticated() const noexcept { return send_mac_.has_value(); }
  [[nodiscard]] std::size_t max_frame_size() const noexcept { return options_.max_frame_size; }
  Stream& stream() noexcept { return stream_; }

  void send(std::span<const std::byte> payload) {
    send(payload, frame_type::data, [](Stream&, deadline) {});
  }

  // Sends a frame of `type`, then lets `after(stream, deadline)` write bytes that follow it outside the
  // framing (a device payload), under the same lock so nothing can come between the two.
  template <class After>
  void send(std::span<const std::byte> payload, frame_type type, After&& after) {
    if (payload.size() > options_.max_frame_size)
      throw transport_error(transport_errc::frame_too_large, stream_.describe() + ": frame of " +
                                                                 std::to_string(payload.size()) + " bytes exceeds max_frame_size " +
                                                                 std::to_string(options_.max_frame_size));
    std::lock_guard lock(send_mutex_);
    check_alive();
    if (send_closed_) throw transport_error(transport_errc::connection_closed, stream_.describe() + ": send() after close()");
    try {
      write_frame(type, payload);
      after(stream_, deadline_after(options_.stall_timeout));
    } catch (const transport_error& e) {
      fail(e);
      throw;
    }
  }

  bool receive(std::vector<std::byte>& out) {
    return receive(out, [this](frame_type t, const std::vector<std::byte>&, Stream&, deadline) {
      if (t == frame_type::device)
        throw transport_error(transport_errc::protocol,
                              stream_.describe() + ": the peer sent a device-memory frame; receive it with receive_device()");
    });
  }

  // Receives the next frame; `on_frame(type, payload, stream, deadline)` runs under the receive lock for every
  // data or device frame, so it can read bytes that follow a device frame outside the framing.
  // `out` is resized to the frame's length, not cleared first: a caller that passes an earlier frame's buffer
  // back saves zero-filling the new frame before the socket overwrites it. It is empty after false or a throw.
  template <class OnFrame>
  bool receive(std::vector<std::byte>& out, OnFrame&& on_frame) {
    std::lock_guard lock(receive_mutex_);
    if (receive_ended_ || failed_.load()) {
      out.clear();
      if (receive_ended_) return false;
      check_alive();  // throws: failed_ never goes back
    }
    try {
      for (;;) {
        const frame_type t = read_frame(out, deadline_after(options_.receive_timeout));
        if (t == frame_type::close_ack) {
          close_acked_.store(true);
          continue;
        }
        if (t == frame_type::close) {
          receive_ended_ = true;
          out.clear();
          acknowledge_peer_close();
          return false;
        }
        on_frame(t, out, stream_, deadline_after(options_.stall_timeout));
        return true;
      }
    } catch (const transport_error& e) {
      out.clear();
      fail(e);
      throw;
    }
  }

  // Sends the close frame and ends the sending direction; any failure just tears the connection down,
  // which the peer reports as an abrupt end.
  void close() noexcept {
    try {
      std::lock_guard lock(send_mutex_);
      if (send_closed_ || failed_.load()) return;
      send_closed_ = true;
      write_frame(frame_type::close, {});
      stream_.shutdown_send();
    } catch (const transport_error& e) {
      fail(e);
    } catch (...) {
      stream_.abort();
    }
  }

  // After close(), waits (until `d`) for the peer to confirm it has read everything up to our close frame,
  // discarding whatever else it still sends. Called on destruction, when no other thread uses the channel.
  void linger(deadline d) noexcept {
    if (!options_.acknowledge_close || failed_.load() || close_acked_.load()) return;
    {
      std::lock_guard lock(send_mutex_);
      if (!send_closed_) return;  // no close(): an abrupt end, nothing to wait for
    }
    try {
      std::lock_guard lock(receive_mutex_);
      std::vector<std::byte> discard;
      while (!close_acked_.load() && clock::now() < d) {
        const frame_type t = read_frame(discard, d);
        if (t == frame_type::close_ack) close_acked_.store(true);
        if (t == frame_type::close && !receive_ended_) {
          receive_ended_ = true;
          acknowledge_peer_close();
        }
      }
    } catch (...) {
    }
  }

  // Ends the connection at once: blocked calls in other threads fail, the peer sees an abrupt end.
  void abort(const std::string& why) noexcept {
    fail(transport_error(transport_errc::connection_closed, stream_.describe() + ": " + why));
  }

 private:
  void check_alive() {
    if (!failed_.load()) return;
    std::lock_guard lock(failure_mutex_);
    throw transport_error(transport_errc::connection_closed, "the connection failed earlier: " + failure_);
  }

  void fail(const transport_error& e) noexcept {
    {
      std::lock_guard lock(failure_mutex_);
      if (!failed_.load()) {
        try {
          failure_ = e.what();
        } catch (...) {
        }
        failed_.store(true);
      }
    }
    stream_.abort();
  }

  // Receive thread, receive lock held. Allowed after our own close(): a close_ack is not data.
  void acknowledge_peer_close() {
    if (!options_.acknowledge_close) return;
    std::lock_guard lock(send_mutex_);
    if (failed_.load()) return;
    write_frame(frame_type::close_ack, {});
  }

  void write_frame(frame_type type, std::span<const std::byte> payload) {
    const auto header = encode_header({type, send_sequence_, payload.size()});
    chacha20_poly1305_mac::tag header_tag{}, payload_tag{};
    if (send_mac_) {
      header_tag = send_mac_->begin(frame_nonce(header_tag_domain, send_sequence_)).update(header).finish();
      payload_tag = send_mac_->begin(frame_nonce(payload_tag_domain, send_sequence_)).update(header).update(payload).finish();
    }
    const std::size_t first = std::min(io_slice, payload.size());
    {
      std::span<const std::byte> head[3];
      std::size_t n = 0;
      head[n++] = header;
      if (send_mac_) head[n++] = header_tag;
      head[n++] = payload.first(first);
      stream_.write(std::span(head, n), deadline_after(options_.stall_timeout));
    }
    for (std::size_t off = first; off < payload.size(); off += io_slice) {
      const std::span<const std::byte> piece[] = {payload.subspan(off, std::min(io_slice, payload.size() - off))};
      stream_.write(piece, deadline_after(options_.stall_timeout));
    }
    if (send_mac_) {
      const std::span<const std::byte> tail[] = {payload_tag};
      stream_.write(tail, deadline_after(options_.stall_timeout));
    }
    ++send_sequence_;
  }

  void read_all(std::span<std::byte> buf, deadline d, const char* what) {
    if (stream_.read(buf, d) != buf.size())
      throw transport_error(transport_errc::truncated, stream_.describe() + ": the stream ended inside a frame (" + what + ")");
  }

  // `first_byte` bounds the wait for the frame to start; the stall timeout bounds everything after.
  frame_type read_frame(std::vector<std::byte>& out, deadline first_byte) {
    const std::string& where = stream_.describe();
    header_bytes header{};
    const std::size_t got = stream_.read(header, first_byte);
    if (got == 0)
      throw transport_error(transport_errc::truncated,
                            where + ": the peer ended the connection without closing it (no close frame)");
    if (got != header.size())
      throw transport_error(transport_errc::truncated, where + ": the stream ended inside a frame header");
    if (receive_mac_) {
      // Nothing in the header is trusted, the length included, before its tag verifies. The nonce takes the
      // sequence number the header claims (covered by the tag too): a replayed or reordered frame verifies
      // and is then refused as out of sequence, which names the problem.
      chacha20_poly1305_mac::tag tag{};
      read_all(tag, deadline_after(options_.stall_timeout), "header tag");
      const auto claimed = load_le<std::uint64_t>(reinterpret_cast<const unsigned char*>(header.data()) + 8);
      if (!equal_constant_time(receive_mac_->begin(frame_nonce(header_tag_domain, claimed)).update(header).finish(), tag))
        throw transport_error(transport_errc::integrity, where + ": frame header " + std::to_string(receive_sequence_) +
                                                             " fails authentication (tampered, forged, or another key)");
    }
    const frame_header h = decode_header(header, where);
    if (h.sequence != receive_sequence_)
      throw transport_error(transport_errc::sequence,
                            where + ": frame carries sequence number " + std::to_string(h.sequence) + ", expected " +
                                std::to_string(receive_sequence_) + " (replayed, reordered or dropped frame)");
    if (h.length > options_.max_frame_size)
      throw transport_error(transport_errc::frame_too_large, where + ": the peer announces a frame of " +
                                                                 std::to_string(h.length) + " bytes, max_frame_size is " +
                                                                 std::to_string(options_.max_frame_size));
    if ((h.type == frame_type::close || h.type == frame_type::close_ack) && h.length != 0)
      throw transport_error(transport_errc::protocol, where + ": close frame with a payload");
    // A recycled buffer keeps its size, so that resize() zero-fills only what grows (never a whole frame).
    out.resize(static_cast<std::size_t>(h.length));
    for (std::size_t off = 0; off < out.size(); off += io_slice)
      read_all(std::span(out).subspan(off, std::min(io_slice, out.size() - off)), deadline_after(options_.stall_timeout),
               "payload");
    if (receive_mac_) {
      chacha20_poly1305_mac::tag tag{};
      read_all(tag, deadline_after(options_.stall_timeout), "payload tag");
      receive_mac_->begin(frame_nonce(payload_tag_domain, receive_sequence_)).update(header).update(out);
      if (!equal_constant_time(receive_mac_->finish(), tag))
        throw transport_error(transport_errc::integrity, where + ": frame " + std::to_string(receive_sequence_) +
                                                             " payload fails authentication (tampered or truncated)");
    }
    ++receive_sequence_;
    return h.type;
  }

  Stream stream_;
  channel_options options_;
  std::mutex send_mutex_;
  std::mutex receive_mutex_;
  std::optional<chacha20_poly1305_mac> send_mac_;     // guarded by send_mutex_
  std::optional<chacha20_poly1305_mac> receive_mac_;  // guarded by receive_mutex_
  std::uint64_t send_sequence_ = 0;         // guarded by send_mutex_
  std::uint64_t receive_sequence_ = 0;      // guarded by receive_mutex_
  bool send_closed_ = false;                // guarded by send_mutex_
  bool receive_ended_ = false;              // guarded by receive_mutex_
  std::atomic<bool> close_acked_{false};
  std::atomic<bool> failed_{false};
  std::mutex failure_mutex_;
  std::string failure_;  // guarded by failure_mutex_
};

}  // namespace detail
SPARSESYNC_NS_END
