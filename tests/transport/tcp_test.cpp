#include "test_support.hpp"

#include <sparsesync/transport/asio_tcp.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

using namespace sparsesync;
using namespace std::chrono_literals;
using sparsesync_test::error_of;
using sparsesync_test::payload;

namespace {

asio_tcp_options keyed(const pre_shared_key& key) {
  asio_tcp_options o;
  o.key = key;
  o.connect_timeout = 5s;
  o.handshake_timeout = 5s;
  o.receive_timeout = 30s;  // bounds every test wait; a healthy loopback run never comes near it
  o.stall_timeout = 30s;
  return o;
}

// Echoes every frame until the client closes, then closes its own direction.
void echo(asio_tcp_transport t) {
  std::vector<std::byte> f;
  while (t.receive(f)) t.send(f);
  t.close();
}

}  // namespace

TEST_CASE("asio_tcp: several concurrent clients, varied frame sizes, byte-identical, full duplex") {
  const auto key = pre_shared_key::generate();
  asio_tcp_listener listener("127.0.0.1", 0, keyed(key));
  constexpr int clients = 4;
  std::thread server([&] {
    std::vector<std::thread> sessions;
    for (int i = 0; i < clients; ++i) sessions.emplace_back(echo, listener.accept(10s));
    for (auto& s : sessions) s.join();
  });

  std::atomic<int> verified{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto t = asio_tcp_transport::connect("127.0.0.1", listener.port(), keyed(key));
      CHECK(t.authenticated());
      CHECK_FALSE(t.encrypted());
      const auto& sizes = sparsesync_test::varied_sizes();
      // One thread sends while this one receives: the transport is full duplex.
      std::thread sender([&] {
        for (std::size_t i = 0; i < sizes.size(); ++i) t.send(payload(c * 1000 + i, sizes[i]));
        t.close();
      });
      std::vector<std::byte> f;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        REQUIRE(t.receive(f));
        CHECK(f == payload(c * 1000 + i, sizes[i]));
        ++verified;
      }
      CHECK_FALSE(t.receive(f));  // the server closed after echoing everything
      sender.join();
    });
  }
  for (auto& t : threads) t.join();
  server.join();
  CHECK(verified == clients * static_cast<int>(sparsesync_test::varied_sizes().size()));
}

TEST_CASE("asio_tcp: a wrong key is refused on both sides with a clear error") {
  asio_tcp_listener listener("127.0.0.1", 0, keyed(pre_shared_key::generate()));
  std::string server_msg, client_msg;
  transport_errc server_err{};
  std::thread server([&] { server_err = error_of([&] { listener.accept(10s); }, &server_msg); });
  const auto client_err =
      error_of([&] { asio_tcp_transport::connect("127.0.0.1", listener.port(), keyed(pre_shared_key::generate())); }, &client_msg);
  server.join();
  CHECK(client_err == transport_errc::auth_failed);
  CHECK(server_err == transport_errc::auth_failed);
  CHECK(client_msg.find("different keys") != std::string::npos);
  CHECK(server_msg.find("different") != std::string::npos);
  CHECK(client_msg.find("key id") != std::string::npos);

  // The listener survives a failed peer and accepts the next one.
  const auto k2 = pre_shared_key::generate();
  asio_tcp_listener l2("127.0.0.1", 0, keyed(k2));
  std::thread s2([&] { echo(l2.accept(10s)); });
  auto t = asio_tcp_transport::connect("127.0.0.1", l2.port(), keyed(k2));
  t.close();
  std::vector<std::byte> f;
  CHECK_FALSE(t.receive(f));
  s2.join();
}

