// Sharded senders with GPU weights: two trainer ranks, each holding only its flat shard on its own GPU and
// publishing it through its own sync::sender with a device_source, and two workers (sync::sharded_receiver with
// device_sinks) assembling every version on their GPUs. Ranks and workers are spread over the GPUs present
// (rank r on GPU r, worker w on GPU 2 + w, modulo the count; all on GPU 0 with one), each backend driven from
// threads whose current device is another one (full transfers run on the senders' session threads). Checked:
// every version bit-identical on both workers, one version number, the whole-model checksum equal to the sum of
// the ranks' target checksums. Plain C++ over sparsesync::cuda_engine; exits 77 without a CUDA device.
#include <sparsesync/core/shard.hpp>
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/sync/sharded_receiver.hpp>
#include <sparsesync/transport/inproc.hpp>

#include <doctest/doctest.h>

#include "gpu_sync_fixtures.hpp"
#include "require_gpu.cuh"  // host code only

#include <cuda_runtime_api.h>

#include <memory>
#include <random>
#include <thread>
#include <vector>

using namespace sparsesync;
namespace sc = sparsesync::cuda;

namespace {

const int gpus = sparsesync_test::require_gpu_or_skip();

// Device memory on one GPU, freed on it.
struct gpu_buffer {
  int device;
  void* p = nullptr;
  gpu_buffer(int d, std::size_t bytes) : device(d) {
    sc::throw_on_cuda_error(cudaSetDevice(d), "cudaSetDevice");
    sc::throw_on_cuda_error(cudaMalloc(&p, bytes), "cudaMalloc");
    sc::throw_on_cuda_error(cudaMemset(p, 0, bytes), "cudaMemset");
  }
  gpu_buffer(const gpu_buffer&) = delete;
  gpu_buffer& operator=(const gpu_buffer&) = delete;
  ~gpu_buffer() {
    cudaSetDevice(device);
    cudaFree(p);
  }
};

// A trainer rank: its shard's pieces back to back in memory of its own GPU.
struct rank_state {
  int device;
  std::vector<shard_piece> pieces;
  model_layout layout;
  std::unique_ptr<gpu_buffer> memory;
  std::unique_ptr<sync::sender<rice, fixed_bytes, inproc_transport, sync::device_source>> tx;

  rank_state(const model_layout& full, std::size_t r, int dev) : device(dev), pieces(flat_shard(full, r, 2)), layout(shard_layout(full, pieces)) {
    memory = std::make_unique<gpu_buffer>(device, layout.numel() * 2);
    sync::sender_options so;
    so.encode.mode = value_mode::ulp;
    so.ack_timeout = std::chrono::seconds(60);
    so.lag_grace = std::chrono::seconds(60);
    sc::throw_on_cuda_error(cudaSetDevice(device), "cudaSetDevice");  // the backend lives on the rank's GPU
    tx = std::make_unique<sync::sender<rice, fixed_bytes, inproc_transport, sync::device_source>>(
        layout, so, fixed_bytes{1u << 20}, sync::device_source<rice>(sc::compiled_device_encoder_backend({})));
  }
  std::vector<const_tensor_view> views() const {
    std::vector<const_tensor_view> v;
    for (std::size_t i = 0; i < layout.size(); ++i)
      v.push_back({static_cast<const std::uint16_t*>(memory->p) + layout.first_element(i), layout[i].numel(), layout[i].dtype});
    return v;
  }
  // Its optimizer's output: its pieces of the full host model.
  void take(const model_layout& full, const std::vector<std::uint16_t>& model) {
    std::vector<std::uint16_t> mine;
    for (const auto& p : pieces) {
      const auto* at = model.data() + full.first_element(p.tensor) + p.offset;
      mine.insert(mine.end(), at, at + p.count);
    }
    sc::throw_on_cuda_error(cudaSetDevice(device), "cudaSetDevice");
    sc::throw_on_cuda_error(cudaMemcpy(memory->p, mine.data(), mine.size() * 2, cudaMemcpyHostToDevice), "upload shard");
  }
};

struct worker_state {
  int device;
  std::unique_ptr<gpu_buffer> memory;
  std::unique_ptr<sync::sharded_receiver<inproc_transport, sync::device_sink>> rx;
  std::vector<sync::sharded_version> got;
  std::thread thread;

