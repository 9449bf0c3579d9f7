#include "test_support.hpp"

#include <sparsesync/transport/inproc.hpp>

#include <doctest/doctest.h>

#include <optional>
#include <thread>

using namespace sparsesync;
using sparsesync_test::error_of;
using sparsesync_test::payload;

TEST_CASE("inproc: frames arrive in order and byte-identical, then the orderly close") {
  auto [a, b] = make_inproc_pair({.max_queued_bytes = 1 << 20});  // small bound: exercises backpressure
  const auto& sizes = sparsesync_test::varied_sizes();
  std::thread writer([&] {
    for (std::size_t i = 0; i < sizes.size(); ++i) a.send(payload(i, sizes[i]));
    a.close();
  });
  std::vector<std::byte> frame;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    REQUIRE(b.receive(frame));
    CHECK(frame == payload(i, sizes[i]));
  }
  CHECK_FALSE(b.receive(frame));
  CHECK_FALSE(b.receive(frame));  // the end stays the end
  writer.join();
  // The other direction still works after a's close.
  b.send(payload(99, 10));
  REQUIRE(a.receive(frame));
  CHECK(frame == payload(99, 10));
  CHECK(error_of([&] { a.send(payload(1, 1)); }) == transport_errc::connection_closed);
}

TEST_CASE("inproc: a vanished peer is an abrupt end, not an orderly close") {
  std::vector<std::byte> frame;
  std::optional<inproc_transport> b;
  {
    auto [a, b0] = make_inproc_pair();
    b.emplace(std::move(b0));
    a.send(payload(1, 5));
  }
  REQUIRE(b->receive(frame));  // what was sent before still arrives
  CHECK(error_of([&] { b->receive(frame); }) == transport_errc::truncated);
  CHECK(error_of([&] { b->send(payload(1, 5)); }) == transport_errc::connection_closed);
}

TEST_CASE("inproc: limits and timeouts") {
  auto [a, b] = make_inproc_pair({.max_frame_size = 100, .receive_timeout = std::chrono::milliseconds(50)});
  CHECK(error_of([&] { a.send(payload(1, 101)); }) == transport_errc::frame_too_large);
  std::vector<std::byte> frame;
  CHECK(error_of([&] { b.receive(frame); }) == transport_errc::timed_out);
  std::error_code ec;
  CHECK_FALSE(b.receive(frame, ec));
  CHECK(ec == transport_errc::timed_out);
  a.send(payload(2, 100), ec);
  CHECK_FALSE(ec);
  CHECK(b.receive(frame, ec));
  CHECK_FALSE(ec);
  CHECK(frame.size() == 100);
}

TEST_CASE("inproc: listener pairs connect() with accept()") {
  inproc_listener l({}, std::chrono::milliseconds(2000));
  std::thread server([&] {
    for (int i = 0; i < 3; ++i) {
      auto t = l.accept();
      std::vector<std::byte> f;
      while (t.receive(f)) t.send(f);
      t.close();
    }
  });
  for (int i = 0; i < 3; ++i) {
    auto c = l.connect();
    c.send(payload(i, 1000));
    c.close();
    std::vector<std::byte> f;
    REQUIRE(c.receive(f));
    CHECK(f == payload(i, 1000));
    CHECK_FALSE(c.receive(f));
  }
  server.join();
  l.close();
  CHECK(error_of([&] { l.accept(); }) == transport_errc::connection_closed);
  CHECK(error_of([&] { l.connect(); }) == transport_errc::connect_failed);
}

TEST_CASE("inproc: abort() fails a receive blocked on another thread, and both ends' later calls") {
  auto [a, b] = make_inproc_pair();
  a.send(payload(1, 10));  // queued, never read: abort drops it
  std::optional<transport_errc> blocked;
  std::thread reader([&] { blocked = error_of([&] { std::vector<std::byte> f; a.receive(f); }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  a.abort();
  reader.join();
  CHECK(blocked == transport_errc::connection_closed);
  CHECK(error_of([&] { std::vector<std::byte> f; b.receive(f); }) == transport_errc::connection_closed);
  CHECK(error_of([&] { b.send(payload(2, 10)); }) == transport_errc::connection_closed);
  a.abort();  // idempotent
}
