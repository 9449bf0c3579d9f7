// A rollout worker receiving weights over TCP from examples/tcp_trainer.cpp: each version is verified and
// applied in place, atomically. The worker recomputes its weights' checksum from scratch and prints it next
// to the one the trainer printed for that version.
//
// With --ports P0,P1,... it takes a sharded trainer (tcp_trainer --rank R --ranks N on port P_R): one connection
// per rank, every version assembled from all shards, verified, and committed all or nothing. Its whole-model
// checksum is the sum of the ranks' checksums, each over its shard's layout (an element's hash includes its index
// in its shard: sync/sharded_receiver.hpp), so the worker recomputes it shard by shard.
//
//   tcp_worker [--host 127.0.0.1] [--port 29555 | --ports P0,P1,...] [--key-file sparsesync-example.key]
//              [--hidden 512] [--layers 8] [--vocab 32000]      (the trainer's model: same layout)
#include "example_args.hpp"
#include <sparsesync/core/model_checksum.hpp>

#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/gen/tensor_set.hpp>
#include <sparsesync/core/shard.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sharded_receiver.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

namespace ss = sparsesync;
using namespace std::chrono_literals;

using example::arg;
using example::num;

int main(int argc, char** argv) try {
  const std::string host = arg(argc, argv, "--host", "127.0.0.1");
  const auto port = static_cast<std::uint16_t>(num(argc, argv, "--port", "29555"));
  const auto layout = ss::gen::make_gpt_like_layout(num(argc, argv, "--hidden", "512"), num(argc, argv, "--layers", "8"),
                                                    num(argc, argv, "--vocab", "32000"));
  ss::asio_tcp_options topt;
  // Wait for the key file too: the trainer writes it when it starts.
  const std::string key_file = arg(argc, argv, "--key-file", "sparsesync-example.key");
  for (int i = 0; i < 300 && !std::filesystem::exists(key_file); ++i) std::this_thread::sleep_for(100ms);
  topt.key = ss::load_key_file(key_file);

  ss::gen::tensor_set weights(layout);  // the worker's own buffers; empty until the first (full) version
  auto views = weights.mutable_views();
  std::vector<std::uint16_t> ports;
  for (std::string list = arg(argc, argv, "--ports", ""); !list.empty();) {
    const auto comma = list.find(',');
    ports.push_back(static_cast<std::uint16_t>(std::stoul(list.substr(0, comma))));
    list = comma == std::string::npos ? std::string() : list.substr(comma + 1);
  }
  std::vector<std::vector<ss::shard_piece>> shards_of;  // the ranks' pieces (none: an unsharded trainer)
  for (std::size_t r = 0; ports.size() > 1 && r < ports.size(); ++r) shards_of.push_back(ss::flat_shard(layout, r, ports.size()));
  int failures = 0;
  const auto report = [&](const auto& v, std::shared_mutex& weights_mutex) {
    std::uint64_t recomputed = 0;
    {
      std::shared_lock lock(weights_mutex);  // what a rollout engine holds while it reads the weights
      const auto all = weights.views();
      if (shards_of.empty()) recomputed = ss::model_checksum(layout, all);
      for (const auto& pieces : shards_of)
        recomputed += ss::model_checksum(ss::shard_layout(layout, pieces), ss::shard_views<ss::const_tensor_view>(layout, all, pieces));
    }
    const bool ok = recomputed == v.checksum;
    failures += !ok;
    std::printf("worker: version %llu applied (%s): %llu elements changed, %llu bytes received, %.0f ms; checksum %016llx, "
                "recomputed %016llx: %s\n",
                static_cast<unsigned long long>(v.version), v.full ? "full transfer" : "patch", static_cast<unsigned long long>(v.changed),
                static_cast<unsigned long long>(v.payload_bytes), v.seconds * 1e3, static_cast<unsigned long long>(v.checksum),
                static_cast<unsigned long long>(recomputed), ok ? "OK" : "MISMATCH");
    std::fflush(stdout);
  };
  if (ports.size() > 1) {
    // One link per trainer rank (the trainers may still be starting), each rank's flat shard of the layout.
    std::vector<std::pair<std::vector<ss::shard_piece>, ss::asio_tcp_transport>> shards;
    for (std::size_t r = 0; r < ports.size(); ++r) shards.emplace_back(shards_of[r], ss::connect_retrying(host, ports[r], topt));
    ss::sync::sharded_receiver<ss::asio_tcp_transport> rx(layout, views, std::move(shards));
    std::printf("worker: connected to %zu trainer ranks on %s\n", ports.size(), host.c_str());
    while (auto v = rx.next()) report(*v, rx.weights_mutex());
    std::printf("worker: the trainer ranks closed their streams at version %llu\n", static_cast<unsigned long long>(rx.version()));
    return failures == 0 ? 0 : 1;
  }
  ss::sync::receiver<ss::asio_tcp_transport> rx(layout, views, ss::connect_retrying(host, port, topt));  // the trainer may still be starting
  std::printf("worker: connected to %s:%u; the trainer is at version %llu\n", host.c_str(), port,
              static_cast<unsigned long long>(rx.sender_version()));
  while (auto v = rx.next()) report(*v, rx.weights_mutex());
  std::printf("worker: the trainer closed the stream at version %llu\n", static_cast<unsigned long long>(rx.version()));
  return failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "tcp_worker: %s\n", e.what());
  return 1;
}
