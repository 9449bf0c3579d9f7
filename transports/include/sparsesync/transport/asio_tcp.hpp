// TCP transport over Boost.Asio. Authenticated by default: both sides prove knowledge of a pre-shared key and
// every frame carries a sequence number and a ChaCha20-Poly1305 tag (docs/TRANSPORTS.md). TLS with mutual
// certificate authentication adds confidentiality. Plaintext without authentication needs insecure_no_auth.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/transport/detail/asio_stream.hpp>
#include <sparsesync/transport/detail/framed_channel.hpp>
#include <sparsesync/transport/detail/handshake.hpp>
#include <sparsesync/transport/error.hpp>
#include <sparsesync/transport/key.hpp>
#include <sparsesync/transport/transport.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

SPARSESYNC_NS_BEGIN

// Mutual TLS: each side presents a certificate signed by `ca_file` and verifies the peer's against it.
struct tls_options {
  std::filesystem::path ca_file;    // PEM: the CA (or CAs) whose signature the peer's certificate must carry
  std::filesystem::path cert_file;  // PEM: this side's certificate, followed by any intermediates
  std::filesystem::path key_file;   // PEM: this side's private key (unencrypted)
  // Client only: the name the server's certificate must hold (DNS or IP subjectAltName); also sent as SNI.
  // Empty accepts any certificate the CA signed, the usual choice with a private CA per deployment.
  std::string server_name;
};

struct asio_tcp_options {
  // The key both sides must hold (load it with load_key_file()). Required unless `tls` is set (mutual TLS
  // authenticates on its own) or insecure_no_auth; with TLS it still adds a second, independent check.
  std::optional<pre_shared_key> key;
  // Confidentiality, and authentication by certificates: both sides present one signed by ca_file.
  std::optional<tls_options> tls;
  // Plaintext frames without any authentication: anyone who can reach the port can feed frames in, and
  // anyone on the path can alter them. Both sides must set it; meant for debugging on a trusted host only.
  bool insecure_no_auth = false;

