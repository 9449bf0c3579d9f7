// Helpers shared by the transport tests: deterministic payloads, temporary directories, error capture, and a
// loopback TCP relay that can flip, drop, duplicate or cut bytes between a client and a server.
#pragma once

#include <sparsesync/transport/error.hpp>

#include "temp_dir.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace sparsesync_test {

// Bytes that depend on (seed, size), so both ends can check a frame without sharing it.
inline std::vector<std::byte> payload(std::uint64_t seed, std::size_t size) {
  std::vector<std::byte> v(size);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + size + 1;
  for (std::size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<std::byte>(x);
  }
  return v;
}

// Sizes that cross every boundary the framing has: empty, tiny, the I/O slice (8 MiB) and several MB.
inline const std::vector<std::size_t>& varied_sizes() {
  static const std::vector<std::size_t> sizes = {0, 1, 2, 23, 24, 4095, 4096, 65537, 1u << 20, (3u << 20) + 5,
                                                 (8u << 20) + 3, 0, 1};
  return sizes;
}

// The tests' shared temporary directory (tests/support).
using temp_dir = sparsesync::test::temp_dir;

inline void write_file(const std::filesystem::path& p, const std::string& content,
                       std::filesystem::perms perms = std::filesystem::perms::owner_read | std::filesystem::perms::owner_write) {
  {
    std::ofstream f(p, std::ios::binary);
    f.write(content.data(), static_cast<std::streamsize>(content.size()));
  }
  std::filesystem::permissions(p, perms);
}

// The transport_errc an action fails with (ok when it does not throw a transport_error).
template <class F>
sparsesync::transport_errc error_of(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const sparsesync::transport_error& e) {
    if (message) *message = e.what();
    return e.transport_code();
  }
  return sparsesync::transport_errc::ok;
}

// A POSIX socket connected to 127.0.0.1:port, for tests that speak raw bytes.
class raw_socket {
 public:
  explicit raw_socket(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("raw connect failed");
    timeval tv{10, 0};  // no test may hang on a peer that never answers
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  explicit raw_socket(int fd) : fd_(fd) {}
  raw_socket(raw_socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  ~raw_socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int fd() const { return fd_; }

  void write_all(const void* data, std::size_t n) {
    auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (k <= 0) throw std::runtime_error("raw send failed");
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }
  // Reads exactly n bytes, or fewer at end of stream.
  std::size_t read_exact(void* data, std::size_t n) {
    auto* p = static_cast<char*>(data);
    std::size_t got = 0;
    while (got < n) {
      const ssize_t k = ::recv(fd_, p + got, n - got, 0);
      if (k <= 0) break;
      got += static_cast<std::size_t>(k);
    }
    return got;
  }
  void shutdown_send() { ::shutdown(fd_, SHUT_WR); }

 private:
  int fd_ = -1;
};

// A listening POSIX socket on 127.0.0.1 (an ephemeral port), for tests that play a raw server.
class raw_listener {
 public:
  raw_listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 1) != 0)
      throw std::runtime_error("raw listen failed");
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  raw_listener(const raw_listener&) = delete;
  raw_listener& operator=(const raw_listener&) = delete;
  ~raw_listener() { ::close(fd_); }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  raw_socket accept() {
    const int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) throw std::runtime_error("raw accept failed");
    timeval tv{10, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return raw_socket(c);
  }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// What the relay does to the client->server byte stream, by offset in what the client sent.
struct relay_policy {
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  std::size_t flip_at = none;                       // xor this byte with 0x01
  std::size_t drop_begin = none, drop_end = none;   // forward nothing of [begin, end)
  std::size_t dup_begin = none, dup_end = none;     // after [begin, end) has passed, send it again
  std::size_t cut_at = none;                        // close both connections before this byte
};

// Accepts one client on 127.0.0.1 and relays it to 127.0.0.1:target_port, applying the policy.
class tcp_relay {
 public:
  tcp_relay(std::uint16_t target_port, relay_policy policy) : target_(target_port), policy_(policy) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 1) != 0)
      throw std::runtime_error("relay listen failed");
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~tcp_relay() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    if (thread_.joinable()) thread_.join();
  }
  [[nodiscard]] std::uint16_t port() const { return port_; }

 private:
  void run() {
    const int c = ::accept(listen_fd_, nullptr, nullptr);
    if (c < 0) return;
    raw_socket client(c);
    raw_socket server(target_);
    std::thread back([&] { pump(server.fd(), client.fd(), nullptr); });
    pump(client.fd(), server.fd(), &policy_);
    back.join();
  }

  static void pump(int from, int to, const relay_policy* p) {
    std::vector<char> buf(1 << 16), out;
    std::vector<char> dup;
    std::size_t offset = 0;
    for (;;) {
      const ssize_t n = ::recv(from, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      out.clear();
      bool cut = false;
      for (ssize_t i = 0; i < n; ++i, ++offset) {
        char b = buf[static_cast<std::size_t>(i)];
        if (p) {
          if (offset == p->cut_at) {
            cut = true;
            break;
          }
          if (offset == p->flip_at) b ^= 0x01;
          if (offset >= p->dup_begin && offset < p->dup_end) dup.push_back(b);
          if (offset >= p->drop_begin && offset < p->drop_end) continue;
        }
        out.push_back(b);
        if (p && offset + 1 == p->dup_end) out.insert(out.end(), dup.begin(), dup.end());
      }
      if (!out.empty() && ::send(to, out.data(), out.size(), MSG_NOSIGNAL) < 0) break;
      if (cut) {
        ::shutdown(to, SHUT_RDWR);
        ::shutdown(from, SHUT_RDWR);
        return;
      }
    }
    ::shutdown(to, SHUT_WR);
  }

  std::uint16_t target_;
  relay_policy policy_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace sparsesync_test