TEST_CASE("asio_tcp: authentication is mandatory unless both sides say insecure_no_auth") {
  asio_tcp_options none;
  none.connect_timeout = 5s;
  none.handshake_timeout = 5s;
  std::string msg;
  CHECK(error_of([&] { asio_tcp_listener("127.0.0.1", 0, none); }, &msg) == transport_errc::invalid_argument);
  CHECK(msg.find("insecure_no_auth") != std::string::npos);
  CHECK(error_of([&] { asio_tcp_transport::connect("127.0.0.1", 1, none); }) == transport_errc::invalid_argument);

  asio_tcp_options insecure = none;
  insecure.insecure_no_auth = true;
  insecure.receive_timeout = 30s;

  SUBCASE("mode mismatch is reported on both sides") {
    asio_tcp_listener listener("127.0.0.1", 0, keyed(pre_shared_key::generate()));
    transport_errc server_err{};
    std::thread server([&] { server_err = error_of([&] { listener.accept(10s); }); });
    CHECK(error_of([&] { asio_tcp_transport::connect("127.0.0.1", listener.port(), insecure); }, &msg) ==
          transport_errc::auth_mode_mismatch);
    server.join();
    CHECK(server_err == transport_errc::auth_mode_mismatch);
    CHECK(msg.find("insecure_no_auth") != std::string::npos);
  }
  SUBCASE("explicit insecure mode on both sides works") {
    asio_tcp_listener listener("127.0.0.1", 0, insecure);
    std::thread server([&] { echo(listener.accept(10s)); });
    auto t = asio_tcp_transport::connect("127.0.0.1", listener.port(), insecure);
    CHECK_FALSE(t.authenticated());
    t.send(payload(5, 300000));
    std::vector<std::byte> f;
    REQUIRE(t.receive(f));
    CHECK(f == payload(5, 300000));
    t.close();
    CHECK_FALSE(t.receive(f));
    server.join();
  }
}

TEST_CASE("asio_tcp: timeouts, refused connections, closed listeners, error_code overloads") {
  const auto key = pre_shared_key::generate();
  SUBCASE("connect to a port nobody listens on") {
    std::uint16_t port = 0;
    { asio_tcp_listener l("127.0.0.1", 0, keyed(key)); port = l.port(); }
    CHECK(error_of([&] { asio_tcp_transport::connect("127.0.0.1", port, keyed(key)); }) == transport_errc::connect_failed);
  }
  SUBCASE("accept times out, and close() unblocks a waiting accept") {
    asio_tcp_listener l("127.0.0.1", 0, keyed(key));
    CHECK(error_of([&] { l.accept(50ms); }) == transport_errc::timed_out);
    std::thread closer([&] {
      std::this_thread::sleep_for(100ms);
      l.close();
    });
    CHECK(error_of([&] { l.accept(10s); }) == transport_errc::connection_closed);
    closer.join();
  }
  SUBCASE("a silent client is dropped after handshake_timeout") {
    auto o = keyed(key);
    o.handshake_timeout = 200ms;
    asio_tcp_listener l("127.0.0.1", 0, o);
    sparsesync_test::raw_socket silent(l.port());
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(error_of([&] { l.accept(10s); }) == transport_errc::timed_out);
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  }
  SUBCASE("receive timeout and the error_code overloads") {
    auto o = keyed(key);
    o.receive_timeout = 100ms;
    asio_tcp_listener l("127.0.0.1", 0, o);
    std::optional<asio_tcp_transport> server;
    std::thread s([&] { server.emplace(l.accept(10s)); });
    auto t = asio_tcp_transport::connect("127.0.0.1", l.port(), o);
    s.join();
    std::vector<std::byte> f;
    std::error_code ec;
    CHECK_FALSE(t.receive(f, ec));
    CHECK(ec == transport_errc::timed_out);
    // A timeout ends the connection: later calls report why.
    t.send(payload(1, 10), ec);
    CHECK(ec == transport_errc::connection_closed);
    CHECK(error_of([&] { server->receive(f); }) == transport_errc::truncated);
  }
  SUBCASE("destroying without close() is an abrupt end for the peer") {
    asio_tcp_listener l("127.0.0.1", 0, keyed(key));
    std::optional<asio_tcp_transport> server;
    std::thread s([&] { server.emplace(l.accept(10s)); });
    {
      auto t = asio_tcp_transport::connect("127.0.0.1", l.port(), keyed(key));
      s.join();
      t.send(payload(3, 1000));
    }
    std::vector<std::byte> f;
    REQUIRE(server->receive(f));
    CHECK(f == payload(3, 1000));
    std::string msg;
    CHECK(error_of([&] { server->receive(f); }, &msg) == transport_errc::truncated);
    CHECK(msg.find("without closing") != std::string::npos);
  }
}