  std::chrono::milliseconds connect_timeout{10'000};    // resolve + TCP connect, per call
  std::chrono::milliseconds handshake_timeout{10'000};  // TLS + key proof; bounds what a silent client holds
  std::chrono::milliseconds receive_timeout = no_timeout;  // wait for the next frame (idle waits are normal)
  std::chrono::milliseconds stall_timeout{60'000};      // longest pause inside a frame or a send
  std::size_t max_frame_size = default_max_frame_size;
  int socket_buffer_bytes = 4 << 20;  // SO_SNDBUF/SO_RCVBUF; 0 leaves the kernel's autotuning
  int listen_backlog = 128;
};

namespace detail {

inline void validate(const asio_tcp_options& o, const char* who) {
  const std::string w = std::string("asio_tcp ") + who + ": ";
  if (!o.key && !o.tls && !o.insecure_no_auth)
    throw transport_error(transport_errc::invalid_argument,
                          w + "no authentication configured: set options.key = load_key_file(path) and/or options.tls "
                              "(mutual TLS), or set insecure_no_auth = true to run without authentication");
  if (o.insecure_no_auth && (o.key || o.tls))
    throw transport_error(transport_errc::invalid_argument,
                          w + "insecure_no_auth is set together with a key or TLS; drop insecure_no_auth");
  if (o.max_frame_size == 0 || o.max_frame_size > hard_max_frame_size)
    throw transport_error(transport_errc::invalid_argument, w + "max_frame_size must be in 1..2^30");
  if (o.tls && (o.tls->ca_file.empty() || o.tls->cert_file.empty() || o.tls->key_file.empty()))
    throw transport_error(transport_errc::invalid_argument, w + "TLS needs ca_file, cert_file and key_file on both sides");
}

inline std::shared_ptr<asio::ssl::context> make_tls_context(const tls_options& t, bool server) {
  auto ctx = std::make_shared<asio::ssl::context>(server ? asio::ssl::context::tls_server : asio::ssl::context::tls_client);
  SSL_CTX* native = ctx->native_handle();
  // TLS 1.3 only: forward secrecy and AEAD ciphers without configuration.
  if (SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION) != 1) throw_openssl("SSL_CTX_set_min_proto_version", transport_errc::tls);
  // Connections are long-lived and never resumed; without tickets nothing is written after the handshake
  // that the other side would have to read before its first frame.
  SSL_CTX_set_num_tickets(native, 0);
  SSL_CTX_set_options(native, SSL_OP_NO_TICKET);
  auto load = [&](auto&& fn, const std::filesystem::path& p, const char* what) {
    error_code ec;
    fn(p.string(), ec);
    if (ec)
      throw transport_error(transport_errc::tls, std::string("loading TLS ") + what + " " + p.string() + ": " + ec.message());
  };
  load([&](const std::string& p, error_code& ec) { ctx->load_verify_file(p, ec); }, t.ca_file, "CA file");
  load([&](const std::string& p, error_code& ec) { ctx->use_certificate_chain_file(p, ec); }, t.cert_file, "certificate");
  load([&](const std::string& p, error_code& ec) { ctx->use_private_key_file(p, asio::ssl::context::pem, ec); }, t.key_file,
       "private key");
  if (SSL_CTX_check_private_key(native) != 1)
    throw transport_error(transport_errc::tls, "TLS private key " + t.key_file.string() + " does not match certificate " +
                                                   t.cert_file.string() + ": " + openssl_errors());
  ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  return ctx;
}

inline channel_options channel_options_of(const asio_tcp_options& o) {
  return {o.max_frame_size, o.receive_timeout, o.stall_timeout};
}

}  // namespace detail

class asio_tcp_listener;

class asio_tcp_transport {
 public:
  using transport_concept = transport_tag;

  // Connects, runs TLS (if configured) and the key handshake; throws transport_error naming the failing step.
  static asio_tcp_transport connect(const std::string& host, std::uint16_t port, const asio_tcp_options& options) {
    detail::validate(options, "connect");
    auto tls = options.tls ? detail::make_tls_context(*options.tls, false) : nullptr;
    const std::string where = host + ":" + std::to_string(port);
    auto io = std::make_unique<detail::io_thread>();
    const auto connect_deadline = detail::deadline_after(options.connect_timeout);

    detail::asio::ip::tcp::resolver resolver(io->context());
    detail::asio::ip::tcp::resolver::results_type endpoints;
    bool timed_out = false;
    auto [rec, rn] = io->run(
        [&](auto done) {
          resolver.async_resolve(host, std::to_string(port), [&, done = std::move(done)](const detail::error_code& ec, auto results) mutable {
            endpoints = std::move(results);
            done(ec, 0);
          });
        },
        [&] { resolver.cancel(); }, connect_deadline, timed_out);
    if (timed_out) throw transport_error(transport_errc::timed_out, "asio_tcp connect " + where + ": name resolution timed out");
    if (rec) throw transport_error(transport_errc::connect_failed, "asio_tcp connect " + where + ": cannot resolve: " + rec.message());

    detail::tcp::socket socket(io->context());
    std::string failures;
    bool connected = false;
    for (const auto& entry : endpoints) {
      const auto ep = entry.endpoint();
      detail::error_code ec;
      socket.close(ec);
      socket.open(ep.protocol(), ec);
      if (ec) {
        failures += " " + ep.address().to_string() + ": " + ec.message() + ";";
        continue;
      }
      detail::tune_socket(socket, {options.socket_buffer_bytes, true});
      auto [cec, cn] = io->run([&](auto done) { socket.async_connect(ep, [done = std::move(done)](const detail::error_code& e) mutable { done(e, 0); }); },
                               [&] { detail::error_code ignored; socket.close(ignored); }, connect_deadline, timed_out);
      if (timed_out) throw transport_error(transport_errc::timed_out, "asio_tcp connect " + where + ": connect timed out");
      if (!cec) {
        connected = true;
        break;
      }
      failures += " " + ep.address().to_string() + ": " + cec.message() + ";";
    }
    if (!connected) throw transport_error(transport_errc::connect_failed, "asio_tcp connect " + where + ":" + failures);

    detail::asio_stream stream(std::move(io), std::move(socket), std::move(tls));
    return asio_tcp_transport(establish(std::move(stream), detail::role::client, options));
  }

  asio_tcp_transport(asio_tcp_transport&&) noexcept = default;
  asio_tcp_transport& operator=(asio_tcp_transport&&) noexcept = default;
  ~asio_tcp_transport() = default;

  void send(std::span<const std::byte> frame) { channel().send(frame); }
  bool receive(std::vector<std::byte>& frame) { return channel().receive(frame); }
  void send(std::span<const std::byte> frame, std::error_code& ec) noexcept {
    detail::capture_error(ec, [&] { send(frame); });
  }
  bool receive(std::vector<std::byte>& frame, std::error_code& ec) noexcept {
    return detail::capture_error(ec, [&] { return receive(frame); });
  }
  void close() noexcept {
    if (channel_) channel_->close();
  }
  // Tears the connection down now (no close frame): blocked calls fail, the peer sees an abrupt end.
  void abort() noexcept {
    if (channel_) channel_->abort("aborted by this side");
  }

  [[nodiscard]] std::size_t max_frame_size() const noexcept { return channel_ ? channel_->max_frame_size() : 0; }
  [[nodiscard]] bool authenticated() const noexcept { return channel_ && channel_->authenticated(); }
  [[nodiscard]] bool encrypted() const noexcept { return channel_ && channel_->stream().encrypted(); }
  // "tcp 10.0.0.2:41234" or "tls ...": the peer, for logs.
  [[nodiscard]] std::string peer() const { return channel_ ? channel_->stream().describe() : std::string(); }

 private:
  friend class asio_tcp_listener;
  friend class asio_tcp_pending;
  using channel_type = detail::framed_channel<detail::asio_stream>;

  explicit asio_tcp_transport(std::unique_ptr<channel_type> c) : channel_(std::move(c)) {}

  static std::unique_ptr<channel_type> establish(detail::asio_stream stream, detail::role r, const asio_tcp_options& o) {
    auto keys = handshake_in_place(stream, r, o);
    return std::make_unique<channel_type>(std::move(stream), std::move(keys), detail::channel_options_of(o));
  }

  // TLS and the key handshake on `stream`, bounded by handshake_timeout; the frame keys (if any).
  static std::optional<detail::session_keys> handshake_in_place(detail::asio_stream& stream, detail::role r, const asio_tcp_options& o) {
    const auto d = detail::deadline_after(o.handshake_timeout);
    stream.tls_handshake(r == detail::role::client, o.tls ? o.tls->server_name : std::string(), d);
    const auto binding = stream.tls_binding();
    return detail::handshake(stream, r, o.key ? &*o.key : nullptr, binding, d);
  }

  channel_type& channel() const {
    if (!channel_) throw transport_error(transport_errc::connection_closed, "asio_tcp: use of a moved-from transport");
    return *channel_;
  }

  std::unique_ptr<channel_type> channel_;
};

// A connection the listener accepted whose TLS and key handshake have not run yet (asio_tcp_listener::
// accept_pending): a server runs establish() wherever it likes, so that a silent or slow peer holds only its
// own thread, never the accept loop. abort() may be called from any thread, before or during establish().
class asio_tcp_pending {
 public:
  asio_tcp_pending(asio_tcp_pending&&) noexcept = default;
  asio_tcp_pending& operator=(asio_tcp_pending&&) noexcept = default;

  // Runs the handshake (bounded by handshake_timeout); throws transport_error naming the failing step. Once.
  asio_tcp_transport establish() {
    auto keys = asio_tcp_transport::handshake_in_place(s_->stream, detail::role::server, *s_->options);
    std::lock_guard lock(s_->mutex);
    if (s_->aborted) throw transport_error(transport_errc::connection_closed, s_->stream.describe() + ": aborted by this side");
    s_->taken = true;
    return asio_tcp_transport(std::make_unique<asio_tcp_transport::channel_type>(std::move(s_->stream), std::move(keys),
                                                                                  detail::channel_options_of(*s_->options)));
  }
  // Cuts the connection: a handshake in progress fails promptly. Does nothing once establish() returned.
  void abort() noexcept {
    std::lock_guard lock(s_->mutex);
    s_->aborted = true;
    if (!s_->taken) s_->stream.abort();
  }
  // "tcp 10.0.0.2:41234": the peer, for logs.
  [[nodiscard]] std::string peer() const { return s_->peer; }

 private:
  friend class asio_tcp_listener;
  struct state {
    state(detail::asio_stream s, std::shared_ptr<const asio_tcp_options> o) : stream(std::move(s)), options(std::move(o)), peer(stream.describe()) {}
    detail::asio_stream stream;
    std::shared_ptr<const asio_tcp_options> options;
    std::string peer;
    std::mutex mutex;  // guards `taken` and `aborted` against abort() from another thread
    bool taken = false;
    bool aborted = false;
  };
  explicit asio_tcp_pending(std::unique_ptr<state> s) : s_(std::move(s)) {}
  std::unique_ptr<state> s_;
};

class asio_tcp_listener {
 public:
  using listener_concept = listener_tag;
  using transport_type = asio_tcp_transport;

  // Listens on `address` (e.g. "0.0.0.0", "::", "127.0.0.1") and `port` (0 picks a free port; see port()).
  asio_tcp_listener(const std::string& address, std::uint16_t port, asio_tcp_options options)
      : options_(std::make_shared<const asio_tcp_options>(std::move(options))), io_(std::make_unique<detail::io_thread>()),
        acceptor_(io_->context()) {
    const asio_tcp_options& o = *options_;
    detail::validate(o, "listener");
    if (o.tls) tls_ = detail::make_tls_context(*o.tls, true);
    const std::string where = "asio_tcp listener " + address + ":" + std::to_string(port);
    detail::error_code ec;
    const auto addr = detail::asio::ip::make_address(address, ec);
    if (ec) throw transport_error(transport_errc::invalid_argument, where + ": bad address: " + ec.message());
    const detail::tcp::endpoint ep(addr, port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(detail::tcp::acceptor::reuse_address(true), ec);
    if (!ec) detail::tune_socket(acceptor_, {o.socket_buffer_bytes, true});
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(o.listen_backlog, ec);
    if (ec) throw transport_error(transport_errc::connect_failed, where + ": " + ec.message());
    port_ = acceptor_.local_endpoint().port();
  }
  asio_tcp_listener(const asio_tcp_listener&) = delete;
  asio_tcp_listener& operator=(const asio_tcp_listener&) = delete;
  ~asio_tcp_listener() {
    close();
    io_->stop();
  }

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

  // Accepts one peer and completes TLS and the key handshake with it (bounded by handshake_timeout). A peer
  // that fails the handshake is dropped and reported by the exception; the listener keeps listening.
  asio_tcp_transport accept() { return accept(no_timeout); }

  // As accept(), but gives up with transport_errc::timed_out when no peer connects within `timeout`.
  asio_tcp_transport accept(std::chrono::milliseconds timeout) { return accept_pending(timeout).establish(); }

  // Accepts one peer without running its handshake: see asio_tcp_pending. Throws as accept().
  asio_tcp_pending accept_pending(std::chrono::milliseconds timeout = no_timeout) {
    auto conn_io = std::make_unique<detail::io_thread>();
    detail::tcp::socket socket(conn_io->context());
    bool timed_out = false;
    auto [ec, n] = io_->run(
        [&](auto done) {
          acceptor_.async_accept(socket, [done = std::move(done)](const detail::error_code& e) mutable { done(e, 0); });
        },
        [this] {
          detail::error_code ignored;
          acceptor_.cancel(ignored);
        },
        detail::deadline_after(timeout), timed_out);
    if (closed_.load()) throw transport_error(transport_errc::connection_closed, "asio_tcp listener: closed");
    if (timed_out) throw transport_error(transport_errc::timed_out, "asio_tcp listener: no connection within the accept timeout");
    if (ec) throw transport_error(transport_errc::connect_failed, "asio_tcp listener: accept failed: " + ec.message());
    detail::asio_stream stream(std::move(conn_io), std::move(socket), tls_);
    return asio_tcp_pending(std::make_unique<asio_tcp_pending::state>(std::move(stream), options_));
  }

  void close() noexcept {
    if (closed_.exchange(true)) return;
    try {
      io_->execute([this] {
        detail::error_code ignored;
        acceptor_.close(ignored);
      });
    } catch (...) {
    }
  }

 private:
  std::shared_ptr<const asio_tcp_options> options_;  // shared with pending connections
  std::shared_ptr<detail::asio::ssl::context> tls_;
  std::unique_ptr<detail::io_thread> io_;
  detail::tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::atomic<bool> closed_{false};
};

static_assert(check_transport<asio_tcp_transport>);
static_assert(check_listener<asio_tcp_listener>);

// asio_tcp_transport::connect for a peer that may still be starting: a refused or unreachable connection
// (transport_errc::connect_failed) is retried every `interval`, `attempts` times at most; any other failure (a
// wrong key, a refused certificate) is thrown at once.
inline asio_tcp_transport connect_retrying(const std::string& host, std::uint16_t port, const asio_tcp_options& options,
                                           int attempts = 300, std::chrono::milliseconds interval = std::chrono::milliseconds{100}) {
  for (int attempt = 0;; ++attempt) {
    try {
      return asio_tcp_transport::connect(host, port, options);
    } catch (const transport_error& e) {
      if (e.transport_code() != transport_errc::connect_failed || attempt >= attempts) throw;
      std::this_thread::sleep_for(interval);
    }
  }
}

SPARSESYNC_NS_END
