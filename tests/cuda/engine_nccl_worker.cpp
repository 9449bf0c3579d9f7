// A GPU rollout worker process for engine_nccl_kill_test.cpp: connects to the trainer over asio_tcp with the key in
// --key-file, makes the pair communicator of an nccl_link on GPU --device, and applies versions into its own GPU
// weights (the test model of gpu_sync_fixtures.hpp), printing "applied VERSION full|patch CHECKSUM" per version.
// With --stall-at V it stops once the first device frame of version V is announced, prints "stalled V" and sleeps:
// a worker that hangs mid-version with its frames in flight (the test kills it or leaves it stalled).
//
//   engine_nccl_worker --port P --key-file F --device D [--stall-at V] [--timeout-ms T (6000: 3x the trainer's 2 s)]
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/transport/asio_tcp.hpp>
#include <sparsesync/transport/nccl_link.hpp>

#include "gpu_sync_fixtures.hpp"
#include "stalling_link.hpp"
#include "worker_support.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ss = sparsesync;

namespace {

using tcp_nccl_link = ss::nccl_link<ss::asio_tcp_transport>;
using stalling_link = sparsesync_test::stalling_link<tcp_nccl_link>;

using sparsesync_test::arg_value;

}  // namespace

int main(int argc, char** argv) try {
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  const auto port = static_cast<std::uint16_t>(std::stoul(arg_value(argc, argv, "--port", "0")));
  const std::uint64_t stall_at = std::stoull(arg_value(argc, argv, "--stall-at", "0"));
  const int device = std::stoi(arg_value(argc, argv, "--device", "0"));
  ss::cuda::throw_on_cuda_error(cudaSetDevice(device), "cudaSetDevice");
  ss::asio_tcp_options opt;
  opt.key = ss::load_key_file(arg_value(argc, argv, "--key-file", ""));
  ss::nccl_link_options lo;
  lo.device = device;
  lo.timeout = std::chrono::milliseconds(std::stoll(arg_value(argc, argv, "--timeout-ms", "6000")));
  const auto layout = sparsesync_test::test_layout();
  sparsesync_test::device_model weights(layout);
  const auto views = sparsesync_test::device_views(layout, weights);
  auto link = tcp_nccl_link::connect_receiver(ss::connect_retrying("127.0.0.1", port, opt), lo);
  ss::sync::receiver<stalling_link, ss::sync::device_sink> rx(
      layout, ss::sync::device_sink(ss::cuda::compiled_device_applier_backend(layout, views, {})), stalling_link(std::move(link), stall_at, ss::sync::message_type::bucket_device));
  sparsesync_test::apply_and_report(rx);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "engine_nccl_worker: %s\n", e.what());
  return 1;
}
