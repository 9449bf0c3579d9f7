// Trainer ranks and workers of the sharded GPU engine tests (engine_sharded_test.cpp over in-process links,
// engine_nccl_sharded_test.cpp over NCCL): a rank holds only its flat shard on its own GPU and publishes it
// through its own sync::sender with a device_source; a worker assembles every version on its GPU through a
// sync::sharded_receiver of device_sinks. Host code over sparsesync::cuda_engine.
#pragma once

#include <sparsesync/core/shard.hpp>
#include <sparsesync/cuda/cuda_error.hpp>
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/sync/sharded_receiver.hpp>

#include <cuda_runtime_api.h>

#include <doctest/doctest.h>

#include "gpu_sync_fixtures.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <shared_mutex>
#include <thread>
#include <vector>

namespace sparsesync_test {

namespace ss = sparsesync;

// Device memory on one GPU, zeroed, freed on it.
struct gpu_buffer {
  int device;
  void* p = nullptr;
  gpu_buffer(int d, std::size_t bytes) : device(d) {
    ss::cuda::throw_on_cuda_error(cudaSetDevice(d), "cudaSetDevice");
    ss::cuda::throw_on_cuda_error(cudaMalloc(&p, bytes), "cudaMalloc");
    ss::cuda::throw_on_cuda_error(cudaMemset(p, 0, bytes), "cudaMemset");
  }
  gpu_buffer(const gpu_buffer&) = delete;
  gpu_buffer& operator=(const gpu_buffer&) = delete;
  ~gpu_buffer() {
    cudaSetDevice(device);
    cudaFree(p);
  }
};

// A trainer rank of `ranks`: its shard's pieces (BF16) back to back in memory of its own GPU.
template <class Transport>
struct rank_state {
  using sender_type = ss::sync::sender<ss::rice, ss::fixed_bytes, Transport, ss::sync::device_source>;
  int device;
  std::vector<ss::shard_piece> pieces;
  ss::model_layout layout;
  std::unique_ptr<gpu_buffer> memory;
  std::unique_ptr<sender_type> tx;

  rank_state(const ss::model_layout& full, std::size_t r, std::size_t ranks, int dev, std::uint64_t bucket_bytes, ss::cuda::device_source_options so = {})
      : device(dev), pieces(ss::flat_shard(full, r, ranks)), layout(ss::shard_layout(full, pieces)) {
    memory = std::make_unique<gpu_buffer>(device, layout.numel() * 2);
    ss::sync::sender_options o;
    o.encode.mode = ss::value_mode::ulp;
    o.ack_timeout = std::chrono::seconds(60);
    o.lag_grace = std::chrono::seconds(60);
    ss::cuda::throw_on_cuda_error(cudaSetDevice(device), "cudaSetDevice");  // the backend lives on the rank's GPU
    tx = std::make_unique<sender_type>(layout, o, ss::fixed_bytes{bucket_bytes}, ss::sync::device_source<ss::rice>(ss::cuda::compiled_device_encoder_backend(so)));
  }
  std::vector<ss::const_tensor_view> views() const {
    std::vector<ss::const_tensor_view> v;
    for (std::size_t i = 0; i < layout.size(); ++i)
      v.push_back({static_cast<const std::uint16_t*>(memory->p) + layout.first_element(i), layout[i].numel(), layout[i].dtype});
    return v;
  }
  // Its optimizer's output: its pieces of the full host model.
  void take(const ss::model_layout& full, const std::vector<std::uint16_t>& model) {
    std::vector<std::uint16_t> mine;
    for (const auto& p : pieces) {
      const auto* at = model.data() + full.first_element(p.tensor) + p.offset;
      mine.insert(mine.end(), at, at + p.count);
    }
    ss::cuda::throw_on_cuda_error(cudaSetDevice(device), "cudaSetDevice");
    ss::cuda::throw_on_cuda_error(cudaMemcpy(memory->p, mine.data(), mine.size() * 2, cudaMemcpyHostToDevice), "upload shard");
  }
};

// A worker: the whole model (BF16) on its GPU, written by a sharded_receiver on a thread of its own.
template <class Transport>
struct worker_state {
  using receiver_type = ss::sync::sharded_receiver<Transport, ss::sync::device_sink>;
  int device;
  std::unique_ptr<gpu_buffer> memory;
  std::unique_ptr<receiver_type> rx;
  std::vector<ss::sync::sharded_version> got;
  std::thread thread;

