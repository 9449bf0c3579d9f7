// UCX transport: UCP stream endpoints, connected by socket address (ucp_listener / CLIENT_SERVER endpoints),
// carrying the same handshake and frames as asio_tcp (docs/TRANSPORTS.md). UCX picks the wire (TCP, shared
// memory, RDMA) from UCX_TLS or ucx_context_options::config.
//
// Device memory: with ucx_options::cuda_device_frames, send_device()/receive_device() move CUDA buffers
// through UCX's CUDA-aware stream protocols. Their payload is NOT covered by the frame MAC (the announcing
// frame is); this path is untested in sparsesync's CI, which has no GPU.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/transport/detail/byte_stream.hpp>
#include <sparsesync/transport/detail/framed_channel.hpp>
#include <sparsesync/transport/detail/handshake.hpp>
#include <sparsesync/transport/detail/ucx_worker.hpp>
#include <sparsesync/transport/error.hpp>
#include <sparsesync/transport/key.hpp>
#include <sparsesync/transport/transport.hpp>

#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

SPARSESYNC_NS_BEGIN

struct ucx_options {
  // As in asio_tcp_options: a pre-shared key is required unless insecure_no_auth is set on both sides.
  std::optional<pre_shared_key> key;
  bool insecure_no_auth = false;
  std::chrono::milliseconds connect_timeout{15'000};    // client: connection setup + handshake (UCX starts slowly)
  std::chrono::milliseconds handshake_timeout{15'000};  // server: key proof of an accepted peer
  std::chrono::milliseconds receive_timeout = no_timeout;
  std::chrono::milliseconds stall_timeout{60'000};
  // After close(), how long destruction waits for the peer to confirm it has read everything.
  std::chrono::milliseconds linger{5'000};
  std::size_t max_frame_size = default_max_frame_size;
  // Enables send_device()/receive_device() for CUDA memory (payload not MAC-protected; untested here).
  bool cuda_device_frames = false;
};

namespace detail {

inline void validate(const ucx_options& o, const char* who) {
  const std::string w = std::string("ucx ") + who + ": ";
  if (!o.key && !o.insecure_no_auth)
    throw transport_error(transport_errc::invalid_argument,
                          w + "no pre-shared key: set options.key = load_key_file(path), or set insecure_no_auth = true "
                              "to run without authentication");
  if (o.key && o.insecure_no_auth)
    throw transport_error(transport_errc::invalid_argument, w + "a key is given and insecure_no_auth is set; choose one");
  if (o.max_frame_size == 0 || o.max_frame_size > hard_max_frame_size)
    throw transport_error(transport_errc::invalid_argument, w + "max_frame_size must be in 1..2^30");
}

inline std::string sockaddr_text(const sockaddr* a) {
  char host[INET6_ADDRSTRLEN] = "?";
  std::uint16_t port = 0;
  if (a->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (a->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

inline sockaddr_storage resolve(const std::string& host, std::uint16_t port, bool passive, const std::string& who) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res); rc != 0)
    throw transport_error(transport_errc::connect_failed, who + ": cannot resolve " + host + ": " + ::gai_strerror(rc));
  sockaddr_storage out{};
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  return out;
}

inline socklen_t sockaddr_length(const sockaddr_storage& a) {
  return a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

// Endpoint status written by UCX's error callback (worker thread) and read by callers. The worker retains
// it, so a callback that fires during a slow close still finds it alive.
struct ucx_ep_status {
  std::atomic<ucs_status_t> error{UCS_OK};
};

inline void on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  static_cast<ucx_ep_status*>(arg)->error.store(status);
}

// Peer-side endings: the stream is over, and the framing layer decides whether that was orderly.
inline bool is_peer_gone(ucs_status_t s) {
  return s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_ENDPOINT_TIMEOUT || s == UCS_ERR_UNREACHABLE ||
         s == UCS_ERR_CANCELED || s == UCS_ERR_REJECTED || s == UCS_ERR_NOT_CONNECTED;
}

// A connected UCP stream endpoint as a `byte_stream`.
class ucx_stream {
 public:
  ucx_stream(std::shared_ptr<ucx_worker> worker, const ucp_ep_params_t& base_params, std::string where,
             std::chrono::milliseconds linger)
      : s_(std::make_shared<state>()) {
    s_->worker = std::move(worker);
    s_->where = std::move(where);
    s_->linger = linger;
    s_->status = std::make_shared<ucx_ep_status>();
    s_->worker->retain(s_->status);
    ucp_ep_params_t params = base_params;
    params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &on_ep_error;
    params.err_handler.arg = s_->status.get();
    ucs_status_t status = UCS_OK;
    state* st = s_.get();
    st->worker->execute([&] { status = ucp_ep_create(st->worker->handle(), &params, &st->ep); });
    if (status != UCS_OK) throw_ucx(st->where + ": ucp_ep_create", status, transport_errc::connect_failed);
  }
  ucx_stream(ucx_stream&&) noexcept = default;
  ucx_stream& operator=(ucx_stream&&) noexcept = default;
  ~ucx_stream() {
    if (s_) s_->close_endpoint();
  }

  [[nodiscard]] std::string describe() const { return s_ ? s_->where : std::string("moved-from ucx stream"); }
  // The error UCX reported for the endpoint, if any (e.g. UCS_ERR_UNREACHABLE on a refused connect).
  [[nodiscard]] ucs_status_t endpoint_error() const noexcept { return s_ ? s_->status->error.load() : UCS_OK; }

  void write(std::span<const std::span<const std::byte>> pieces, deadline d) {
    std::vector<std::span<const std::byte>> parts;
    for (auto p : pieces)
      if (!p.empty()) parts.push_back(p);
    if (parts.empty()) return;
    transfer(parts.size(), d, "send", false, [parts](state* st, const std::shared_ptr<ucx_op>& op) {
      for (auto p : parts) st->send(p.data(), p.size(), UCS_MEMORY_TYPE_HOST, op);
    });
  }

  std::size_t read(std::span<std::byte> out, deadline d) {
    if (out.empty()) return 0;
    return transfer(1, d, "receive", true, [out](state* st, const std::shared_ptr<ucx_op>& op) {
      st->receive(out.data(), out.size(), UCS_MEMORY_TYPE_HOST, op);
    });
  }

  void write_device(const void* data, std::size_t n, deadline d) {
    if (n == 0) return;
    transfer(1, d, "device send", false, [data, n](state* st, const std::shared_ptr<ucx_op>& op) {
      st->send(data, n, UCS_MEMORY_TYPE_CUDA, op);
    });
  }

  std::size_t read_device(void* data, std::size_t n, deadline d) {
    if (n == 0) return 0;
    return transfer(1, d, "device receive", true, [data, n](state* st, const std::shared_ptr<ucx_op>& op) {
      st->receive(data, n, UCS_MEMORY_TYPE_CUDA, op);
    });
  }

  // The close frame already ends the stream for the peer; UCX endpoints have no half-close.
  void shutdown_send() noexcept {}

  void abort() noexcept {
    if (!s_) return;
    s_->aborted.store(true);
    state* st = s_.get();
    try {
      st->worker->post([st] { st->force_close(); });
    } catch (...) {
    }
  }

 private:
  struct state {
    std::shared_ptr<ucx_worker> worker;
    std::shared_ptr<ucx_ep_status> status;
    ucp_ep_h ep = nullptr;                                   // worker thread only
    std::atomic<bool> aborted{false};
    std::string where;
    std::chrono::milliseconds linger{0};

    // Worker thread.
    void send(const void* data, std::size_t n, ucs_memory_type_t mem, const std::shared_ptr<ucx_op>& op) {
      void* ref = op_ref(op);
      if (const auto s = unusable(); s != UCS_OK) return finish_request(UCS_STATUS_PTR(s), ref, UCS_OK, 0);
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
      p.cb.send = &on_send_done;
      p.user_data = ref;
      p.memory_type = mem;
      finish_request(ucp_stream_send_nbx(ep, data, n, &p), ref, UCS_OK, 0);
    }

    // Worker thread.
    void receive(void* data, std::size_t n, ucs_memory_type_t mem, const std::shared_ptr<ucx_op>& op) {
      void* ref = op_ref(op);
      if (const auto s = unusable(); s != UCS_OK) return finish_request(UCS_STATUS_PTR(s), ref, UCS_OK, 0);
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS |
                       UCP_OP_ATTR_FIELD_MEMORY_TYPE;
      p.flags = UCP_STREAM_RECV_FLAG_WAITALL;
      p.cb.recv_stream = &on_recv_done;
      p.user_data = ref;
      p.memory_type = mem;
      std::size_t length = 0;
      const ucs_status_ptr_t r = ucp_stream_recv_nbx(ep, data, n, &length, &p);  // sets length when done at once
      finish_request(r, ref, UCS_OK, length);
    }

    // Worker thread. A request posted on a failed endpoint would never complete: refuse it up front (the
    // error callback runs on this thread too, so the check cannot race with it).
    ucs_status_t unusable() const {
      if (!ep) return UCS_ERR_CANCELED;
      return status->error.load();
    }

    // Worker thread. Outstanding requests complete with UCS_ERR_CANCELED.
    void force_close() { force_close_endpoint(*worker, std::exchange(ep, nullptr)); }

    // Orderly teardown from the destructor: flush what was sent (the close frame), bounded by `linger`.
    void close_endpoint() noexcept {
      try {
        auto op = std::make_shared<ucx_op>();
        op->outstanding = 1;
        worker->retain(op);  // the close callback may come after this wait gave up
        const bool force = aborted.load() || status->error.load() != UCS_OK;
        worker->execute([this, op, force] {
          if (!ep) {
            op->complete(UCS_OK, 0);
            return;
          }
          ucp_request_param_t p{};
          p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
          p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
          p.cb.send = [](void* request, ucs_status_t s, void* user_data) {
            static_cast<ucx_op*>(user_data)->complete(s, 0);
            ucp_request_free(request);
          };
          p.user_data = op.get();
          const ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
          ep = nullptr;
          if (r == nullptr || UCS_PTR_IS_ERR(r)) op->complete(r == nullptr ? UCS_OK : UCS_PTR_STATUS(r), 0);
        });
        std::unique_lock lock(op->mutex);
        op->cv.wait_for(lock, linger, [&] { return op->done; });
      } catch (...) {
      }
    }
  };

  template <class Start>
  std::size_t transfer(std::size_t requests, deadline d, const char* what, bool is_read, Start start) {
    state* st = s_.get();
    if (st->aborted.load()) throw transport_error(transport_errc::connection_closed, st->where + ": connection closed by this side");
    auto op = std::make_shared<ucx_op>();
    op->outstanding = static_cast<int>(requests);
    st->worker->post([st, op, start] { start(st, op); });
    std::unique_lock lock(op->mutex);
    const auto finished = [&] { return op->done; };
    bool timed_out = false;
    if (d == deadline::max()) {
      op->cv.wait(lock, finished);
    } else if (!op->cv.wait_until(lock, d, finished)) {
      timed_out = true;
      st->aborted.store(true);
      st->worker->post([st] { st->force_close(); });
      op->cv.wait(lock, finished);  // the buffers stay UCX's until the cancelled requests complete
    }
    if (timed_out) throw transport_error(transport_errc::timed_out, st->where + ": " + what + " made no progress before the deadline");
    if (op->status == UCS_OK) return op->length;
    if (st->aborted.load())
      throw transport_error(transport_errc::connection_closed, st->where + ": connection closed by this side");
    const ucs_status_t peer = st->status->error.load();
    if (is_peer_gone(op->status) || is_peer_gone(peer)) {
      if (is_read) return 0;  // the end of the stream; the framing layer tells orderly from abrupt
      throw transport_error(transport_errc::connection_closed,
                            st->where + ": " + what + " failed, the peer is gone: " + ucs_status_string(peer != UCS_OK ? peer : op->status));
    }
    throw_ucx(st->where + ": " + what + " failed", op->status);
  }

  std::shared_ptr<state> s_;
};

static_assert(byte_stream<ucx_stream>);

}  // namespace detail

class ucx_listener;

class ucx_transport {
 public:
  using transport_concept = transport_tag;

  // Connects to a ucx_listener at host:port; each connection gets its own worker and progress thread.
  static ucx_transport connect(std::shared_ptr<ucx_context> context, const std::string& host, std::uint16_t port,
                               const ucx_options& options) {
    detail::validate(options, "connect");
    const std::string where = "ucx " + host + ":" + std::to_string(port);
    const auto addr = detail::resolve(host, port, false, "ucx connect");
    auto worker = std::make_shared<detail::ucx_worker>(std::move(context));
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    params.sockaddr.addrlen = detail::sockaddr_length(addr);
    detail::ucx_stream stream(std::move(worker), params, where, options.linger);
    // UCX connects lazily: a refused or unreachable peer shows up as an endpoint error during the handshake.
    try {
      return ucx_transport(establish(stream, detail::role::client, options, detail::deadline_after(options.connect_timeout)),
                           options);
    } catch (const transport_error& e) {
      // Only an end without a verdict is a connection failure; a refused key or mode stays what it is.
      const auto s = stream.endpoint_error();
      if (s != UCS_OK && (e.transport_code() == transport_errc::connection_closed ||
                          e.transport_code() == transport_errc::truncated || e.transport_code() == transport_errc::timed_out))
        throw transport_error(transport_errc::connect_failed, where + ": cannot connect: " + ucs_status_string(s) + " (" +
                                                                  e.what() + ")");
      throw;
    }
  }

  ucx_transport(ucx_transport&&) noexcept = default;
  ucx_transport& operator=(ucx_transport&& other) noexcept {
    if (this != &other) {
      linger();
      channel_ = std::move(other.channel_);
      linger_ = other.linger_;
      device_frames_ = other.device_frames_;
    }
    return *this;
  }
  // After close(), waits up to ucx_options::linger for the peer to confirm it read everything (UCX discards
  // data a receiver has not yet read when the sender's endpoint goes away).
  ~ucx_transport() { linger(); }

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
  void abort() noexcept {
    if (channel_) channel_->abort("aborted by this side");
  }

  // Sends `bytes` of CUDA device memory as one frame (needs cuda_device_frames on both sides). The frame that
  // announces it is authenticated; the device bytes themselves are not. Untested in sparsesync's CI.
  void send_device(const void* device_data, std::size_t bytes) {
    require_device_frames();
    if (bytes > max_frame_size())
      throw transport_error(transport_errc::frame_too_large, peer() + ": device frame of " + std::to_string(bytes) +
                                                                 " bytes exceeds max_frame_size");
    std::array<std::byte, 16> meta{};
    detail::store_le<std::uint64_t>(reinterpret_cast<unsigned char*>(meta.data()), bytes);
    channel().send(meta, detail::frame_type::device,
                   [&](detail::ucx_stream& s, detail::deadline d) { s.write_device(device_data, bytes, d); });
  }

  // Receives a device frame into `device_data` (capacity bytes); returns its size, or nothing once the peer
  // closed. A host frame in its place, or one larger than `capacity`, is an error that ends the connection.
  std::optional<std::size_t> receive_device(void* device_data, std::size_t capacity) {
    require_device_frames();
    std::vector<std::byte> meta;
    std::size_t size = 0;
    const bool got = channel().receive(meta, [&](detail::frame_type t, const std::vector<std::byte>& m,
                                                 detail::ucx_stream& s, detail::deadline d) {
      if (t != detail::frame_type::device || m.size() != 16)
        throw transport_error(transport_errc::protocol, s.describe() + ": a host frame arrived where a device frame was expected");
      const auto n = detail::load_le<std::uint64_t>(reinterpret_cast<const unsigned char*>(m.data()));
      if (n > capacity || n > max_frame_size())
        throw transport_error(transport_errc::frame_too_large, s.describe() + ": device frame of " + std::to_string(n) +
                                                                   " bytes exceeds the buffer of " + std::to_string(capacity));
      if (s.read_device(device_data, n, d) != n)
        throw transport_error(transport_errc::truncated, s.describe() + ": the stream ended inside a device frame");
      size = n;
    });
    if (!got) return std::nullopt;
    return size;
  }

  [[nodiscard]] std::size_t max_frame_size() const noexcept { return channel_ ? channel_->max_frame_size() : 0; }
  [[nodiscard]] bool authenticated() const noexcept { return channel_ && channel_->authenticated(); }
  [[nodiscard]] std::string peer() const { return channel_ ? channel_->stream().describe() : std::string(); }

 private:
  friend class ucx_listener;
  using channel_type = detail::framed_channel<detail::ucx_stream>;

  ucx_transport(std::unique_ptr<channel_type> c, const ucx_options& o)
      : channel_(std::move(c)), linger_(o.linger), device_frames_(o.cuda_device_frames) {}

  void linger() noexcept {
    if (channel_) channel_->linger(detail::deadline_after(linger_));
  }

  // Moves `stream` into the channel only on success, so a caller can still ask it what went wrong.
  static std::unique_ptr<channel_type> establish(detail::ucx_stream& stream, detail::role r, const ucx_options& o,
                                                 detail::deadline d) {
    auto keys = detail::handshake(stream, r, o.key ? &*o.key : nullptr, {}, d);
    return std::make_unique<channel_type>(std::move(stream), std::move(keys),
                                          detail::channel_options{o.max_frame_size, o.receive_timeout, o.stall_timeout, true});
  }

  void require_device_frames() const {
    if (!device_frames_)
      throw transport_error(transport_errc::invalid_argument, "ucx: device frames need ucx_options::cuda_device_frames");
  }

  channel_type& channel() const {
    if (!channel_) throw transport_error(transport_errc::connection_closed, "ucx: use of a moved-from transport");
    return *channel_;
  }

  std::unique_ptr<channel_type> channel_;
  std::chrono::milliseconds linger_{0};
  bool device_frames_ = false;
};

class ucx_listener {
 public:
  using listener_concept = listener_tag;
  using transport_type = ucx_transport;

  // Listens on address:port (port 0 picks a free one; see port()).
  ucx_listener(std::shared_ptr<ucx_context> context, const std::string& address, std::uint16_t port, ucx_options options)
      : context_(context), options_(std::move(options)), shared_(std::make_shared<shared>()) {
    detail::validate(options_, "listener");
    where_ = "ucx listener " + address + ":" + std::to_string(port);
    worker_ = std::make_shared<detail::ucx_worker>(std::move(context));
    const auto addr = detail::resolve(address, port, true, where_);
    ucp_listener_params_t params{};
    params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    params.sockaddr.addrlen = detail::sockaddr_length(addr);
    params.conn_handler.cb = &on_connection;
    params.conn_handler.arg = shared_.get();
    ucs_status_t status = UCS_OK;
    sockaddr_storage bound{};
    worker_->execute([&] {
      status = ucp_listener_create(worker_->handle(), &params, &listener_);
      if (status != UCS_OK) return;
      ucp_listener_attr_t attr{};
      attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
      if (ucp_listener_query(listener_, &attr) == UCS_OK) bound = attr.sockaddr;
    });
    if (status != UCS_OK) detail::throw_ucx(where_ + ": ucp_listener_create", status, transport_errc::connect_failed);
    if (bound.ss_family == AF_INET) port_ = ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    if (bound.ss_family == AF_INET6) port_ = ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port);
  }
  ucx_listener(const ucx_listener&) = delete;
  ucx_listener& operator=(const ucx_listener&) = delete;
  ~ucx_listener() { close(); }

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

  ucx_transport accept() { return accept(no_timeout); }

  // Waits for a connection request, gives it its own worker, and runs the handshake (handshake_timeout).
  ucx_transport accept(std::chrono::milliseconds timeout) {
    pending_request req;
    {
      std::unique_lock lock(shared_->mutex);
      const auto ready = [&] { return shared_->closed || !shared_->pending.empty(); };
      if (timeout == no_timeout)
        shared_->cv.wait(lock, ready);
      else if (!shared_->cv.wait_for(lock, timeout, ready))
        throw transport_error(transport_errc::timed_out, where_ + ": no connection within the accept timeout");
      if (shared_->closed) throw transport_error(transport_errc::connection_closed, where_ + ": closed");
      req = shared_->pending.front();
      shared_->pending.pop_front();
    }
    auto worker = std::make_shared<detail::ucx_worker>(context_);
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    params.conn_request = req.request;
    detail::ucx_stream stream(std::move(worker), params, "ucx " + req.peer, options_.linger);
    return ucx_transport(ucx_transport::establish(stream, detail::role::server, options_,
                                                  detail::deadline_after(options_.handshake_timeout)),
                         options_);
  }

  void close() noexcept {
    {
      std::lock_guard lock(shared_->mutex);
      if (shared_->closed) return;
      shared_->closed = true;
      shared_->cv.notify_all();
    }
    try {
      worker_->execute([this] {
        std::lock_guard lock(shared_->mutex);
        for (const auto& r : shared_->pending) ucp_listener_reject(listener_, r.request);
        shared_->pending.clear();
        if (listener_) ucp_listener_destroy(listener_);
        listener_ = nullptr;
      });
    } catch (...) {
    }
  }

 private:
  struct pending_request {
    ucp_conn_request_h request = nullptr;
    std::string peer;
  };
  struct shared {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<pending_request> pending;
    bool closed = false;
  };

  // Worker thread of the listener.
  static void on_connection(ucp_conn_request_h request, void* arg) {
    auto* s = static_cast<shared*>(arg);
    std::string peer = "unknown peer";
    ucp_conn_request_attr_t attr{};
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(request, &attr) == UCS_OK)
      peer = detail::sockaddr_text(reinterpret_cast<const sockaddr*>(&attr.client_address));
    std::lock_guard lock(s->mutex);
    s->pending.push_back({request, std::move(peer)});
    s->cv.notify_one();
  }

  std::shared_ptr<ucx_context> context_;
  ucx_options options_;
  std::shared_ptr<shared> shared_;
  std::string where_;
  std::shared_ptr<detail::ucx_worker> worker_;
  ucp_listener_h listener_ = nullptr;  // worker thread only (after construction)
  std::uint16_t port_ = 0;
};

static_assert(check_transport<ucx_transport>);
static_assert(check_listener<ucx_listener>);

SPARSESYNC_NS_END
