// Sharded trainers over NCCL on four GPUs: trainer ranks 0 and 1 (GPUs 0 and 1) each hold only their flat shard
// and publish it through their own sync::sender (device_source, frames kept on the GPU); workers on GPUs 2 and 3
// assemble every version through a sync::sharded_receiver whose shard links are nccl_links (one pair
// communicator per rank-worker pair; control messages in process), so each shard's frames go GPU to GPU. Checked:
// every version bit-identical on both workers, one version number, the whole-model checksum equal to the sum of
// the ranks' target checksums, and each rank's snapshot holding its shard only.
// Exits 77 (skipped) with fewer than four CUDA devices.
#include <sparsesync/transport/inproc.hpp>
#include <sparsesync/transport/nccl_link.hpp>

#include <doctest/doctest.h>

#include "gpu_sync_fixtures.hpp"
#include "require_gpu.cuh"  // host code only
#include "sharded_fixtures.hpp"

#include <future>
#include <memory>
#include <random>
#include <vector>

using namespace sparsesync;
using namespace std::chrono_literals;

namespace {

const int gpus = sparsesync_test::require_gpus_or_skip(4);
using link = nccl_link<inproc_transport>;
using rank_state = sparsesync_test::rank_state<link>;
using worker_state = sparsesync_test::worker_state<link>;

nccl_link_options on(int device, std::chrono::milliseconds timeout) {
  nccl_link_options o;
  o.device = device;
  o.timeout = timeout;
  return o;
}

}  // namespace

TEST_CASE("two trainer ranks (GPUs 0, 1) -> two workers (GPUs 2, 3) over NCCL: sharded, bit-identical, shard-sized snapshots") {
  const auto full = sparsesync_test::test_layout();
  auto model = sparsesync_test::random_weights(full.numel());
  cuda::device_source_options so;
  so.frames_on_device = true;  // frames travel GPU to GPU
  std::vector<std::unique_ptr<rank_state>> ranks;
  for (std::size_t r = 0; r < 2; ++r) ranks.push_back(std::make_unique<rank_state>(full, r, 2, static_cast<int>(r), 1u << 20, so));
  std::vector<std::unique_ptr<worker_state>> workers;
  for (int w = 0; w < 2; ++w) {
    auto ws = std::make_unique<worker_state>(full, 2 + w);
    std::vector<worker_state::receiver_type::shard_link> links;
    for (auto& r : ranks) {
      auto [a, b] = make_inproc_pair();
      auto worker_end = std::async(std::launch::async, [b = std::move(b), d = ws->device]() mutable { return link::connect_receiver(std::move(b), on(d, 30s)); });
      r->tx->add_receiver(link::connect_sender(std::move(a), on(r->device, 10s)));
      links.push_back(ws->link_for(full, r->pieces, worker_end.get()));
    }
    ws->rx = std::make_unique<worker_state::receiver_type>(full, std::move(links));
    workers.push_back(std::move(ws));
  }
  for (auto& w : workers) w->start();

  sparsesync_test::publish_and_check(full, model, ranks, workers, 5, 23, [&](std::uint64_t v, const std::vector<sync::publish_report>& reports) {
    if (v == 1) return;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      // Its shard's snapshot, nothing of the other shard; scratch and frames are sized by buckets and payload
      // (a floor of a few MiB, more than this test's whole model), never by the full model.
      const auto m = ranks[i]->tx->source().memory();
      const std::uint64_t shard_bytes = ranks[i]->layout.numel() * 2;
      CHECK(m.snapshot_device == shard_bytes);
      MESSAGE("rank " << i << ": shard " << shard_bytes << " B, snapshot " << m.snapshot_device << " B, scratch and frames " << m.scratch_device
                      << " B, payload " << reports[i].payload_bytes << " B (model " << full.numel() * 2 << " B)");
    }
  });
  MESSAGE("GPUs: " << gpus << "; ranks on 0, 1; workers on 2, 3");
}
