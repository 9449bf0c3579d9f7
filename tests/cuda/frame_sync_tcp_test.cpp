// GPU weights between processes' worth of code over TCP: frame_publisher / frame_subscriber (built by nvcc in
// frame_sync_tcp_codec.cu) on transport_frame_channel<asio_tcp_transport> (built here by the C++ compiler:
// Boost.Asio does not get through nvcc), with a pre-shared key on loopback. One trainer fans out to two
// workers (one atomic, one streamed); after every version both workers' device weights must be bit-identical
// to the trainer's. Exits 77 (CTest: skipped) without a CUDA device.
#include <sparsesync/cuda/sync/transport_frame_channel.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <doctest/doctest.h>

#include "frame_sync_tcp_codec.hpp"
#include "gpu_sync_fixtures.hpp"
#include "require_gpu.cuh"

#include <chrono>
#include <exception>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace sparsesync;
namespace sc = sparsesync::cuda;
using namespace std::chrono_literals;
using channel = sc::transport_frame_channel<asio_tcp_transport>;
using sparsesync_test::device_model;
using sparsesync_test::stream_holder;

namespace {

const int gpu_present = sparsesync_test::require_gpu_or_skip();

asio_tcp_options keyed(const pre_shared_key& key) {
  asio_tcp_options o;
  o.key = key;
  o.connect_timeout = 10s;
  o.receive_timeout = 60s;
  return o;
}

}  // namespace

TEST_CASE("GPU weights over asio_tcp with a key: one trainer, two workers (atomic, streamed), every version bit-identical") {
  const auto layout = sparsesync_test::test_layout();
  const auto start = sparsesync_test::random_weights(layout.numel());
  constexpr int versions = 4;
  std::vector<std::vector<std::uint16_t>> targets;
  {
    std::mt19937_64 rng(42);
    auto w = start;
    for (int v = 0; v < versions; ++v) {
      sparsesync_test::step(w, rng);
      targets.push_back(w);
    }
  }
  const auto key = pre_shared_key::generate();
  asio_tcp_listener listener("127.0.0.1", 0, keyed(key));
  const std::uint16_t port = listener.port();

  const sc::frame_commit_mode modes[2] = {sc::frame_commit_mode::atomic, sc::frame_commit_mode::streamed};
  std::vector<std::vector<std::vector<std::uint16_t>>> seen(2);  // per worker, its weights after each version
  std::vector<std::string> errors(2);
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w)
    workers.emplace_back([&, w] {
      try {
        auto link = asio_tcp_transport::connect("127.0.0.1", port, keyed(key));
        const stream_holder s, cs;
        device_model mine(layout);
        mine.upload(start);
        channel ch(link, cs.s);
        const auto sub = sparsesync_test::make_tcp_test_subscriber(layout, sc::device_frame_channel_ref(ch), s.s, cs.s, modes[w]);
        while (const auto got = sub->next(mine.pointers())) seen[static_cast<std::size_t>(w)].push_back(mine.download());
        link.close();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(w)] = e.what();
      }
    });

  std::string trainer_error;
  try {
    std::vector<asio_tcp_transport> links;
    for (int w = 0; w < 2; ++w) links.push_back(listener.accept(20s));
    std::vector<asio_tcp_transport*> peers{&links[0], &links[1]};
    const stream_holder s, cs;
    device_model weights(layout), snapshot(layout);
    snapshot.upload(start);
    channel ch(peers, cs.s);
    const auto pub = sparsesync_test::make_tcp_test_publisher(layout, sc::device_frame_channel_ref(ch), s.s, cs.s);
    for (int v = 0; v < versions; ++v) {
      weights.upload(targets[static_cast<std::size_t>(v)]);
      const auto st = pub->publish(static_cast<std::uint64_t>(v + 1), snapshot.pointers(), weights.pointers());
      CHECK(st.changed > 0);
      CHECK(st.payload_bytes < layout.numel() / 4);  // ~1% of the elements changed: far below the dense 2 bytes each
      pub->update_snapshot(snapshot.pointers());
    }
    pub->close();
    std::vector<std::byte> rest;
    for (auto& l : links)
      while (l.receive(rest)) {
      }
  } catch (const std::exception& e) {
    trainer_error = e.what();
  }
  for (auto& t : workers) t.join();
  CHECK_MESSAGE(trainer_error.empty(), trainer_error);
  for (int w = 0; w < 2; ++w) {
    CAPTURE(w);
    CHECK_MESSAGE(errors[static_cast<std::size_t>(w)].empty(), errors[static_cast<std::size_t>(w)]);
    REQUIRE(seen[static_cast<std::size_t>(w)].size() == versions);
    for (std::size_t v = 0; v < versions; ++v) CHECK(seen[static_cast<std::size_t>(w)][v] == targets[v]);
  }
}
