// GPU-resident sync over a host transport: frame_publisher / frame_subscriber on a transport_frame_channel
// (in-process transport pair, one GPU, trainer and worker on two threads). Every version must leave the
// worker's device weights bit-identical to the trainer's, in atomic and streamed mode; a worker holding
// other weights, or receiving a corrupted frame, must refuse the version and keep the weights it had, bit for
// bit (streamed mode: by rolling back the buckets it already wrote). Exits 77 (CTest: skipped) without a CUDA
// device.
#include <sparsesync/cuda/sync/frame_sync.cuh>  // first: this file is the header's self-containment check
#include <sparsesync/bucketing/fixed_bytes.hpp>
#include <sparsesync/cuda/sync/transport_frame_channel.hpp>
#include <sparsesync/transport/inproc.hpp>

#include <doctest/doctest.h>

#include "gpu_sync_fixtures.hpp"
#include "require_gpu.cuh"

#include <exception>
#include <random>
#include <thread>
#include <vector>

using namespace sparsesync;
namespace sc = sparsesync::cuda;
using channel = sc::transport_frame_channel<inproc_transport>;

// (External linkage: nvcc would warn that the send() and close() the concept asks for are never called.)
namespace frame_sync_test_support {

// The worker's channel: a transport_frame_channel that, on request, flips one byte of one received frame in
// device memory (the `nth` frame since the start, counting every version's frames; `from_end` bytes before
// its end), as a corrupted link or a bug upstream would.
class tampering_channel {
 public:
  tampering_channel(inproc_transport& from_root, cudaStream_t stream, long nth, std::size_t from_end)
      : inner_(from_root, stream), stream_(stream), nth_(nth), from_end_(from_end) {}
  [[nodiscard]] bool is_root() const { return false; }
  void send(const void*, std::size_t) { throw std::logic_error("tampering_channel: receive only"); }
  void close() {}
  std::optional<std::size_t> receive_size() {
    size_ = inner_.receive_size();
    return size_;
  }
  void receive_payload(void* device_data) {
    inner_.receive_payload(device_data);
    if (seen_++ != nth_ || !size_ || *size_ <= from_end_) return;
    unsigned char* at = static_cast<unsigned char*>(device_data) + (*size_ - 1 - from_end_);
    unsigned char b = 0;
    sc::throw_on_cuda_error(cudaMemcpyAsync(&b, at, 1, cudaMemcpyDeviceToHost, stream_), "tamper read");
    sc::throw_on_cuda_error(cudaStreamSynchronize(stream_), "tamper read");
    b ^= 0x40;
    sc::throw_on_cuda_error(cudaMemcpyAsync(at, &b, 1, cudaMemcpyHostToDevice, stream_), "tamper write");
    sc::throw_on_cuda_error(cudaStreamSynchronize(stream_), "tamper write");
    ++tampered_;
  }
  [[nodiscard]] int tampered() const { return tampered_; }

 private:
  channel inner_;
  cudaStream_t stream_;
  long nth_;
  std::size_t from_end_;
  long seen_ = 0;
  int tampered_ = 0;
  std::optional<std::size_t> size_;
};
}  // namespace frame_sync_test_support
using frame_sync_test_support::tampering_channel;
static_assert(sc::device_frame_channel<tampering_channel>);

namespace {

const int gpu_present = sparsesync_test::require_gpu_or_skip();
using sparsesync_test::device_model;
using sparsesync_test::random_weights;
using sparsesync_test::step;
using sparsesync_test::stream_holder;
using sparsesync_test::test_layout;


struct run_result {
  std::vector<std::vector<std::uint16_t>> worker_after;  // the worker's weights after each version
  std::vector<std::vector<std::uint16_t>> trainer;       // the trainer's weights of each version
  std::exception_ptr worker_error, trainer_error;
  int tampered = 0;                                       // frames the worker's channel corrupted
};

struct tamper {
  long nth = -1;  // which received frame (counting from the first version's first), -1: none
  std::size_t from_end = 0;
};

// Publishes `versions` versions from `start` to a worker that starts from `worker_start`.
run_result run(const model_layout& layout, int versions, sc::frame_commit_mode mode, const std::vector<std::uint16_t>& start,
               const std::vector<std::uint16_t>& worker_start, tamper t = {}) {
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
      tampering_channel ch(worker_end, cs.s, t.nth, t.from_end);
      sc::frame_subscriber<tampering_channel> sub(layout, ch, s.s, cs.s, mode);
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
      out.tampered = ch.tampered();
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

}  // namespace

TEST_CASE("GPU weights over a transport: every version bit-identical on the worker, atomic and streamed") {
  const auto layout = test_layout();
  const auto start = random_weights(layout.numel());
  for (auto mode : {sc::frame_commit_mode::atomic, sc::frame_commit_mode::streamed}) {
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
  other[layout.numel() - 5] ^= 0x0100;  // one element of the last bucket differs from the trainer's snapshot
  for (auto mode : {sc::frame_commit_mode::atomic, sc::frame_commit_mode::streamed}) {
    CAPTURE(static_cast<int>(mode));
    const auto r = run(layout, 1, mode, start, other);
    REQUIRE_FALSE(r.trainer_error);
    REQUIRE(r.worker_error);
    CHECK_THROWS_AS(std::rethrow_exception(r.worker_error), sparsesync::error);
    REQUIRE(r.worker_after.size() == 1);
    // Streamed mode wrote the earlier buckets before the last one was refused, then rolled them back.
    CHECK(r.worker_after[0] == other);
  }
}

TEST_CASE("GPU weights over a transport: a corrupted frame refuses the version, the weights stay on the last one") {
  const auto layout = test_layout();
  const auto start = random_weights(layout.numel());
  const std::size_t buckets = fixed_bytes{1u << 20}.plan(layout, 12).size();
  REQUIRE(buckets >= 3);
  const long frames_per_version = static_cast<long>(buckets) + 1;  // the buckets, then the patch header
  struct corruption {
    const char* what;
    tamper t;
  };
  // Version 2 is corrupted: a byte of the third bucket's coded data (after two buckets were written in
  // streamed mode), or a byte of the closing header (after every bucket was written).
  const corruption cases[] = {{"third bucket's data", {frames_per_version + 2, 1}},
                              {"closing header", {frames_per_version + static_cast<long>(buckets), 40}}};
  for (const auto& c : cases)
    for (auto mode : {sc::frame_commit_mode::atomic, sc::frame_commit_mode::streamed}) {
      CAPTURE(c.what);
      CAPTURE(static_cast<int>(mode));
      const auto r = run(layout, 2, mode, start, start, c.t);
      REQUIRE_FALSE(r.trainer_error);
      REQUIRE(r.worker_error);
      CHECK_THROWS_AS(std::rethrow_exception(r.worker_error), sparsesync::error);
      CHECK(r.tampered == 1);
      REQUIRE(r.worker_after.size() == 2);
      CHECK(r.worker_after[0] == r.trainer[0]);  // version 1 applied
      CHECK(r.worker_after[1] == r.trainer[0]);  // version 2 refused: still version 1, bit for bit
      CHECK(r.worker_after[1] != r.trainer[1]);
    }
}
