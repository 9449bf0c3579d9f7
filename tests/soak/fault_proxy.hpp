// A TCP relay on 127.0.0.1 that injects faults into the connections it carries: cut (both sockets closed at
// once), bit flip (one random bit of the next bytes relayed in a chosen direction), stall (nothing relayed
// either way until a given time, on the proxy's links now and any made meanwhile). One proxy per receiver, so every fault hits a known receiver's link.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace soak {

using steady = std::chrono::steady_clock;

inline int listen_loopback(std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0)
    throw std::runtime_error("proxy: cannot listen on 127.0.0.1: " + std::string(std::strerror(errno)));
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return fd;
}

inline int connect_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

class fault_proxy {
 public:
  // Relays connections made to port() to 127.0.0.1:upstream() (read at each new connection, so the server
  // behind may restart on another port).
  explicit fault_proxy(std::function<std::uint16_t()> upstream, std::uint64_t seed) : upstream_(std::move(upstream)), rng_(seed) {
    listen_fd_ = listen_loopback(port_);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;
  ~fault_proxy() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    ::close(listen_fd_);
    std::lock_guard lock(mutex_);
    for (auto& c : conns_) {
      c->cut = true;
      if (c->thread.joinable()) c->thread.join();
    }
  }

  [[nodiscard]] std::uint16_t port() const { return port_; }

  // Each returns whether a live connection was there to hit.
  bool cut() { return with_live([](link& c) { c.cut = true; }); }
  bool flip(bool to_server) {
    return with_live([&](link& c) { (to_server ? c.flip_up : c.flip_down) = true; });
  }
  // Stalls this proxy's links, present and future (a reconnection stalls too), for `d`.
  bool stall(std::chrono::milliseconds d) {
    stall_until_ = (steady::now() + d).time_since_epoch().count();
    return with_live([](link&) {});
  }

  [[nodiscard]] std::uint64_t bytes() const { return bytes_.load(); }

 private:
  struct link {
    int down = -1, up = -1;
    std::atomic<bool> cut{false}, flip_up{false}, flip_down{false}, done{false};
    std::thread thread;
  };

  template <class F>
  bool with_live(F&& f) {
    std::lock_guard lock(mutex_);
    bool hit = false;
    for (auto& c : conns_)
      if (!c->done) f(*c), hit = true;
    return hit;
  }

  void accept_loop() {
    while (!stop_) {
      const int down = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (down < 0) {
        if (stop_) return;
        continue;
      }
      const int up = connect_loopback(upstream_());
      if (up < 0) {
        ::close(down);  // the server is down (restarting): the client sees a closed connection
        continue;
      }
      std::lock_guard lock(mutex_);
      for (auto it = conns_.begin(); it != conns_.end();) {  // reap finished relays
        if ((*it)->done) {
          (*it)->thread.join();
          it = conns_.erase(it);
        } else {
          ++it;
        }
      }
      auto& c = conns_.emplace_back(std::make_unique<link>());
      c->down = down;
      c->up = up;
      std::uint64_t seed = rng_();
      c->thread = std::thread([this, raw = c.get(), seed] { relay(*raw, seed); });
    }
  }

  void relay(link& c, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<unsigned char> buf(64 << 10);
    pollfd fds[2] = {{c.down, POLLIN, 0}, {c.up, POLLIN, 0}};
    while (!c.cut && !stop_) {
      if (steady::now().time_since_epoch().count() < stall_until_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      if (::poll(fds, 2, 20) < 0) break;
      bool closed = false;
      for (int i = 0; i < 2 && !closed; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = ::recv(fds[i].fd, buf.data(), buf.size(), 0);
        if (n <= 0) {
          closed = true;
          break;
        }
        auto& flip = i == 0 ? c.flip_up : c.flip_down;
        if (flip.exchange(false)) buf[rng() % n] ^= static_cast<unsigned char>(1u << (rng() % 8));
        for (ssize_t off = 0; off < n && !closed;) {
          const ssize_t w = ::send(fds[1 - i].fd, buf.data() + off, n - off, MSG_NOSIGNAL);
          if (w <= 0) closed = true;
          else off += w;
        }
        bytes_ += static_cast<std::uint64_t>(n);
      }
      if (closed) break;
    }
    // Both ends see the cut at once, as when a link or a middlebox drops the connection.
    ::shutdown(c.down, SHUT_RDWR);
    ::shutdown(c.up, SHUT_RDWR);
    ::close(c.down);
    ::close(c.up);
    c.done = true;
  }

  std::function<std::uint16_t()> upstream_;
  std::mt19937_64 rng_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<steady::rep> stall_until_{0};
  std::atomic<std::uint64_t> bytes_{0};
  std::thread acceptor_;
  std::mutex mutex_;
  std::list<std::unique_ptr<link>> conns_;
};

}  // namespace soak
