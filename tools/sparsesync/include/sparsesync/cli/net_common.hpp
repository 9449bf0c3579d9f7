// What `sparsesync serve` and `sparsesync pull` share (docs/CLI.md, "Network mode"): HOST:PORT parsing, the
// connection security options, the two frames exchanged before the sync session (pull request and
// catalog), exit codes of network failures, and orderly handling of SIGINT/SIGTERM.
#pragma once

#include "atomic_file.hpp"
#include "checkpoint.hpp"
#include "net_args.hpp"
#include "exit_codes.hpp"

#include <sparsesync/core/hash.hpp>
#include <sparsesync/core/model_checksum.hpp>
#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/transport/asio_tcp.hpp>
#include <sparsesync/transport/key.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

namespace sparsesync::cli {

// ---- HOST:PORT ----

struct endpoint {
  std::string host;
  std::uint16_t port = 0;
  [[nodiscard]] std::string text() const { return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port); }
};

// "127.0.0.1:5000", "example.org:5000", "[::1]:5000". Port 0 only where `allow_zero` (an ephemeral port).
inline endpoint parse_endpoint(const std::string& s, const std::string& what, bool allow_zero) {
  auto bad = [&](const std::string& why) -> endpoint { throw failure(exit_usage, what + " '" + s + "': " + why + " (expected HOST:PORT)"); };
  endpoint e;
  std::string port;
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') return bad("unbalanced [IPv6] brackets");
    e.host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    const auto colon = s.rfind(':');
    if (colon == std::string::npos) return bad("no port");
    e.host = s.substr(0, colon);
    port = s.substr(colon + 1);
    if (e.host.find(':') != std::string::npos) return bad("write IPv6 addresses in brackets");
  }
  if (e.host.empty()) return bad("no host");
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return bad("the port is not a number");
  const unsigned long p = std::stoul(port);
  if (p > 65535 || (p == 0 && !allow_zero)) return bad("the port must lie in 1..65535");
  e.port = static_cast<std::uint16_t>(p);
  return e;
}

// ---- connection security ----

// The exit code of a transport failure.
inline int exit_code_for(transport_errc e) {
  switch (e) {
    case transport_errc::auth_failed:
    case transport_errc::auth_mode_mismatch:
    case transport_errc::tls:
    case transport_errc::key_file: return exit_auth;
    case transport_errc::invalid_argument: return exit_usage;
    default: return exit_network;
  }
}

inline failure as_failure(const transport_error& e, const std::string& context) {
  return failure(exit_code_for(e.transport_code()), context.empty() ? std::string(e.what()) : context + ": " + e.what());
}

// Options for asio_tcp from the command line; a key file problem is an authentication failure (exit 8).
inline asio_tcp_options make_tcp_options(const net_security_args& a) {
  const bool tls_any = !a.tls_ca.empty() || !a.tls_cert.empty() || !a.tls_key.empty();
  const bool tls_all = !a.tls_ca.empty() && !a.tls_cert.empty() && !a.tls_key.empty();
  if (tls_any && !tls_all) throw failure(exit_usage, "TLS needs all of --tls-ca, --tls-cert and --tls-key");
  if (a.insecure_no_auth && (!a.key_file.empty() || tls_any))
    throw failure(exit_usage, "--insecure-no-auth cannot be combined with --key-file or TLS options");
  if (!a.insecure_no_auth && a.key_file.empty() && !tls_any)
    throw failure(exit_usage, "no authentication configured: pass --key-file KEY (and/or mutual TLS: --tls-ca, --tls-cert, --tls-key), "
                              "or --insecure-no-auth on both sides to run without any");
  asio_tcp_options o;
  o.insecure_no_auth = a.insecure_no_auth;
  if (!a.key_file.empty()) {
    try {
      o.key = load_key_file(a.key_file);
    } catch (const transport_error& e) {
      throw as_failure(e, "--key-file " + a.key_file);
    }
  }
  if (tls_all) o.tls = tls_options{a.tls_ca, a.tls_cert, a.tls_key, a.tls_server_name};
  return o;
}

// ---- the frames before the sync session (docs/CLI.md, "Network mode: the exchange") ----

