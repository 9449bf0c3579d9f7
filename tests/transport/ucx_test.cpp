// UCX over TCP on loopback (UCX_TLS=tcp, as CI machines have no RDMA device). UCX starts slowly, so the
// context is created once and every wait is bounded.
#include "test_support.hpp"

#include <sparsesync/transport/ucx.hpp>

#include <doctest/doctest.h>

#include <thread>

using namespace sparsesync;
using namespace std::chrono_literals;
using sparsesync_test::error_of;
using sparsesync_test::payload;

namespace {

std::shared_ptr<ucx_context> context() {
  static const auto ctx = ucx_context::create({.config = {{"TLS", "tcp"}}});
  return ctx;
}

ucx_options keyed(const pre_shared_key& key) {
  ucx_options o;
  o.key = key;
  o.connect_timeout = 20s;
  o.handshake_timeout = 20s;
  o.receive_timeout = 30s;
  o.stall_timeout = 30s;
  return o;
}

void echo(ucx_transport t) {
  std::vector<std::byte> f;
  while (t.receive(f)) t.send(f);
  t.close();
}

}  // namespace

TEST_CASE("ucx: several clients over tcp on loopback, varied frame sizes, byte-identical, full duplex") {
  const auto key = pre_shared_key::generate();
  ucx_listener listener(context(), "127.0.0.1", 0, keyed(key));
  REQUIRE(listener.port() != 0);
  constexpr int clients = 3;
  std::thread server([&] {
    std::vector<std::thread> sessions;
    for (int i = 0; i < clients; ++i) sessions.emplace_back(echo, listener.accept(30s));
    for (auto& s : sessions) s.join();
  });
  std::vector<std::thread> threads;
  std::atomic<int> verified{0};
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto t = ucx_transport::connect(context(), "127.0.0.1", listener.port(), keyed(key));
      CHECK(t.authenticated());
      const auto& sizes = sparsesync_test::varied_sizes();
      std::thread sender([&] {
        for (std::size_t i = 0; i < sizes.size(); ++i) t.send(payload(c * 100 + i, sizes[i]));
        t.close();
      });
      std::vector<std::byte> f;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        REQUIRE(t.receive(f));
        CHECK(f == payload(c * 100 + i, sizes[i]));
        ++verified;
      }
      CHECK_FALSE(t.receive(f));
      sender.join();
    });
  }
  for (auto& t : threads) t.join();
  server.join();
  CHECK(verified == clients * static_cast<int>(sparsesync_test::varied_sizes().size()));
}

TEST_CASE("ucx: frames sent before close() survive the sender's destruction (linger until acknowledged)") {
  const auto key = pre_shared_key::generate();
  ucx_listener listener(context(), "127.0.0.1", 0, keyed(key));
  std::vector<std::vector<std::byte>> got;
  bool ended = false;
  std::thread server([&] {
    auto s = listener.accept(30s);
    std::this_thread::sleep_for(300ms);  // the client is already destroying its end by now
    std::vector<std::byte> f;
    while (s.receive(f)) got.push_back(f);
    ended = true;
  });
  {
    auto t = ucx_transport::connect(context(), "127.0.0.1", listener.port(), keyed(key));
    for (int i = 0; i < 5; ++i) t.send(payload(i, 100000));
    t.close();
  }  // waits for the server's close_ack
  server.join();
  CHECK(ended);
  REQUIRE(got.size() == 5);
  for (int i = 0; i < 5; ++i) CHECK(got[i] == payload(i, 100000));
}

TEST_CASE("ucx: a wrong key is refused on both sides") {
  ucx_listener listener(context(), "127.0.0.1", 0, keyed(pre_shared_key::generate()));
  transport_errc server_err{};
  std::string server_msg, client_msg;
  std::thread server([&] { server_err = error_of([&] { listener.accept(30s); }, &server_msg); });
  const auto client_err = error_of(
      [&] { ucx_transport::connect(context(), "127.0.0.1", listener.port(), keyed(pre_shared_key::generate())); }, &client_msg);
  server.join();
  CHECK(client_err == transport_errc::auth_failed);
  CHECK(server_err == transport_errc::auth_failed);
  CHECK(client_msg.find("different keys") != std::string::npos);
}

TEST_CASE("ucx: no listener, accept timeout, closed listener, abrupt peer") {
  const auto key = pre_shared_key::generate();
  SUBCASE("connecting to a port nobody listens on fails in bounded time") {
    std::uint16_t port = 0;
    { ucx_listener l(context(), "127.0.0.1", 0, keyed(key)); port = l.port(); }
    auto o = keyed(key);
    o.connect_timeout = 5s;
    const auto t0 = std::chrono::steady_clock::now();
    const auto err = error_of([&] { ucx_transport::connect(context(), "127.0.0.1", port, o); });
    CHECK(err != transport_errc::ok);
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  }
  SUBCASE("accept times out; close() unblocks accept") {
    ucx_listener l(context(), "127.0.0.1", 0, keyed(key));
    CHECK(error_of([&] { l.accept(50ms); }) == transport_errc::timed_out);
    std::thread closer([&] {
      std::this_thread::sleep_for(100ms);
      l.close();
    });
    CHECK(error_of([&] { l.accept(10s); }) == transport_errc::connection_closed);
    closer.join();
  }
  SUBCASE("a peer destroyed without close() is an abrupt end") {
    ucx_listener l(context(), "127.0.0.1", 0, keyed(key));
    std::optional<ucx_transport> server;
    std::thread s([&] { server.emplace(l.accept(30s)); });
    {
      auto t = ucx_transport::connect(context(), "127.0.0.1", l.port(), keyed(key));
      s.join();
      t.send(payload(1, 10));
    }
    // UCX drops what the receiver had not read when the sender's endpoint vanishes; either way the end is
    // reported as abrupt, never as an orderly close.
    std::vector<std::byte> f;
    std::size_t frames = 0;
    const auto err = error_of([&] {
      while (server->receive(f)) {
        CHECK(f == payload(1, 10));
        ++frames;
      }
    });
    CHECK(err == transport_errc::truncated);
    CHECK(frames <= 1);
  }
  SUBCASE("oversize frames are refused by the sender and the receiver") {
    auto small = keyed(key);
    small.max_frame_size = 1000;
    ucx_listener l(context(), "127.0.0.1", 0, small);
    transport_errc err{};
    std::thread s([&] {
      auto t = l.accept(30s);
      std::vector<std::byte> f;
      err = error_of([&] { t.receive(f); });
    });
    auto c = ucx_transport::connect(context(), "127.0.0.1", l.port(), keyed(key));
    (void)error_of([&] { c.send(std::vector<std::byte>(2000)); });  // c allows 1 GiB; the server may reset first
    s.join();
    CHECK(err == transport_errc::frame_too_large);
    CHECK(error_of([&] { c.send_device(nullptr, 0); }) == transport_errc::invalid_argument);  // not enabled
  }
}
