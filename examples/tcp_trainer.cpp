// A trainer process publishing its weights over TCP: a GPT-shaped model takes RL-style AdamW steps (lr 1e-6)
// and after each one sync::sender streams only the changed BF16 elements to every connected rollout worker
// (examples/tcp_worker.cpp), authenticated with a pre-shared key. It prints each version's checksum; the
// workers print theirs.
//
// Sharded (FSDP / ZeRO-3 style): run one trainer process per rank with --rank R --ranks N; each publishes only its
// flat shard of the model (core/shard.hpp) on its own port, and each worker connects to all of them
// (tcp_worker --ports P0,P1,...) and commits a version only once every shard of it arrived and verified. Here
// every rank steps the whole generated model and sends its shard of it; a real rank holds only its shard.
//
//   tcp_trainer [--port 29555] [--key-file sparsesync-example.key] [--workers 1] [--steps 5]
//               [--hidden 512] [--layers 8] [--vocab 32000] [--lr 1e-6] [--port-file F] [--rank 0 --ranks 1]
#include "example_args.hpp"

#include <sparsesync/core/shard.hpp>
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
  const auto full = ss::gen::make_gpt_like_layout(num(argc, argv, "--hidden", "512"), num(argc, argv, "--layers", "8"),
                                                  num(argc, argv, "--vocab", "32000"));
  const auto rank = num(argc, argv, "--rank", "0"), ranks = num(argc, argv, "--ranks", "1");
  // What this process publishes: the whole model, or its rank's flat shard (one 1-D tensor per piece).
  const auto pieces = ss::flat_shard(full, rank, ranks);
  const auto layout = ranks > 1 ? ss::shard_layout(full, pieces) : full;
  const std::string who = ranks > 1 ? "trainer rank " + std::to_string(rank) : std::string("trainer");
  ss::gen::adam_bf16_options gopt;
  gopt.seed = 42;
  gopt.lr = std::stod(arg(argc, argv, "--lr", "1e-6"));

  // Both processes read the same key file; the first one to run creates it (hex, mode 0600).
  if (!std::filesystem::exists(key_file)) ss::write_key_file(key_file, ss::pre_shared_key::generate());
  ss::asio_tcp_options topt;
  topt.key = ss::load_key_file(key_file);
  ss::asio_tcp_listener listener("127.0.0.1", port, topt);
  if (!port_file.empty()) std::ofstream(port_file) << listener.port() << "\n";
  std::printf("%s: %zu tensors, %.1f M BF16 parameters; listening on 127.0.0.1:%u (key id %s), waiting for %llu worker(s)\n",
              who.c_str(), layout.size(), static_cast<double>(layout.numel()) / 1e6, listener.port(), topt.key->id().c_str(),
              static_cast<unsigned long long>(workers));
  std::fflush(stdout);

  ss::gen::adam_bf16_model model(full, gopt);
  // 16 MiB buckets: the sender streams bucket i while it encodes bucket i + 1.
  ss::sync::sender<ss::auto_encoder, ss::fixed_bytes, ss::asio_tcp_transport> tx(layout, {}, ss::fixed_bytes{16 << 20});
  for (std::uint64_t i = 0; i < workers; ++i) tx.add_receiver(listener.accept(60s));
  if (!tx.wait_for_receivers(workers, 60s)) throw std::runtime_error("the workers did not complete the handshake");

  // Version 1 is the initial model (a full transfer); each optimizer step after it is the next version.
  for (std::uint64_t version = 1; version <= steps + 1; ++version) {
    if (version > 1) model.step();
    const auto all = model.views();
    const auto weights = ranks > 1 ? ss::shard_views<ss::const_tensor_view>(full, all, pieces) : all;
    const auto r = tx.publish(version, weights);
    std::printf("%s: version %llu: %llu of %llu elements changed (%.3f%%), %llu bytes on the wire, published and acknowledged by "
                "%zu/%llu in %.0f ms (encode %.0f ms), checksum %016llx\n",
                who.c_str(), static_cast<unsigned long long>(version), static_cast<unsigned long long>(r.changed), static_cast<unsigned long long>(r.numel),
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