inline constexpr unsigned char pull_request_magic[8] = {'S', 'S', 'P', 'U', 'L', 'L', 'R', 'Q'};
inline constexpr unsigned char catalog_magic[8] = {'S', 'S', 'C', 'A', 'T', 'A', 'L', 'G'};
inline constexpr std::uint16_t serve_protocol_version = 1;
inline constexpr std::size_t pull_request_bytes = 40;
inline constexpr std::size_t catalog_fixed_bytes = 56;

struct pull_request {
  bool has_version = false;     // OUT holds a version the puller vouches for (by its content checksum)
  bool follow = false;          // keep the session open for later versions
  std::uint64_t layout_hash = 0;
  std::uint64_t version = 0;
  std::uint64_t checksum = 0;   // content checksum of OUT's tensors
};

enum class catalog_mode : std::uint8_t {
  up_to_date = 0,  // the puller holds the newest version; the server closes the connection
  session = 1,     // the sync session (docs/PROTOCOL.md) follows on this connection
};

struct catalog {
  catalog_mode mode = catalog_mode::session;
  std::uint64_t version = 0;       // the newest published version
  std::uint64_t checksum = 0;      // its content checksum
  std::uint64_t layout_hash = 0;   // its layout hash
  std::uint64_t data_bytes = 0;    // size of its data area (the sum of its tensors' bytes)
  std::vector<unsigned char> header;  // its safetensors header: the 8-byte length and the JSON, as in the file
};

namespace detail_net {

inline void put16(std::vector<std::byte>& o, std::uint16_t v) {
  const auto at = o.size();
  o.resize(at + 2);
  detail::store_le<std::uint16_t>(reinterpret_cast<unsigned char*>(o.data() + at), v);
}
inline void put32(std::vector<std::byte>& o, std::uint32_t v) {
  const auto at = o.size();
  o.resize(at + 4);
  detail::store_le<std::uint32_t>(reinterpret_cast<unsigned char*>(o.data() + at), v);
}
inline void put64(std::vector<std::byte>& o, std::uint64_t v) {
  const auto at = o.size();
  o.resize(at + 8);
  detail::store_le<std::uint64_t>(reinterpret_cast<unsigned char*>(o.data() + at), v);
}
inline void put_bytes(std::vector<std::byte>& o, std::span<const unsigned char> b) {
  const auto* p = reinterpret_cast<const std::byte*>(b.data());
  o.insert(o.end(), p, p + b.size());
}
inline const unsigned char* u8(std::span<const std::byte> m) { return reinterpret_cast<const unsigned char*>(m.data()); }

}  // namespace detail_net

inline std::vector<std::byte> encode(const pull_request& r) {
  using namespace detail_net;
  std::vector<std::byte> o;
  put_bytes(o, pull_request_magic);
  put16(o, serve_protocol_version);
  put16(o, static_cast<std::uint16_t>((r.has_version ? 1u : 0u) | (r.follow ? 2u : 0u)));
  put32(o, 0);
  put64(o, r.layout_hash);
  put64(o, r.version);
  put64(o, r.checksum);
  return o;
}

inline status decode(std::span<const std::byte> m, pull_request& r) {
  const auto* p = detail_net::u8(m);
  if (m.size() < 8 || std::memcmp(p, pull_request_magic, 8) != 0) return {errc::bad_magic, "not a sparsesync pull request"};
  if (m.size() != pull_request_bytes) return {errc::malformed, "pull request of " + std::to_string(m.size()) + " bytes"};
  const auto version = detail::load_le<std::uint16_t>(p + 8);
  if (version != serve_protocol_version)
    return {errc::unsupported_version, "pull request of serve protocol " + std::to_string(version) + ", this build speaks 1"};
  const auto flags = detail::load_le<std::uint16_t>(p + 10);
  if ((flags & ~3u) != 0 || detail::load_le<std::uint32_t>(p + 12) != 0) return {errc::malformed, "pull request: reserved bits set"};
  r.has_version = flags & 1u;
  r.follow = flags & 2u;
  r.layout_hash = detail::load_le<std::uint64_t>(p + 16);
  r.version = detail::load_le<std::uint64_t>(p + 24);
  r.checksum = detail::load_le<std::uint64_t>(p + 32);
  return {};
}

