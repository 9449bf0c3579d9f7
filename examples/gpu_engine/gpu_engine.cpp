// GPU trainer -> GPU workers through the one sync engine: sync::sender with a device_source, sync::receiver with
// device_sink (encode, verify and apply on the GPUs), over one of two links:
//   --link tcp   asio_tcp with a key; frames cross host memory and the network (one GPU is enough);
//   --link nccl  nccl_link over that TCP connection: control messages on TCP, frames GPU to GPU on a pair
//                communicator per worker (trainer on GPU 0, workers on the last GPU; needs two GPUs).
// Shows a worker joining late (a full transfer encoded on the trainer's GPU) and a worker restarted with its
// weights restored (the handshake's checksum proves them: patches, no full transfer). After every version each
// worker's weights are compared with the trainer's on the GPU.
//
// This file is plain C++ (Boost.Asio does not get through nvcc); the GPU side is gpu_side.cu.
//   gpu_engine [--link tcp|nccl] [--versions 8] [--hidden 1024] [--layers 8] [--vocab 32000] [--density 0.01]
// Exits 77 without the GPUs the link needs (or, for nccl, without NCCL in this build).
#include "../example_args.hpp"
#include "gpu_side.hpp"

#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/asio_tcp.hpp>
#ifdef SPARSESYNC_EXAMPLE_NCCL
#include <sparsesync/transport/nccl_link.hpp>
#endif

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

namespace ss = sparsesync;
using namespace std::chrono_literals;
using example::num;

namespace {

// The two links: how a worker connects and how the trainer takes a connection, on which GPUs.
struct tcp_links {
  using link = ss::asio_tcp_transport;
  static constexpr const char* name = "tcp";
  static constexpr int gpus_needed = 1;
  static constexpr bool frames_on_device = false;  // frames come to the host as they are encoded
  static int worker_gpu() { return 0; }
  static link connect(std::uint16_t port, const ss::asio_tcp_options& opt, int) { return ss::asio_tcp_transport::connect("127.0.0.1", port, opt); }
  static link accept(ss::asio_tcp_listener& l, int) { return l.accept(60s); }
};
#ifdef SPARSESYNC_EXAMPLE_NCCL
struct nccl_links {
  using link = ss::nccl_link<ss::asio_tcp_transport>;
  static constexpr const char* name = "nccl";
  static constexpr int gpus_needed = 2;
  static constexpr bool frames_on_device = true;  // frames stay on the trainer's GPU until NCCL sends them
  static int worker_gpu() { return example_gpu::device_count() - 1; }
  static ss::nccl_link_options on(int device) {
    ss::nccl_link_options o;
    o.device = device;
    return o;
  }
  // Both ends build the pair's communicator at once: the trainer's acceptor thread and the worker's connect.
  static link connect(std::uint16_t port, const ss::asio_tcp_options& opt, int device) {
    return link::connect_receiver(ss::asio_tcp_transport::connect("127.0.0.1", port, opt), on(device));
  }
  static link accept(ss::asio_tcp_listener& l, int device) { return link::connect_sender(l.accept(60s), on(device)); }
};
#endif

// A rollout worker: its GPU weights and a receiver applying versions on its own thread.
template <class Links>
struct worker {
  using gpu_receiver = ss::sync::receiver<typename Links::link, ss::sync::device_sink>;
  const char* name;
  example_gpu::gpu_weights weights;
  std::unique_ptr<gpu_receiver> rx;
  std::thread thread;
  std::uint64_t stop_after = 0;  // the worker's process "exits" after applying this version (0: never)

