// Attacks on the wire, staged by a loopback relay between an authenticated client and server: every altered,
// replayed, dropped or cut frame must be refused before its payload is delivered.
#include "test_support.hpp"

#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <doctest/doctest.h>

#include <thread>

using namespace sparsesync;
using namespace std::chrono_literals;
using sparsesync_test::error_of;
using sparsesync_test::payload;
using sparsesync_test::relay_policy;

namespace {

// Bytes the client sends before its first frame (client hello + client finish), and per-frame overhead.
constexpr std::size_t handshake_bytes = 48 + 48;
constexpr std::size_t frame_overhead = 24 + 16 + 16;  // header, header tag, payload tag (protocol version 2)
constexpr std::size_t frame_size = 1000;

asio_tcp_options keyed(const pre_shared_key& key) {
  asio_tcp_options o;
  o.key = key;
  o.connect_timeout = 5s;
  o.handshake_timeout = 5s;
  o.receive_timeout = 10s;
  o.stall_timeout = 10s;
  return o;
}

struct outcome {
  std::vector<std::vector<std::byte>> delivered;
  transport_errc error = transport_errc::ok;
  std::string message;
};

// The client sends three frames of `frame_size` bytes through a relay with `policy`, then closes; returns
// what the server received before the first error.
outcome run_through_relay(const relay_policy& policy) {
  const auto key = pre_shared_key::generate();
  asio_tcp_listener listener("127.0.0.1", 0, keyed(key));
  sparsesync_test::tcp_relay relay(listener.port(), policy);
  outcome out;
  std::thread server([&] {
    auto t = listener.accept(10s);
    out.error = error_of([&] {
      std::vector<std::byte> f;
      while (t.receive(f)) out.delivered.push_back(f);
    }, &out.message);
  });
  // The client may see its connection reset once the server refuses a frame; only the server's view matters.
  (void)error_of([&] {
    auto c = asio_tcp_transport::connect("127.0.0.1", relay.port(), keyed(key));
    for (int i = 0; i < 3; ++i) c.send(payload(i, frame_size));
    c.close();
  });
  server.join();
  return out;
}

constexpr std::size_t frame_start(std::size_t i) { return handshake_bytes + i * (frame_size + frame_overhead); }

}  // namespace