inline std::vector<std::byte> encode(const catalog& c) {
  using namespace detail_net;
  std::vector<std::byte> o;
  o.reserve(catalog_fixed_bytes + c.header.size());
  put_bytes(o, catalog_magic);
  put16(o, serve_protocol_version);
  o.push_back(static_cast<std::byte>(c.mode));
  o.push_back(std::byte{0});
  put32(o, 0);
  put64(o, c.version);
  put64(o, c.checksum);
  put64(o, c.layout_hash);
  put64(o, c.data_bytes);
  put64(o, c.header.size());
  put_bytes(o, c.header);
  return o;
}

inline status decode(std::span<const std::byte> m, catalog& c) {
  const auto* p = detail_net::u8(m);
  if (m.size() < 8 || std::memcmp(p, catalog_magic, 8) != 0) return {errc::bad_magic, "not a sparsesync serve catalog"};
  if (m.size() < catalog_fixed_bytes) return {errc::truncated, "catalog"};
  const auto version = detail::load_le<std::uint16_t>(p + 8);
  if (version != serve_protocol_version)
    return {errc::unsupported_version, "the server speaks serve protocol " + std::to_string(version) + ", this build speaks 1"};
  if (p[10] > 1 || p[11] != 0 || detail::load_le<std::uint32_t>(p + 12) != 0) return {errc::malformed, "catalog: reserved or mode field"};
  c.mode = static_cast<catalog_mode>(p[10]);
  c.version = detail::load_le<std::uint64_t>(p + 16);
  c.checksum = detail::load_le<std::uint64_t>(p + 24);
  c.layout_hash = detail::load_le<std::uint64_t>(p + 32);
  c.data_bytes = detail::load_le<std::uint64_t>(p + 40);
  const auto n = detail::load_le<std::uint64_t>(p + 48);
  if (n != m.size() - catalog_fixed_bytes) return {errc::malformed, "catalog: header length does not match the frame"};
  c.header.assign(p + catalog_fixed_bytes, p + m.size());
  return {};
}

inline std::string hex_u64(std::uint64_t v) {
  char b[19];
  std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

inline std::string human_bytes(double b) {
  const char* unit[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char s[32];
  std::snprintf(s, sizeof s, u == 0 ? "%.0f %s" : "%.2f %s", b, unit[u]);
  return s;
}

// ---- SIGINT / SIGTERM ----

// Blocks SIGINT and SIGTERM in every thread (construct it before any thread starts: threads inherit the mask)
// and hands the first one to a handler on a watcher thread, so the command can finish what it is writing and
// stop in order. A second signal ends the process at once (exit 128 + signal). SIGPIPE is ignored: a peer
// that vanished is a transport error, not a reason to die.
class signal_guard {
 public:
  signal_guard() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    std::signal(SIGPIPE, SIG_IGN);
    thread_ = std::thread([this] { watch(); });
  }
  signal_guard(const signal_guard&) = delete;
  signal_guard& operator=(const signal_guard&) = delete;
  ~signal_guard() {
    done_ = true;
    thread_.join();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

  // Installs `f` for the lifetime of the returned object (which must not outlive what f uses); a signal that
  // arrived before is delivered at once.
  class handler_scope {
   public:
    handler_scope(signal_guard& g, std::function<void(int)> f) : g_(g) { g_.set(std::move(f)); }
    handler_scope(const handler_scope&) = delete;
    handler_scope& operator=(const handler_scope&) = delete;
    ~handler_scope() { g_.set(nullptr); }

   private:
    signal_guard& g_;
  };

  [[nodiscard]] int signal() const noexcept { return signal_.load(); }

 private:
  void set(std::function<void(int)> f) {
    std::lock_guard lock(mutex_);
    handler_ = std::move(f);
    if (handler_ && signal_.load() != 0) handler_(signal_.load());
  }

  void watch() {
    const timespec slice{0, 100'000'000};
    while (!done_) {
      const int sig = sigtimedwait(&set_, nullptr, &slice);
      if (sig <= 0) continue;
      if (signal_.exchange(sig) != 0) {  // the second signal: the user insists
        tools::unlink_pending_temps();
        _exit(128 + sig);
      }
      std::lock_guard lock(mutex_);
      if (handler_) handler_(sig);
    }
  }

  sigset_t set_{}, old_{};
  std::mutex mutex_;
  std::function<void(int)> handler_;
  std::atomic<bool> done_{false};
  std::atomic<int> signal_{0};
  std::thread thread_;
};

}  // namespace sparsesync::cli