  worker(const char* n, const ss::model_layout& layout) : name(n), weights(layout, Links::worker_gpu()) {}
  void connect(const ss::model_layout& layout, std::uint16_t port, const ss::asio_tcp_options& opt, ss::sync::receiver_options ro = {}) {
    rx = std::make_unique<gpu_receiver>(layout, ss::sync::device_sink(example_gpu::worker_backend(layout, weights)),
                                        Links::connect(port, opt, weights.device()), ro);
    thread = std::thread([this] {
      try {
        while (auto v = rx->next()) {
          std::printf("  %s: version %llu applied (%s), %llu changed, %llu bytes, checksum %016llx\n", name,
                      static_cast<unsigned long long>(v->version), v->full ? "full transfer" : "patch",
                      static_cast<unsigned long long>(v->changed), static_cast<unsigned long long>(v->payload_bytes),
                      static_cast<unsigned long long>(v->checksum));
          if (v->version == stop_after) break;
        }
      } catch (const std::exception& e) {
        std::printf("  %s: stopped: %s\n", name, e.what());
      }
    });
  }
  // Waits for the worker's thread to end (the sender closed, or stop_after was reached); the connection then
  // ends as a process exit would end it, and the weights stay (as if saved to disk).
  void join() {
    if (thread.joinable()) thread.join();
    rx.reset();
  }
};

template <class Links>
int run(int argc, char** argv) {
  using gpu_sender = ss::sync::sender<ss::rice, ss::fixed_bytes, typename Links::link, ss::sync::device_source>;
  if (example_gpu::device_count() < Links::gpus_needed) {
    std::printf("gpu_engine --link %s: %d CUDA device(s), %d needed: skipped\n", Links::name, example_gpu::device_count(), Links::gpus_needed);
    return 77;
  }
  const auto versions = num(argc, argv, "--versions", "8");
  const double density = std::stod(example::arg(argc, argv, "--density", "0.01"));
  const auto layout = ss::gen::make_gpt_like_layout(num(argc, argv, "--hidden", "1024"), num(argc, argv, "--layers", "8"),
                                                    num(argc, argv, "--vocab", "32000"));
  ss::asio_tcp_options opt;
  opt.key = ss::pre_shared_key::generate();
  ss::asio_tcp_listener listener("127.0.0.1", 0, opt);
  ss::sync::sender_options so;
  so.ack_timeout = 60s;
  example_gpu::gpu_weights trainer(layout, 0);
  trainer.fill_random(1);
  gpu_sender tx(layout, so, ss::fixed_bytes{}, ss::sync::device_source<ss::rice>(example_gpu::trainer_backend(trainer, Links::frames_on_device)));
  std::thread acceptor([&] {
    try {
      for (int i = 0; i < 3; ++i) tx.add_receiver(Links::accept(listener, trainer.device()));  // A, B (late), A again (restarted)
    } catch (const std::exception& e) {
      std::printf("trainer: accepting workers: %s\n", e.what());
    }
  });

  worker<Links> a("worker A", layout), b("worker B", layout);
  std::printf("link %s: trainer on GPU %d, workers on GPU %d\n", Links::name, trainer.device(), a.weights.device());
  a.stop_after = 5;  // then restarts (below)
  a.connect(layout, listener.port(), opt);
  std::printf("trainer: %llu BF16 elements in %zu tensors, %.1f%% changing per step\n", static_cast<unsigned long long>(layout.numel()),
              layout.size(), density * 100);

  int mismatches = 0;
  const auto views = [&] {
    const auto v = trainer.views();
    return std::vector<ss::const_tensor_view>(v.begin(), v.end());
  }();
  for (std::uint64_t v = 1; v <= versions; ++v) {
    if (v > 1) trainer.step(v, density);
    if (v == 4) {
      std::printf("worker B joins late: a full transfer of version 3, encoded on the trainer's GPU\n");
      b.connect(layout, listener.port(), opt);
      if (!tx.wait_for_receivers(2, 120s)) throw std::runtime_error("worker B did not catch up");
    }
    if (v == 6) {
      std::printf("worker A restarts with its weights restored at version 5: the handshake proves them, patches follow\n");
      a.join();
      ss::sync::receiver_options ro;
      ro.has_version = true;
      ro.version = 5;
      a.stop_after = 0;
      a.connect(layout, listener.port(), opt, ro);
      if (!tx.wait_for_receivers(2, 120s)) throw std::runtime_error("worker A did not come back");
    }
    const auto r = tx.publish(v, views);
    std::printf("trainer: version %llu published: %llu changed, %llu payload bytes, %.1f ms, %zu workers acknowledged\n",
                static_cast<unsigned long long>(v), static_cast<unsigned long long>(r.changed), static_cast<unsigned long long>(r.payload_bytes),
                r.seconds * 1e3, r.acknowledged);
    for (worker<Links>* w : {&a, &b}) {
      if (!w->rx) continue;
      const bool same = w->weights.equals(trainer);
      mismatches += !same;
      if (!same) std::printf("  %s: MISMATCH with the trainer\n", w->name);
    }
  }
  for (const auto& s : tx.receivers())
    if (s.connected)
      std::printf("trainer: receiver %zu at version %llu, %llu full transfer(s)\n", s.id, static_cast<unsigned long long>(s.version),
                  static_cast<unsigned long long>(s.full_transfers));
  tx.close();
  a.join();
  b.join();
  acceptor.join();
  if (mismatches) {
    std::printf("gpu_engine --link %s: %d mismatches\n", Links::name, mismatches);
    return 1;
  }
  std::printf("gpu_engine --link %s: every worker bit-identical to the trainer after every version\n", Links::name);
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear as they happen, also in a log file
  const std::string link = example::arg(argc, argv, "--link", "tcp");
  if (link == "tcp") return run<tcp_links>(argc, argv);
  if (link == "nccl") {
#ifdef SPARSESYNC_EXAMPLE_NCCL
    return run<nccl_links>(argc, argv);
#else
    std::printf("gpu_engine: this build has no NCCL (sparsesync::nccl was not found): skipped\n");
    return 77;
#endif
  }
  std::fprintf(stderr, "gpu_engine: --link must be tcp or nccl, not '%s'\n", link.c_str());
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gpu_engine: %s\n", e.what());
  return 1;
}