  std::vector<tensor_view> views(const model_layout& full) const {
    std::vector<tensor_view> v;
    for (std::size_t t = 0; t < full.size(); ++t) v.push_back({static_cast<std::uint16_t*>(memory->p) + full.first_element(t), full[t].numel(), full[t].dtype});
    return v;
  }
  std::vector<std::uint16_t> download(const model_layout& full) const {
    std::vector<std::uint16_t> h(full.numel());
    sc::throw_on_cuda_error(cudaSetDevice(device), "cudaSetDevice");
    sc::throw_on_cuda_error(cudaMemcpy(h.data(), memory->p, h.size() * 2, cudaMemcpyDeviceToHost), "download");
    return h;
  }
};

}  // namespace

TEST_CASE("two trainer ranks on their GPUs -> two GPU workers: sharded versions, bit-identical, one checksum") {
  const auto full = sparsesync_test::test_layout();
  auto model = sparsesync_test::random_weights(full.numel());
  std::vector<std::unique_ptr<rank_state>> ranks;
  for (std::size_t r = 0; r < 2; ++r) ranks.push_back(std::make_unique<rank_state>(full, r, static_cast<int>(r) % gpus));
  std::vector<std::unique_ptr<worker_state>> workers;
  for (int w = 0; w < 2; ++w) {
    auto ws = std::make_unique<worker_state>();
    ws->device = (2 + w) % gpus;
    ws->memory = std::make_unique<gpu_buffer>(ws->device, full.numel() * 2);
    const auto wv = ws->views(full);
    std::vector<sync::sharded_receiver<inproc_transport, sync::device_sink>::shard_link> links;
    for (auto& r : ranks) {
      auto [a, b] = make_inproc_pair();
      r->tx->add_receiver(std::move(a));
      const auto sl = shard_layout(full, r->pieces);
      const auto sv = shard_views<tensor_view>(full, wv, r->pieces);
      sc::throw_on_cuda_error(cudaSetDevice(ws->device), "cudaSetDevice");  // the sink lives on the worker's GPU
      links.push_back({r->pieces, sync::device_sink(sc::compiled_device_applier_backend(sl, sv, {})), std::move(b)});
    }
    ws->rx = std::make_unique<sync::sharded_receiver<inproc_transport, sync::device_sink>>(full, std::move(links));
    workers.push_back(std::move(ws));
  }
  for (auto& w : workers)
    w->thread = std::thread([&w] {
      cudaSetDevice(0);  // deliberately any device: the backends make their own current
      while (auto v = w->rx->next()) w->got.push_back(*v);
    });

  std::mt19937_64 rng(17);
  for (std::uint64_t v = 1; v <= 5; ++v) {
    if (v > 1) sparsesync_test::step(model, rng);
    for (auto& r : ranks) r->take(full, model);
    std::vector<sync::publish_report> reports(ranks.size());
    std::vector<std::thread> t;
    for (std::size_t i = 0; i < ranks.size(); ++i) t.emplace_back([&, i] { reports[i] = ranks[i]->tx->publish(v, ranks[i]->views()); });
    for (auto& x : t) x.join();
    for (const auto& r : reports) CHECK(r.acknowledged == 2);
    const std::uint64_t whole = reports[0].target_checksum + reports[1].target_checksum;
    for (auto& w : workers) {
      std::shared_lock lock(w->rx->weights_mutex());
      CHECK(w->rx->version() == v);
      CHECK(w->rx->checksum() == whole);
      CHECK(w->download(full) == model);
    }
  }
  for (auto& r : ranks) r->tx->close();
  for (auto& w : workers) {
    w->thread.join();
    REQUIRE(w->got.size() == 5);
    CHECK(w->got.front().full);
    CHECK_FALSE(w->got.back().full);
  }
  MESSAGE("GPUs used: " << gpus << " (ranks on " << ranks[0]->device << ", " << ranks[1]->device << "; workers on " << workers[0]->device << ", "
                        << workers[1]->device << ")");
}
