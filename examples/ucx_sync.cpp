// The trainer and a rollout worker of examples/tcp_*.cpp, over UCX in one process (two threads): UCP stream
// endpoints, here on TCP over loopback (UCX_TLS=tcp unless UCX_TLS is set); on a cluster the same code runs
// over RDMA. The pre-shared key is made in memory: both threads hold it.
//
//   ucx_sync [--steps 3] [--hidden 512] [--layers 8] [--vocab 32000] [--lr 1e-6]
#include "example_args.hpp"
#include <sparsesync/core/model_checksum.hpp>

#include <sparsesync/gen/adam_bf16.hpp>
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/ucx.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <shared_mutex>
#include <string>
#include <thread>

namespace ss = sparsesync;
using namespace std::chrono_literals;

using example::arg;
using example::num;

int main(int argc, char** argv) try {
  const auto steps = num(argc, argv, "--steps", "3");
  const auto layout = ss::gen::make_gpt_like_layout(num(argc, argv, "--hidden", "512"), num(argc, argv, "--layers", "8"),
                                                    num(argc, argv, "--vocab", "32000"));
  ss::gen::adam_bf16_options gopt;
  gopt.seed = 42;
  gopt.lr = std::stod(arg(argc, argv, "--lr", "1e-6"));

  ss::ucx_context_options copt;
  if (!std::getenv("UCX_TLS")) copt.config = {{"TLS", "tcp"}};
  const auto ucx = ss::ucx_context::create(copt);  // one per process: creating it scans the devices
  ss::ucx_options uopt;
  uopt.key = ss::pre_shared_key::generate();
  ss::ucx_listener listener(ucx, "127.0.0.1", 0, uopt);
  std::printf("ucx_sync: %.1f M BF16 parameters, UCX listener on 127.0.0.1:%u (UCX_TLS=%s)\n", static_cast<double>(layout.numel()) / 1e6,
              listener.port(), std::getenv("UCX_TLS") ? std::getenv("UCX_TLS") : "tcp");

  // The worker thread: connects, then applies versions until the trainer closes the stream.
  int worker_failures = 0;
  std::string worker_error;
  std::thread worker([&] {
    try {
      ss::gen::tensor_set weights(layout);
      auto views = weights.mutable_views();
      ss::sync::receiver<ss::ucx_transport> rx(layout, views, ss::ucx_transport::connect(ucx, "127.0.0.1", listener.port(), uopt));
      while (auto v = rx.next()) {
        std::shared_lock lock(rx.weights_mutex());
        const bool ok = ss::model_checksum(layout, weights.views()) == v->checksum;
        worker_failures += !ok;
        std::printf("  worker : version %llu applied (%s), %llu bytes received, checksum %016llx recomputed: %s\n",
                    static_cast<unsigned long long>(v->version), v->full ? "full transfer" : "patch",
                    static_cast<unsigned long long>(v->payload_bytes), static_cast<unsigned long long>(v->checksum), ok ? "OK" : "MISMATCH");
        std::fflush(stdout);
      }
    } catch (const std::exception& e) {
      worker_error = e.what();
    }
  });

  ss::gen::adam_bf16_model model(layout, gopt);
  ss::sync::sender<ss::auto_encoder, ss::fixed_bytes, ss::ucx_transport> tx(layout, {}, ss::fixed_bytes{16 << 20});
  tx.add_receiver(listener.accept(60s));
  if (!tx.wait_for_receivers(1, 60s)) throw std::runtime_error("the worker did not complete the handshake");
  for (std::uint64_t version = 1; version <= steps + 1; ++version) {
    if (version > 1) model.step();
    const auto weights = model.views();
    const auto r = tx.publish(version, weights);
    std::printf("trainer  : version %llu: %.3f%% changed, %llu bytes, acknowledged in %.0f ms, checksum %016llx\n",
                static_cast<unsigned long long>(version), 100.0 * static_cast<double>(r.changed) / static_cast<double>(r.numel),
                static_cast<unsigned long long>(r.payload_bytes), r.seconds * 1e3, static_cast<unsigned long long>(r.target_checksum));
    std::fflush(stdout);
  }
  tx.close();
  worker.join();
  if (!worker_error.empty()) throw std::runtime_error("worker: " + worker_error);
  return worker_failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ucx_sync: %s\n", e.what());
  return 1;
}
