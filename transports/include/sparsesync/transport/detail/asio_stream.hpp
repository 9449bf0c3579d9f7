// Blocking, deadline-bounded I/O over Boost.Asio for one TCP (optionally TLS) connection.
//
// Every connection owns an io_context run by one thread, and all socket and TLS operations are initiated on
// that thread: the thread is the strand that lets one caller send while another receives (a TLS stream
// permits one read and one write in flight only when both are serialised this way), and async operations
// are what make deadlines possible (Asio's synchronous calls cannot time out).
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/transport/detail/byte_stream.hpp>
#include <sparsesync/transport/detail/crypto.hpp>
#include <sparsesync/transport/error.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace detail {

namespace asio = boost::asio;
using boost::system::error_code;
using tcp = asio::ip::tcp;

class io_thread {
 public:
  io_thread() : guard_(asio::make_work_guard(context_)), thread_([this] { run(); }) {}
  io_thread(const io_thread&) = delete;
  io_thread& operator=(const io_thread&) = delete;
  ~io_thread() { stop(); }

  asio::io_context& context() noexcept { return context_; }

  void stop() noexcept {
    guard_.reset();
    context_.stop();
    if (thread_.joinable()) thread_.join();
  }

  // Runs `start(done)` on the I/O thread, where the operation calls `done(error_code, size_t)` exactly once,
  // and waits for it. At the deadline `cancel()` runs on the I/O thread and the wait goes on until `done`,
  // which cancellation makes prompt: the caller's buffers stay in use until the operation has finished.
  template <class Start, class Cancel>
  std::pair<error_code, std::size_t> run(Start start, Cancel cancel, deadline d, bool& timed_out) {
    struct state {
      std::mutex mutex;
      std::condition_variable cv;
      bool done = false;
      error_code ec;
      std::size_t n = 0;
    };
    auto st = std::make_shared<state>();
    asio::post(context_, [st, start = std::move(start)]() mutable {
      start([st](error_code ec, std::size_t n) {
        std::lock_guard lock(st->mutex);
        st->ec = ec;
        st->n = n;
        st->done = true;
        st->cv.notify_all();
      });
    });
    std::unique_lock lock(st->mutex);
    const auto finished = [&] { return st->done; };
    timed_out = false;
    if (d == deadline::max()) {
      st->cv.wait(lock, finished);
    } else if (!st->cv.wait_until(lock, d, finished)) {
      timed_out = true;
      asio::post(context_, std::move(cancel));
      st->cv.wait(lock, finished);
    }
    return {st->ec, st->n};
  }

  // Runs `f` on the I/O thread and waits for it.
  template <class F>
  void execute(F f) {
    bool unused = false;
    run([f = std::move(f)](auto done) mutable {
      f();
      done(error_code{}, 0);
    }, [] {}, deadline::max(), unused);
  }

 private:
  void run() noexcept {
    for (;;) {
      try {
        context_.run();
        return;
      } catch (...) {
        // Handlers here do not throw; should one, the connection's own calls report the failure.
      }
    }
  }

  asio::io_context context_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
};

inline bool is_end_of_stream(const error_code& ec) {
  return ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
}

inline transport_errc classify(const error_code& ec) {
  if (ec.category() == asio::error::get_ssl_category() || ec.category() == asio::ssl::error::get_stream_category())
    return transport_errc::tls;
  return transport_errc::connection_closed;
}

struct socket_tuning {
  int buffer_bytes = 0;  // SO_SNDBUF / SO_RCVBUF; 0 keeps the kernel's autotuning
  bool keepalive = true;
};

// Applied before connect() (and on the listening socket, whose options accepted sockets inherit), because
// the TCP window scale is fixed by the buffer sizes in effect at the handshake.
template <class Socket>
void tune_socket(Socket& s, const socket_tuning& t) {
  error_code ec;
  if (t.buffer_bytes > 0) {
    s.set_option(asio::socket_base::send_buffer_size(t.buffer_bytes), ec);
    s.set_option(asio::socket_base::receive_buffer_size(t.buffer_bytes), ec);
  }
  if (t.keepalive) {
    // A receiver may wait hours for the next patch; keepalive finds a peer that vanished meanwhile
    // within about two minutes instead of the kernel default of two hours.
    s.set_option(asio::socket_base::keep_alive(true), ec);
    const int idle = 60, interval = 10, count = 6;
    ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  }
}

// A connected TCP or TLS stream satisfying `byte_stream`. Movable (state lives on the heap, where the
// I/O thread's handlers point).
class asio_stream {
 public:
  using tls_stream = asio::ssl::stream<tcp::socket>;

  asio_stream(std::unique_ptr<io_thread> io, tcp::socket socket, std::shared_ptr<asio::ssl::context> tls_context)
      : s_(std::make_unique<state>()) {
    s_->io = std::move(io);
    error_code ec;
    const auto ep = socket.remote_endpoint(ec);
    s_->peer = ec ? std::string("unknown peer") : ep.address().to_string() + ":" + std::to_string(ep.port());
    socket.set_option(tcp::no_delay(true), ec);
    if (tls_context) {
      s_->tls_context = std::move(tls_context);
      s_->tls.emplace(std::move(socket), *s_->tls_context);
    } else {
      s_->plain.emplace(std::move(socket));
    }
    s_->where = (s_->tls ? "tls " : "tcp ") + s_->peer;
  }

