// Sharded senders with GPU weights: two trainer ranks, each holding only its flat shard on its own GPU and
// publishing it through its own sync::sender with a device_source, and two workers (sync::sharded_receiver with
// device_sinks) assembling every version on their GPUs. Ranks and workers are spread over the GPUs present
// (rank r on GPU r, worker w on GPU 2 + w, modulo the count; all on GPU 0 with one), each backend driven from
// threads whose current device is another one (full transfers run on the senders' session threads). Checked:
// every version bit-identical on both workers, one version number, the whole-model checksum equal to the sum of
// the ranks' target checksums. Plain C++ over sparsesync::cuda_engine; exits 77 without a CUDA device.
#include <sparsesync/transport/inproc.hpp>

#include <doctest/doctest.h>

#include "gpu_sync_fixtures.hpp"
#include "require_gpu.cuh"  // host code only
#include "sharded_fixtures.hpp"

#include <cuda_runtime_api.h>

#include <memory>
#include <random>
#include <thread>
#include <vector>

using namespace sparsesync;
namespace sc = sparsesync::cuda;

namespace {

const int gpus = sparsesync_test::require_gpu_or_skip();
using rank_state = sparsesync_test::rank_state<inproc_transport>;
using worker_state = sparsesync_test::worker_state<inproc_transport>;

}  // namespace

TEST_CASE("two trainer ranks on their GPUs -> two GPU workers: sharded versions, bit-identical, one checksum") {
  const auto full = sparsesync_test::test_layout();
  auto model = sparsesync_test::random_weights(full.numel());
  std::vector<std::unique_ptr<rank_state>> ranks;
  for (std::size_t r = 0; r < 2; ++r) ranks.push_back(std::make_unique<rank_state>(full, r, 2, static_cast<int>(r) % gpus, 1u << 20));
  std::vector<std::unique_ptr<worker_state>> workers;
  for (int w = 0; w < 2; ++w) {
    auto ws = std::make_unique<worker_state>(full, (2 + w) % gpus);
    std::vector<worker_state::receiver_type::shard_link> links;
    for (auto& r : ranks) {
      auto [a, b] = make_inproc_pair();
      r->tx->add_receiver(std::move(a));
      links.push_back(ws->link_for(full, r->pieces, std::move(b)));
    }
    ws->rx = std::make_unique<worker_state::receiver_type>(full, std::move(links));
    workers.push_back(std::move(ws));
  }
  for (auto& w : workers) w->start();

  sparsesync_test::publish_and_check(full, model, ranks, workers, 5, 17);
  MESSAGE("GPUs used: " << gpus << " (ranks on " << ranks[0]->device << ", " << ranks[1]->device << "; workers on " << workers[0]->device << ", "
                        << workers[1]->device << ")");
}
