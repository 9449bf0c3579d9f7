// NCCL broadcast between the GPUs of one machine, one thread per GPU, bootstrapped over an authenticated
// asio_tcp connection on loopback. Exits 77 (skipped) on machines with fewer than two GPUs.
#include "test_support.hpp"

#include <sparsesync/transport/asio_tcp.hpp>
#include <sparsesync/transport/nccl.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

using namespace sparsesync;
using namespace std::chrono_literals;
using sparsesync_test::payload;

namespace {

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

asio_tcp_options keyed(const pre_shared_key& key) {
  asio_tcp_options o;
  o.key = key;
  o.connect_timeout = 10s;
  o.handshake_timeout = 10s;
  o.receive_timeout = 60s;
  return o;
}

const std::vector<std::size_t> sizes = {0, 1, 4096, (3u << 20) + 5, 64u << 20, 7};

}  // namespace

TEST_CASE("nccl: the root broadcasts framed device buffers to every other GPU, byte-identical") {
  const int gpus = gpu_count();
  if (gpus < 2) {
    std::printf("transport_nccl_test: needs 2 or more GPUs, found %d: skipped\n", gpus);
    std::fflush(stdout);
    std::_Exit(77);
  }
  const int ranks = std::min(gpus, 8);
  const auto key = pre_shared_key::generate();
  asio_tcp_listener listener("127.0.0.1", 0, keyed(key));
  std::vector<std::string> failures(ranks);

  auto run_rank = [&](int device, nccl_bootstrap boot) {
    nccl_communicator comm(boot, device);
    cudaStream_t stream;
    detail::check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
    nccl_broadcast_channel channel(comm.get(), 0, stream);
    if (channel.is_root()) {
      device_buffer buf;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        const auto host = payload(i, sizes[i]);
        buf.reserve(std::max<std::size_t>(sizes[i], 1));
        detail::check_cuda(cudaMemcpy(buf.data(), host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
        channel.send(buf.data(), host.size());
        detail::check_cuda(cudaStreamSynchronize(stream), "sync");  // `buf` is reused for the next frame
      }
      channel.close();
    } else {
      device_buffer buf;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        const auto n = channel.receive(buf);
        REQUIRE(n.has_value());
        CHECK(*n == sizes[i]);
        std::vector<std::byte> host(*n);
        detail::check_cuda(cudaStreamSynchronize(stream), "sync");
        detail::check_cuda(cudaMemcpy(host.data(), buf.data(), host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
        CHECK(host == payload(i, sizes[i]));
      }
      CHECK_FALSE(channel.receive(buf).has_value());
    }
    detail::check_cuda(cudaStreamSynchronize(stream), "sync");
    cudaStreamDestroy(stream);
  };

  std::vector<std::thread> threads;
  for (int r = 1; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto t = asio_tcp_transport::connect("127.0.0.1", listener.port(), keyed(key));
        const auto boot = receive_unique_id(t);
        run_rank(boot.rank, boot);  // rank r runs on GPU r
      } catch (const std::exception& e) {
        failures[r] = e.what();
      }
    });
  }
  try {
    std::vector<asio_tcp_transport> peers;
    for (int r = 1; r < ranks; ++r) peers.push_back(listener.accept(30s));
    std::vector<asio_tcp_transport*> ptrs;
    for (auto& p : peers) ptrs.push_back(&p);
    const auto boot = share_unique_id(std::span<asio_tcp_transport* const>(ptrs));
    CHECK(boot.nranks == ranks);
    run_rank(0, boot);
  } catch (const std::exception& e) {
    failures[0] = e.what();
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) CHECK_MESSAGE(failures[r].empty(), "rank ", r, ": ", failures[r]);
}