TEST_CASE("asio_tcp: an untouched relay delivers everything (control for the attacks below)") {
  const auto r = run_through_relay({});
  CHECK(r.error == transport_errc::ok);
  REQUIRE(r.delivered.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(r.delivered[i] == payload(i, frame_size));
}

TEST_CASE("asio_tcp: a flipped payload bit is refused") {
  relay_policy p;
  p.flip_at = frame_start(1) + 24 + 16 + 500;
  const auto r = run_through_relay(p);
  CHECK(r.error == transport_errc::integrity);
  CHECK(r.delivered.size() == 1);  // frame 0 arrived; the altered frame 1 never reached the caller
  CHECK(r.message.find("payload fails authentication") != std::string::npos);
}

TEST_CASE("asio_tcp: a flipped header bit (the length) is refused before anything is allocated") {
  relay_policy p;
  p.flip_at = frame_start(0) + 16 + 3;  // inside the length field
  const auto r = run_through_relay(p);
  CHECK(r.error == transport_errc::integrity);
  CHECK(r.delivered.empty());
}

TEST_CASE("asio_tcp: a flipped tag bit is refused") {
  relay_policy p;
  p.flip_at = frame_start(0) + 24 + 16 + frame_size + 7;
  CHECK(run_through_relay(p).error == transport_errc::integrity);
}

TEST_CASE("asio_tcp: a replayed frame is refused") {
  relay_policy p;
  p.dup_begin = frame_start(0);
  p.dup_end = frame_start(1);
  const auto r = run_through_relay(p);
  CHECK(r.error == transport_errc::sequence);
  CHECK(r.delivered.size() == 1);
  CHECK(r.message.find("expected 1") != std::string::npos);
}

TEST_CASE("asio_tcp: a dropped frame is refused (the next one is out of sequence)") {
  relay_policy p;
  p.drop_begin = frame_start(1);
  p.drop_end = frame_start(2);
  const auto r = run_through_relay(p);
  CHECK(r.error == transport_errc::sequence);
  CHECK(r.delivered.size() == 1);
}

TEST_CASE("asio_tcp: a stream cut inside a frame, or between frames, is refused") {
  relay_policy inside;
  inside.cut_at = frame_start(1) + 30;
  auto r = run_through_relay(inside);
  CHECK(r.error == transport_errc::truncated);
  CHECK(r.delivered.size() == 1);

  relay_policy between;  // the close frame never arrives: an attacker cannot fake an orderly end
  between.cut_at = frame_start(3);
  r = run_through_relay(between);
  CHECK(r.error == transport_errc::truncated);
  CHECK(r.delivered.size() == 3);
}

TEST_CASE("asio_tcp: an announced length above the limit is refused without allocating") {
  SUBCASE("authenticated peer sends more than this side's max_frame_size") {
    const auto key = pre_shared_key::generate();
    auto small = keyed(key);
    small.max_frame_size = 1 << 20;
    asio_tcp_listener listener("127.0.0.1", 0, small);
    transport_errc err{};
    std::string msg;
    std::thread server([&] {
      auto t = listener.accept(10s);
      std::vector<std::byte> f;
      err = error_of([&] { t.receive(f); }, &msg);
    });
    auto c = asio_tcp_transport::connect("127.0.0.1", listener.port(), keyed(key));
    (void)error_of([&] { c.send(payload(1, (1 << 20) + 1)); });  // the server may reset mid-frame
    server.join();
    CHECK(err == transport_errc::frame_too_large);
    CHECK(msg.find("1048577") != std::string::npos);
  }
  SUBCASE("a raw peer announces 2^40 bytes on an insecure_no_auth connection") {
    asio_tcp_options o;
    o.insecure_no_auth = true;
    o.handshake_timeout = 5s;
    o.receive_timeout = 10s;
    asio_tcp_listener listener("127.0.0.1", 0, o);
    transport_errc err{};
    std::thread server([&] {
      auto t = listener.accept(10s);
      std::vector<std::byte> f;
      err = error_of([&] { t.receive(f); });
      CHECK(f.capacity() < (1u << 20));
    });
    sparsesync_test::raw_socket raw(listener.port());
    unsigned char hello[48] = {'S', 'S', 'Y', 'N', 'C', 'C', 'H', '1', 2, 0, 0, 0};  // version 2, mode 0 (none)
    raw.write_all(hello, sizeof hello);
    unsigned char server_hello[80];
    REQUIRE(raw.read_exact(server_hello, sizeof server_hello) == sizeof server_hello);
    unsigned char header[24] = {'S', 'S', 'F', '1', 1};
    detail::store_le<std::uint64_t>(header + 8, 0);
    detail::store_le<std::uint64_t>(header + 16, std::uint64_t{1} << 40);
    raw.write_all(header, sizeof header);
    server.join();
    CHECK(err == transport_errc::frame_too_large);
  }
  SUBCASE("a sender refuses frames above its own limit") {
    const auto key = pre_shared_key::generate();
    auto small = keyed(key);
    small.max_frame_size = 100;
    asio_tcp_listener listener("127.0.0.1", 0, small);
    std::thread server([&] { auto t = listener.accept(10s); std::vector<std::byte> f; (void)error_of([&] { t.receive(f); }); });
    auto c = asio_tcp_transport::connect("127.0.0.1", listener.port(), small);
    CHECK(error_of([&] { c.send(payload(1, 101)); }) == transport_errc::frame_too_large);
    c.send(payload(1, 100));  // the refused frame left the connection usable
    c.close();
    server.join();
  }
}

TEST_CASE("asio_tcp: garbage instead of a hello is a protocol error") {
  const auto key = pre_shared_key::generate();
  asio_tcp_listener listener("127.0.0.1", 0, keyed(key));
  transport_errc err{};
  std::thread server([&] { err = error_of([&] { listener.accept(10s); }); });
  sparsesync_test::raw_socket raw(listener.port());
  const std::string junk(48, 'x');
  raw.write_all(junk.data(), junk.size());
  server.join();
  CHECK(err == transport_errc::protocol);
}

TEST_CASE("asio_tcp: a peer of transport protocol version 1 (HMAC-SHA256 frames) is refused on both sides, saying why") {
  const auto key = pre_shared_key::generate();
  SUBCASE("an old client") {
    asio_tcp_listener listener("127.0.0.1", 0, keyed(key));
    transport_errc err{};
    std::string msg;
    std::thread server([&] { err = error_of([&] { listener.accept(10s); }, &msg); });
    sparsesync_test::raw_socket raw(listener.port());
    unsigned char hello[48] = {'S', 'S', 'Y', 'N', 'C', 'C', 'H', '1', 1, 0, 1, 0};  // version 1, mode 1 (key)
    raw.write_all(hello, sizeof hello);
    unsigned char server_hello[80];
    REQUIRE(raw.read_exact(server_hello, sizeof server_hello) == sizeof server_hello);
    CHECK(server_hello[8] == 2);  // the old client learns this side's version, and fails with its own message
    CHECK(server_hello[9] == 0);
    server.join();
    CHECK(err == transport_errc::protocol);
    CHECK(msg.find("version 1, this side 2 (the peer's sparsesync is older") != std::string::npos);
  }
  SUBCASE("an old server") {
    sparsesync_test::raw_listener old_server;
    std::thread server([&] {
      auto raw = old_server.accept();
      unsigned char hello[48];
      if (raw.read_exact(hello, sizeof hello) != sizeof hello) return;
      unsigned char reply[80] = {'S', 'S', 'Y', 'N', 'C', 'S', 'H', '1', 1, 0, 1, 0};
      raw.write_all(reply, sizeof reply);
    });
    std::string msg;
    CHECK(error_of([&] { asio_tcp_transport::connect("127.0.0.1", old_server.port(), keyed(key)); }, &msg) ==
          transport_errc::protocol);
    CHECK(msg.find("version 1, this side 2") != std::string::npos);
    server.join();
  }
}