  worker_state(const ss::model_layout& full, int dev) : device(dev), memory(std::make_unique<gpu_buffer>(dev, full.numel() * 2)) {}

  std::vector<ss::tensor_view> views(const ss::model_layout& full) const {
    std::vector<ss::tensor_view> v;
    for (std::size_t t = 0; t < full.size(); ++t) v.push_back({static_cast<std::uint16_t*>(memory->p) + full.first_element(t), full[t].numel(), full[t].dtype});
    return v;
  }
  // The shard link of one rank: its pieces, a device_sink over this worker's memory of them, and the link.
  typename receiver_type::shard_link link_for(const ss::model_layout& full, const std::vector<ss::shard_piece>& pieces, Transport t,
                                              ss::cuda::device_sink_options so = {}) const {
    const auto wv = views(full);
    const auto sv = ss::shard_views<ss::tensor_view>(full, wv, pieces);
    ss::cuda::throw_on_cuda_error(cudaSetDevice(device), "cudaSetDevice");  // the sink lives on the worker's GPU
    return {pieces, ss::sync::device_sink(ss::cuda::compiled_device_applier_backend(ss::shard_layout(full, pieces), sv, so)), std::move(t)};
  }
  void start() {
    thread = std::thread([this] {
      cudaSetDevice(0);  // deliberately any device: the backends make their own current
      while (auto v = rx->next()) got.push_back(*v);
    });
  }
  std::vector<std::uint16_t> download(const ss::model_layout& full) const {
    std::vector<std::uint16_t> h(full.numel());
    ss::cuda::throw_on_cuda_error(cudaSetDevice(device), "cudaSetDevice");
    ss::cuda::throw_on_cuda_error(cudaMemcpy(h.data(), memory->p, h.size() * 2, cudaMemcpyDeviceToHost), "download");
    return h;
  }
};

// Publishes `versions` versions of `model` (RL-like steps from `seed`) from every rank at once and checks after
// each that both workers hold it bit for bit, at one version, with the whole-model checksum the ranks' target
// checksums add up to; `after` sees each version's reports (per rank). Then closes the ranks and checks that
// each worker got every version, the first as a full transfer and the last as a patch.
template <class Transport>
void publish_and_check(const ss::model_layout& full, std::vector<std::uint16_t>& model, std::vector<std::unique_ptr<rank_state<Transport>>>& ranks,
                       std::vector<std::unique_ptr<worker_state<Transport>>>& workers, std::uint64_t versions, std::uint64_t seed,
                       const std::function<void(std::uint64_t, const std::vector<ss::sync::publish_report>&)>& after = {}) {
  std::mt19937_64 rng(seed);
  for (std::uint64_t v = 1; v <= versions; ++v) {
    if (v > 1) step(model, rng);
    for (auto& r : ranks) r->take(full, model);
    std::vector<ss::sync::publish_report> reports(ranks.size());
    std::vector<std::thread> t;
    for (std::size_t i = 0; i < ranks.size(); ++i) t.emplace_back([&, i] { reports[i] = ranks[i]->tx->publish(v, ranks[i]->views()); });
    for (auto& x : t) x.join();
    std::uint64_t whole = 0;
    for (const auto& r : reports) {
      CHECK(r.acknowledged == workers.size());
      whole += r.target_checksum;
    }
    for (auto& w : workers) {
      std::shared_lock lock(w->rx->weights_mutex());
      CHECK(w->rx->version() == v);
      CHECK(w->rx->checksum() == whole);
      CHECK(w->download(full) == model);
    }
    if (after) after(v, reports);
  }
  for (auto& r : ranks) r->tx->close();
  for (auto& w : workers) {
    w->thread.join();
    REQUIRE(w->got.size() == versions);
    CHECK(w->got.front().full);
    CHECK_FALSE(w->got.back().full);
  }
}

}  // namespace sparsesync_test