  asio_stream(asio_stream&&) noexcept = default;
  asio_stream& operator=(asio_stream&&) noexcept = default;

  [[nodiscard]] std::string describe() const { return s_ ? s_->where : std::string("moved-from stream"); }
  [[nodiscard]] bool encrypted() const noexcept { return s_ && s_->tls.has_value(); }

  void write(std::span<const std::span<const std::byte>> pieces, deadline d) {
    std::vector<asio::const_buffer> buffers;
    buffers.reserve(pieces.size());
    for (auto p : pieces) buffers.emplace_back(p.data(), p.size());
    bool timed_out = false;
    state* st = s_.get();
    auto [ec, n] = st->io->run(
        [st, buffers = std::move(buffers)](auto done) {
          st->with_stream([&](auto& stream) { asio::async_write(stream, buffers, std::move(done)); });
        },
        [st] { st->close_now(); }, d, timed_out);
    if (timed_out) throw transport_error(transport_errc::timed_out, s_->where + ": send made no progress before the deadline");
    if (ec) throw transport_error(classify(ec), s_->where + ": write failed: " + ec.message());
  }

  std::size_t read(std::span<std::byte> out, deadline d) {
    bool timed_out = false;
    state* st = s_.get();
    auto [ec, n] = st->io->run(
        [st, out](auto done) {
          st->with_stream([&](auto& stream) { asio::async_read(stream, asio::buffer(out.data(), out.size()), std::move(done)); });
        },
        [st] { st->close_now(); }, d, timed_out);
    if (timed_out) throw transport_error(transport_errc::timed_out, s_->where + ": no data before the deadline");
    if (ec && !is_end_of_stream(ec)) throw transport_error(classify(ec), s_->where + ": read failed: " + ec.message());
    return n;
  }

  void shutdown_send() noexcept {
    if (!s_) return;
    try {
      state* st = s_.get();
      st->io->execute([st] {
        error_code ignored;
        st->lowest().shutdown(tcp::socket::shutdown_send, ignored);
      });
    } catch (...) {
    }
  }

  void abort() noexcept {
    if (!s_) return;
    state* st = s_.get();
    asio::post(st->io->context(), [st] { st->close_now(); });
  }

  // Client or server side TLS handshake; `server_name` (client only) is sent as SNI and checked against the
  // server's certificate when not empty.
  void tls_handshake(bool client, const std::string& server_name, deadline d) {
    if (!s_->tls) return;
    if (client && !server_name.empty()) {
      if (SSL_set_tlsext_host_name(s_->tls->native_handle(), server_name.c_str()) != 1)
        throw transport_error(transport_errc::tls, s_->where + ": cannot set TLS server name: " + openssl_errors());
      s_->tls->set_verify_callback(asio::ssl::host_name_verification(server_name));
    }
    const auto type = client ? asio::ssl::stream_base::client : asio::ssl::stream_base::server;
    bool timed_out = false;
    state* st = s_.get();
    auto [ec, n] = st->io->run([st, type](auto done) {
      st->tls->async_handshake(type, [done = std::move(done)](const error_code& e) mutable { done(e, 0); });
    }, [st] { st->close_now(); }, d, timed_out);
    if (timed_out) throw transport_error(transport_errc::timed_out, s_->where + ": TLS handshake did not finish in time");
    if (ec) throw transport_error(transport_errc::tls, s_->where + ": TLS handshake failed: " + ec.message() + describe_tls_error(ec));
  }

  // Keying material exported from the TLS session (RFC 8446, 7.5), the channel binding of the PSK handshake.
  std::vector<std::byte> tls_binding() {
    std::vector<std::byte> out;
    if (!s_->tls) return out;
    out.resize(32);
    static constexpr char label[] = "EXPORTER-sparsesync-psk-binding";
    int ok = 0;
    s_->io->execute([&] {
      ok = SSL_export_keying_material(s_->tls->native_handle(), reinterpret_cast<unsigned char*>(out.data()), out.size(),
                                      label, sizeof label - 1, nullptr, 0, 0);
    });
    if (ok != 1) throw transport_error(transport_errc::tls, s_->where + ": cannot export TLS keying material: " + openssl_errors());
    return out;
  }

 private:
  struct state {
    std::unique_ptr<io_thread> io;
    std::shared_ptr<asio::ssl::context> tls_context;
    std::optional<tcp::socket> plain;
    std::optional<tls_stream> tls;
    std::string peer;
    std::string where;

    template <class F>
    void with_stream(F&& f) {
      if (tls)
        f(*tls);
      else
        f(*plain);
    }

    tcp::socket& lowest() { return tls ? tls->next_layer() : *plain; }

    void close_now() noexcept {
      error_code ignored;
      lowest().close(ignored);
    }

    ~state() {
      // The sockets are registered with the io_context: stop its thread first, destroy them, then the context.
      if (io) io->stop();
      tls.reset();
      plain.reset();
      io.reset();
    }
  };

  static std::string describe_tls_error(const error_code& ec) {
    if (ec.category() != asio::error::get_ssl_category()) return {};
    const auto reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
    if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED)
      return " (the peer's certificate is not signed by the configured CA, expired, or does not match server_name)";
    if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE)
      return " (the client sent no certificate; sparsesync servers require mutual TLS)";
    return {};
  }

  std::unique_ptr<state> s_;
};

static_assert(byte_stream<asio_stream>);

}  // namespace detail
SPARSESYNC_NS_END
