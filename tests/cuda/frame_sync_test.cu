// GPU-resident sync over a host transport: frame_publisher / frame_subscriber on a transport_frame_channel
// (in-process transport pair, one GPU, trainer and worker on two threads). Every version must leave the
// worker's device weights bit-identical to the trainer's, in atomic and streamed mode; a worker holding
// other weights must refuse the version and keep its weights. Exits 77 (CTest: skipped) without a CUDA device.
#include <sparsesync/bucketing/fixed_bytes.hpp>
#include <sparsesync/cuda/frame_sync.cuh>
#include <sparsesync/cuda/transport_frame_channel.cuh>
#include <sparsesync/transport/inproc.hpp>

#include <doctest/doctest.h>

#include "require_gpu.cuh"

#include <exception>
#include <random>
#include <thread>
#include <vector>

using namespace sparsesync;
namespace sc = sparsesync::cuda;
using channel = sc::transport_frame_channel<inproc_transport>;

namespace {

const int gpu_present = sparsesync_test::require_gpu_or_skip();

// One model's weights in device memory (one allocation, tensors back to back) and its device pointer array.
struct device_model {
  explicit device_model(const model_layout& layout) : layout_(layout) {
    sc::throw_on_cuda_error(cudaMalloc(&data_, layout.numel() * 2), "cudaMalloc");
    std::vector<void*> ptrs;
    for (std::size_t t = 0; t < layout.size(); ++t) ptrs.push_back(static_cast<unsigned char*>(data_) + 2 * layout.first_element(t));
    sc::throw_on_cuda_error(cudaMalloc(&ptrs_, ptrs.size() * sizeof(void*)), "cudaMalloc");
    sc::throw_on_cuda_error(cudaMemcpy(ptrs_, ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  device_model(const device_model&) = delete;
  device_model& operator=(const device_model&) = delete;
  ~device_model() {
    cudaFree(data_);
    cudaFree(ptrs_);
  }
  void upload(const std::vector<std::uint16_t>& host) {
    sc::throw_on_cuda_error(cudaMemcpy(data_, host.data(), host.size() * 2, cudaMemcpyHostToDevice), "upload");
  }
  [[nodiscard]] std::vector<std::uint16_t> download() const {
    std::vector<std::uint16_t> host(layout_.numel());
    sc::throw_on_cuda_error(cudaMemcpy(host.data(), data_, host.size() * 2, cudaMemcpyDeviceToHost), "download");
    return host;
  }
  [[nodiscard]] void* const* pointers() const { return ptrs_; }

 private:
  const model_layout& layout_;
  void* data_ = nullptr;
  void** ptrs_ = nullptr;
};

// A CUDA stream that outlives everything declared after it (plans free their memory on their stream).
struct stream_holder {
  stream_holder() { sc::throw_on_cuda_error(cudaStreamCreate(&s), "cudaStreamCreate"); }
  stream_holder(const stream_holder&) = delete;
  stream_holder& operator=(const stream_holder&) = delete;
  ~stream_holder() {
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  }
  cudaStream_t s{};
};

// An RL-like step: ~1% of the elements move by one or two BF16 ULPs (never to the same bits).
void step(std::vector<std::uint16_t>& w, std::mt19937_64& rng) {
  for (auto& x : w)
    if (rng() % 100 == 0) x = static_cast<std::uint16_t>(x + 1 + rng() % 2);
}

model_layout test_layout() {
  // Large and tiny tensors, several buckets of 1 MiB (some cut through a tensor).
  return model_layout({{"embed", dtype::bf16, {1000, 700}},
                       {"norm", dtype::bf16, {700}},
                       {"proj", dtype::bf16, {700, 1500}},
                       {"bias", dtype::bf16, {3}},
                       {"head", dtype::bf16, {333, 700}}});
}

struct run_result {
  std::vector<std::vector<std::uint16_t>> worker_after;  // the worker's weights after each version
  std::vector<std::vector<std::uint16_t>> trainer;       // the trainer's weights of each version
  std::exception_ptr worker_error, trainer_error;
};

// Publishes `versions` versions from `start` to a worker that starts from `worker_start`.
run_result run(const model_layout& layout, int versions, sc::frame_subscriber<channel>::commit_mode mode,
               const std::vector<std::uint16_t>& start, const std::vector<std::uint16_t>& worker_start) {
  run_result out;
  auto [trainer_end, worker_end] = make_inproc_pair();
  const auto plans = fixed_bytes{1u << 20}.plan(layout, 12);
  std::mt19937_64 rng(42);
  std::vector<std::vector<std::uint16_t>> targets;
  std::vector<std::uint16_t> w = start;
  for (int v = 0; v < versions; ++v) {
    step(w, rng);
    targets.push_back(w);
  }
  out.trainer = targets;

  std::thread worker([&, &worker_end = worker_end] {
    try {
      const stream_holder s, cs;
      device_model mine(layout);
      mine.upload(worker_start);
      channel ch(worker_end, cs.s);
      sc::frame_subscriber<channel> sub(layout, ch, s.s, cs.s, mode);
      for (;;) {
        std::optional<sc::frame_received_version> got;
        try {
          got = sub.next(mine.pointers());
        } catch (...) {
          out.worker_error = std::current_exception();
          out.worker_after.push_back(mine.download());
          break;
        }
        if (!got) break;
        out.worker_after.push_back(mine.download());
      }
    } catch (...) {
      if (!out.worker_error) out.worker_error = std::current_exception();
    }
    worker_end.close();
  });
  try {
    const stream_holder s, cs;
    device_model weights(layout), snapshot(layout);
    snapshot.upload(start);
    channel ch({&trainer_end}, cs.s);
    sc::encode_config cfg;
    cfg.encoder = encoder_id::delta_varint;
    cfg.mode = value_mode::ulp;
    cfg.log2_chunk = 12;
    sc::frame_publisher<channel> pub(layout, plans, cfg, ch, s.s, cs.s);
    for (int v = 0; v < versions; ++v) {
      weights.upload(targets[static_cast<std::size_t>(v)]);
      const auto st = pub.publish(static_cast<std::uint64_t>(v + 1), snapshot.pointers(), weights.pointers());
      CHECK(st.changed > 0);
      pub.update_snapshot(snapshot.pointers());
      CHECK(snapshot.download() == targets[static_cast<std::size_t>(v)]);
    }
    pub.close();
  } catch (...) {
    out.trainer_error = std::current_exception();
    trainer_end.close();
  }
  worker.join();
  return out;
}

std::vector<std::uint16_t> random_weights(std::size_t n) {
  std::mt19937_64 rng(7);
  std::vector<std::uint16_t> w(n);
  for (auto& x : w) x = static_cast<std::uint16_t>(rng());
  return w;
}

}  // namespace

TEST_CASE("GPU weights over a transport: every version bit-identical on the worker, atomic and streamed") {
  const auto layout = test_layout();
  const auto start = random_weights(layout.numel());
  for (auto mode : {sc::frame_subscriber<channel>::commit_mode::atomic, sc::frame_subscriber<channel>::commit_mode::streamed}) {
    const auto r = run(layout, 4, mode, start, start);
    REQUIRE_FALSE(r.trainer_error);
    REQUIRE_FALSE(r.worker_error);
    REQUIRE(r.worker_after.size() == 4);
    for (std::size_t v = 0; v < 4; ++v) CHECK(r.worker_after[v] == r.trainer[v]);
  }
}

TEST_CASE("GPU weights over a transport: a worker holding other weights refuses the version and keeps its weights") {
  const auto layout = test_layout();
  const auto start = random_weights(layout.numel());
  auto other = start;
  other[12345] ^= 0x0100;  // one element differs from what the trainer's snapshot holds
  const auto r = run(layout, 1, sc::frame_subscriber<channel>::commit_mode::atomic, start, other);
  REQUIRE_FALSE(r.trainer_error);
  REQUIRE(r.worker_error);
  CHECK_THROWS_AS(std::rethrow_exception(r.worker_error), sparsesync::error);
  REQUIRE(r.worker_after.size() == 1);
  CHECK(r.worker_after[0] == other);
}
