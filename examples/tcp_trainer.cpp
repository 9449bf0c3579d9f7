// A trainer process publishing its weights over TCP: a GPT-shaped model takes RL-style AdamW steps (lr 1e-6)
// and after each one sync::sender streams only the changed BF16 elements to every connected rollout worker
// (examples/tcp_worker.cpp), authenticated with a pre-shared key. It prints each version's checksum; the
// workers print theirs.
//
//   tcp_trainer [--port 29555] [--key-file sparsesync-example.key] [--workers 1] [--steps 5]
//               [--hidden 512] [--layers 8] [--vocab 32000] [--lr 1e-6] [--port-file F]
#include "example_args.hpp"

#include <sparsesync/gen/adam_bf16.hpp>
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace ss = sparsesync;
using namespace std::chrono_literals;

using example::arg;
using example::num;

int main(int argc, char** argv) try {
  const auto port = static_cast<std::uint16_t>(num(argc, argv, "--port", "29555"));
  const std::string key_file = arg(argc, argv, "--key-file", "sparsesync-example.key");
  const std::string port_file = arg(argc, argv, "--port-file", "");
  const auto workers = num(argc, argv, "--workers", "1");
  const auto steps = num(argc, argv, "--steps", "5");
  const auto layout = ss::gen::make_gpt_like_layout(num(argc, argv, "--hidden", "512"), num(argc, argv, "--layers", "8"),
                                                    num(argc, argv, "--vocab", "32000"));
  ss::gen::adam_bf16_options gopt;
  gopt.seed = 42;
  gopt.lr = std::stod(arg(argc, argv, "--lr", "1e-6"));

  // Both processes read the same key file; the first one to run creates it (hex, mode 0600).
  if (!std::filesystem::exists(key_file)) ss::write_key_file(key_file, ss::pre_shared_key::generate());
  ss::asio_tcp_options topt;
  topt.key = ss::load_key_file(key_file);
  ss::asio_tcp_listener listener("127.0.0.1", port, topt);
  if (!port_file.empty()) std::ofstream(port_file) << listener.port() << "\n";
  std::printf("trainer: %zu tensors, %.1f M BF16 parameters; listening on 127.0.0.1:%u (key id %s), waiting for %llu worker(s)\n",
              layout.size(), static_cast<double>(layout.numel()) / 1e6, listener.port(), topt.key->id().c_str(),
              static_cast<unsigned long long>(workers));
  std::fflush(stdout);

  ss::gen::adam_bf16_model model(layout, gopt);
  // 16 MiB buckets: the sender streams bucket i while it encodes bucket i + 1.
  ss::sync::sender<ss::auto_encoder, ss::fixed_bytes, ss::asio_tcp_transport> tx(layout, {}, ss::fixed_bytes{16 << 20});
  for (std::uint64_t i = 0; i < workers; ++i) tx.add_receiver(listener.accept(60s));
  if (!tx.wait_for_receivers(workers, 60s)) throw std::runtime_error("the workers did not complete the handshake");

  // Version 1 is the initial model (a full transfer); each optimizer step after it is the next version.
  for (std::uint64_t version = 1; version <= steps + 1; ++version) {
    if (version > 1) model.step();
    const auto weights = model.views();
    const auto r = tx.publish(version, weights);
    std::printf("trainer: version %llu: %llu of %llu elements changed (%.3f%%), %llu bytes on the wire, published and acknowledged by "
                "%zu/%llu in %.0f ms (encode %.0f ms), checksum %016llx\n",
                static_cast<unsigned long long>(version), static_cast<unsigned long long>(r.changed), static_cast<unsigned long long>(r.numel),
                100.0 * static_cast<double>(r.changed) / static_cast<double>(r.numel), static_cast<unsigned long long>(r.payload_bytes),
                r.acknowledged, static_cast<unsigned long long>(workers), r.seconds * 1e3, r.encode_seconds * 1e3,
                static_cast<unsigned long long>(r.target_checksum));
    std::fflush(stdout);
    if (r.acknowledged != workers) throw std::runtime_error("a worker did not acknowledge the version");
  }
  tx.close();  // each worker sees the end of the stream after the last version
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "tcp_trainer: %s\n", e.what());
  return 1;
}
