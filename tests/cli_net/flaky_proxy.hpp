// A TCP relay on 127.0.0.1 between a puller and `sparsesync serve` that damages chosen connections: it flips
// one byte of what the server sends on the n-th connection (at an offset, or in the first occurrence of a
// byte pattern within one read), and can cut every open connection at once.
// Threads and blocking sockets: a test tool, not a model of a network.
#pragma once

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <thread>
#include <vector>

namespace net_test {

class flaky_proxy {
 public:
  explicit flaky_proxy(int server_port) : server_port_(server_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(listen_fd_ >= 0);
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = loopback(0);
    REQUIRE(::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listen_fd_, 16) == 0);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  flaky_proxy(const flaky_proxy&) = delete;
  flaky_proxy& operator=(const flaky_proxy&) = delete;
  ~flaky_proxy() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    accept_thread_.join();
    cut_all();
    for (auto& t : pumps_) t.join();
    std::lock_guard lock(mutex_);
    for (const int fd : fds_) ::close(fd);
  }

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int connections() const { return connections_.load(); }

  // On connection number `n` (1-based), flip byte `offset` of the server-to-client stream.
  void flip_server_byte(int n, std::uint64_t offset) {
    std::lock_guard lock(mutex_);
    flips_[n] = offset;
  }

  // On connection number `n`, flip the lowest bit of byte `at` of the first occurrence of `pattern` in the
  // server-to-client stream (found within one read: meant for small frames).
  void flip_server_pattern(int n, std::string pattern, std::size_t at) {
    std::lock_guard lock(mutex_);
    patterns_[n] = {std::move(pattern), at};
  }

  // Ends every open connection abruptly, on both sides.
  void cut_all() {
    std::lock_guard lock(mutex_);
    for (const int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }

 private:
  static sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }

  void accept_loop() {
    while (!stopping_) {
      const int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      if (stopping_) {
        ::close(client);
        break;
      }
      const int upstream = ::socket(AF_INET, SOCK_STREAM, 0);
      const sockaddr_in a = loopback(server_port_);
      if (::connect(upstream, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
        ::close(client);
        ::close(upstream);
        continue;
      }
      const int n = ++connections_;
      std::int64_t flip = -1;
      std::pair<std::string, std::size_t> pattern;
      std::lock_guard lock(mutex_);
      if (auto f = flips_.find(n); f != flips_.end()) flip = static_cast<std::int64_t>(f->second);
      if (auto f = patterns_.find(n); f != patterns_.end()) pattern = f->second;
      fds_.push_back(client);
      fds_.push_back(upstream);
      pumps_.emplace_back([client, upstream] { pump(client, upstream, -1, {}); });
      pumps_.emplace_back([client, upstream, flip, pattern] { pump(upstream, client, flip, pattern); });
    }
  }

  // Copies from -> to until either side ends, flipping the byte at `flip` (if >= 0); then ends both.
  static void pump(int from, int to, std::int64_t flip, std::pair<std::string, std::size_t> pattern) {
    std::vector<unsigned char> buf(1 << 16);
    std::int64_t at = 0;
    for (;;) {
      const ssize_t n = ::recv(from, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      if (flip >= at && flip < at + n) buf[static_cast<std::size_t>(flip - at)] ^= 0x01;
      if (!pattern.first.empty()) {
        const std::string_view seen(reinterpret_cast<const char*>(buf.data()), static_cast<std::size_t>(n));
        if (const auto p = seen.find(pattern.first); p != std::string_view::npos) {
          buf[p + pattern.second] ^= 0x01;
          pattern.first.clear();
        }
      }
      at += n;
      std::size_t sent = 0;
      while (sent < static_cast<std::size_t>(n)) {
        const ssize_t w = ::send(to, buf.data() + sent, static_cast<std::size_t>(n) - sent, MSG_NOSIGNAL);
        if (w <= 0) break;
        sent += static_cast<std::size_t>(w);
      }
      if (sent < static_cast<std::size_t>(n)) break;
    }
    ::shutdown(from, SHUT_RDWR);
    ::shutdown(to, SHUT_RDWR);
  }

  int server_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::thread accept_thread_;
  std::mutex mutex_;  // guards what follows
  std::map<int, std::uint64_t> flips_;
  std::map<int, std::pair<std::string, std::size_t>> patterns_;
  std::vector<int> fds_;
  std::vector<std::thread> pumps_;
};

}  // namespace net_test
