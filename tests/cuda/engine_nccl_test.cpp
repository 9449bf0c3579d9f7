// The one sync engine over NCCL: sync::sender with a device_source whose frames stay on the GPU, and receivers
// with device_sinks on nccl_links (a pair communicator per worker, control messages on an in-process link), on
// two GPUs of one host: trainer on GPU 0, workers on the last GPU. Checked: every version bit-identical in atomic
// and streamed commit with the frames moved GPU to GPU (the device bytes the links carried are counted), and a
// host worker of the same sender (a host sink on an nccl_link) fed host copies; a corrupted device frame refused
// with the weights untouched and healed by a full transfer; a late worker and a restarted one; a worker that stops
// receiving mid-version: publish returns after the lag bound, its link aborts after its timeout, the others go on.
// Exits 77 (skipped) with fewer than two CUDA devices. Workers killed as processes: engine_nccl_kill_test.cpp.
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/inproc.hpp>
#include <sparsesync/transport/nccl_link.hpp>

#include <doctest/doctest.h>

#include "engine_worker.hpp"
#include "gpu_sync_fixtures.hpp"
#include "require_gpu.cuh"  // host code only

#include <atomic>
#include <cstdlib>
#include <deque>
#include <future>
#include <memory>
#include <random>
#include <thread>
#include <vector>

using namespace sparsesync;
using namespace std::chrono_literals;
namespace sc = sparsesync::cuda;
using sparsesync_test::device_model;
using sparsesync_test::device_views;
using sparsesync_test::stream_holder;

namespace {

const int gpu_count = sparsesync_test::require_gpus_or_skip(2);
const int trainer_gpu = 0;
const int worker_gpu = gpu_count - 1;

// The worker's end: counts the device bytes it took, and can flip a byte of one device frame after it arrived
// (a frame damaged on the device path: NCCL carries no checksum of its own, the frame's does).
class counting_link {
 public:
  using transport_concept = transport_tag;
  using device_link_concept = device_link_tag;
  counting_link(nccl_link<inproc_transport> inner, std::shared_ptr<std::atomic<long>> flip) : inner_(std::move(inner)), flip_(std::move(flip)) {}
  void send(std::span<const std::byte> m) { inner_.send(m); }
  bool receive(std::vector<std::byte>& m) { return inner_.receive(m); }
  void close() noexcept { inner_.close(); }
  [[nodiscard]] std::size_t max_frame_size() const noexcept { return inner_.max_frame_size(); }
  void send_device(const device_frame& f) { inner_.send_device(f); }
  void receive_device(void* dst, std::size_t bytes, void* after, std::span<unsigned char> head) {
    post_receive_device(dst, bytes, after);
    complete_receive_device(head);
  }
  // Pipelined as the nccl_link it wraps: the receiver posts one receive ahead.
  void post_receive_device(void* dst, std::size_t bytes, void* after) {
    inner_.post_receive_device(dst, bytes, after);
    posted_.emplace_back(dst, bytes);
  }
  void complete_receive_device(std::span<unsigned char> head) {
    inner_.complete_receive_device(head);
    const auto [dst, bytes] = posted_.front();
    posted_.pop_front();
    device_bytes += bytes;
    if (flip_->load() >= 0 && flip_->fetch_sub(1) == 0) {
      // Past the 80-byte header, inside the chunk data.
      unsigned char b = 0;
      auto* at = static_cast<unsigned char*>(dst) + bytes - 1;
      sc::throw_on_cuda_error(cudaMemcpy(&b, at, 1, cudaMemcpyDeviceToHost), "read");
      b ^= 0x5a;
      sc::throw_on_cuda_error(cudaMemcpy(at, &b, 1, cudaMemcpyHostToDevice), "write");
    }
  }
  void abort() noexcept { inner_.abort(); }
  [[nodiscard]] bool aborted() const { return inner_.aborted(); }
  std::uint64_t device_bytes = 0;

 private:
  nccl_link<inproc_transport> inner_;
  std::shared_ptr<std::atomic<long>> flip_;
  std::deque<std::pair<void*, std::size_t>> posted_;
};
static_assert(check_device_link<counting_link>);
static_assert(pipelined_device_link<counting_link>);
static_assert(pipelined_device_link<nccl_link<inproc_transport>>);
static_assert(check_device_link<nccl_link<inproc_transport>>);

// The trainer's end, shared with the test so that it can watch the link the sender holds.
class trainer_link {
 public:
  using transport_concept = transport_tag;
  using device_link_concept = device_link_tag;
  explicit trainer_link(std::shared_ptr<nccl_link<inproc_transport>> inner) : inner_(std::move(inner)) {}
  void send(std::span<const std::byte> m) { inner_->send(m); }
  bool receive(std::vector<std::byte>& m) { return inner_->receive(m); }
  void close() noexcept { inner_->close(); }
  [[nodiscard]] std::size_t max_frame_size() const noexcept { return inner_->max_frame_size(); }
  void send_device(const device_frame& f) { inner_->send_device(f); }
  void receive_device(void* dst, std::size_t bytes, void* after, std::span<unsigned char> head) { inner_->receive_device(dst, bytes, after, head); }
  void abort() noexcept { inner_->abort(); }

 private:
  std::shared_ptr<nccl_link<inproc_transport>> inner_;
};

using trainer = sync::sender<rice, fixed_bytes, trainer_link, sync::device_source>;
using gpu_receiver = sync::receiver<counting_link, sync::device_sink>;
using host_receiver = sync::receiver<counting_link>;


std::vector<tensor_view> host_views(const model_layout& layout, std::vector<std::uint16_t>& w) {
  std::vector<tensor_view> v;
  for (std::size_t t = 0; t < layout.size(); ++t) v.push_back({w.data() + layout.first_element(t), layout[t].numel(), layout[t].dtype});
  return v;
}

struct set_device {
  explicit set_device(int d) { sc::throw_on_cuda_error(cudaSetDevice(d), "cudaSetDevice"); }
};

nccl_link_options link_options(int device, std::chrono::milliseconds timeout = 10s) {
  nccl_link_options o;
  o.device = device;
  o.timeout = timeout;
  return o;
}

// Both ends of one trainer-worker pair (the communicator is made by both at once), and the trainer's end to watch.
struct pair_ends {
  trainer_link trainer_end;
  counting_link worker_end;
  std::shared_ptr<nccl_link<inproc_transport>> watch;
};
// The worker's end waits 3x longer than the trainer's (nccl_link.hpp says why).
pair_ends connect_pair(std::chrono::milliseconds timeout = 10s, std::shared_ptr<std::atomic<long>> flip = nullptr, int device = worker_gpu) {
  auto [a, b] = make_inproc_pair();
  auto worker_end = std::async(std::launch::async, [b = std::move(b), timeout, device]() mutable {
    return nccl_link<inproc_transport>::connect_receiver(std::move(b), link_options(device, 3 * timeout));
  });
  auto trainer_end = std::make_shared<nccl_link<inproc_transport>>(
      nccl_link<inproc_transport>::connect_sender(std::move(a), link_options(trainer_gpu, timeout)));
  if (!flip) flip = std::make_shared<std::atomic<long>>(-1);
  return {trainer_link(trainer_end), counting_link(worker_end.get(), flip), trainer_end};
}

// A worker on its own thread on the workers' GPU (engine_worker.hpp).
template <class Rx>
struct worker : sparsesync_test::engine_worker<Rx> {
  worker() { this->device = worker_gpu; }
};

// The trainer's weights on GPU 0 and their host twin (the reference every worker must equal).
struct trainer_weights {
  model_layout layout;
  std::vector<std::uint16_t> host = sparsesync_test::random_weights(layout.numel());
  std::mt19937_64 rng{11};
  std::unique_ptr<device_model> gpu;
  std::vector<const_tensor_view> views;
  explicit trainer_weights(model_layout l = sparsesync_test::test_layout()) : layout(std::move(l)) {
    set_device on(trainer_gpu);
    gpu = std::make_unique<device_model>(layout);
    gpu->upload(host);
    const auto v = device_views(layout, *gpu);
    views.assign(v.begin(), v.end());
  }
  void step() {
    set_device on(trainer_gpu);
    sparsesync_test::step(host, rng);
    gpu->upload(host);
  }
  // Every element changes (a version as large as the model, far beyond what NCCL buffers for a peer).
  void scramble() {
    set_device on(trainer_gpu);
    for (auto& x : host) x ^= 0x7f7f;
    gpu->upload(host);
  }
};

std::unique_ptr<trainer> make_trainer(const model_layout& layout, cudaStream_t stream, sync::sender_options opt = {}) {
  set_device on(trainer_gpu);
  opt.encode.mode = value_mode::ulp;
  sc::device_source_options so;
  so.stream = stream;
  so.frames_on_device = true;
  return std::make_unique<trainer>(layout, opt, fixed_bytes{1u << 20}, sync::device_source<rice>(sc::compiled_device_encoder_backend(so)));
}

std::unique_ptr<gpu_receiver> make_gpu_receiver(const model_layout& layout, const device_model& m, counting_link link,
                                                sc::frame_commit_mode mode, sync::receiver_options ro = {}, int device = worker_gpu) {
  set_device on(device);
  sc::device_sink_options o;
  o.commit = mode;
  return std::make_unique<gpu_receiver>(layout, sync::device_sink(sc::compiled_device_applier_backend(layout, device_views(layout, m), o)),
                                        std::move(link), ro);
}

// A T made with `device` current (its memory lives there).
template <class T, class... Args>
std::unique_ptr<T> make_on(int device, Args&&... args) {
  set_device on(device);
  return std::make_unique<T>(std::forward<Args>(args)...);
}

std::vector<std::uint16_t> download_on(int device, const device_model& m) {
  set_device on(device);
  return m.download();
}

}  // namespace

TEST_CASE("over NCCL: every version bit-identical in both commit modes, frames GPU to GPU; a host worker gets host copies") {
  trainer_weights w;
  const auto stream = make_on<stream_holder>(trainer_gpu);
  auto tx = make_trainer(w.layout, stream->s);
  const auto atomic_w = make_on<device_model>(worker_gpu, w.layout);
  const auto streamed_w = make_on<device_model>(worker_gpu, w.layout);
  std::vector<std::uint16_t> host_w(w.layout.numel());
  worker<gpu_receiver> wa, ws;
  worker<host_receiver> wh;
  {
    auto [t, r, watch] = connect_pair();
    tx->add_receiver(std::move(t));
    wa.rx = make_gpu_receiver(w.layout, *atomic_w, std::move(r), sc::frame_commit_mode::atomic);
  }
  {
    auto [t, r, watch] = connect_pair();
    tx->add_receiver(std::move(t));
    ws.rx = make_gpu_receiver(w.layout, *streamed_w, std::move(r), sc::frame_commit_mode::streamed);
  }
  {
    auto [t, r, watch] = connect_pair();
    tx->add_receiver(std::move(t));
    wh.rx = std::make_unique<host_receiver>(w.layout, host_views(w.layout, host_w), std::move(r));
  }
  wa.start();
  ws.start();
  wh.start();
  std::uint64_t patch_bytes = 0;
  for (std::uint64_t v = 1; v <= 6; ++v) {
    if (v > 1) w.step();
    const auto r = tx->publish(v, w.views);
    if (v > 1) patch_bytes += r.payload_bytes;
    CHECK(r.acknowledged == 3);
    CHECK(r.lagging == 0);
    CHECK(download_on(worker_gpu, *atomic_w) == w.host);
    CHECK(download_on(worker_gpu, *streamed_w) == w.host);
    CHECK(host_w == w.host);
  }
  tx->close();
  wa.thread.join();
  ws.thread.join();
  wh.thread.join();
  CHECK(wa.refused == 0);
  CHECK(ws.refused == 0);
  CHECK(wh.refused == 0);
  // The patches' bucket frames crossed GPU to GPU (the first version, a full transfer, through the host); the
  // host worker got every frame as host copies.
  CHECK(wa.rx->link().device_bytes > 0);
  CHECK(wa.rx->link().device_bytes < patch_bytes);  // the prologue and closing header travel on the control link
  CHECK(wa.rx->link().device_bytes > patch_bytes * 9 / 10);
  CHECK(ws.rx->link().device_bytes == wa.rx->link().device_bytes);
  CHECK(wh.rx->link().device_bytes == 0);
}

TEST_CASE("over NCCL: a device frame damaged on the way is refused, the weights untouched, and healed by a full transfer") {
  for (auto mode : {sc::frame_commit_mode::atomic, sc::frame_commit_mode::streamed}) {
    CAPTURE(static_cast<int>(mode));
    trainer_weights w;
    const auto stream = make_on<stream_holder>(trainer_gpu);
    auto tx = make_trainer(w.layout, stream->s);
    const auto ww = make_on<device_model>(worker_gpu, w.layout);
    auto flip = std::make_shared<std::atomic<long>>(-1);
    auto [t, r, watch] = connect_pair(10s, flip);
    tx->add_receiver(std::move(t));
    auto rx = make_gpu_receiver(w.layout, *ww, std::move(r), mode);
    auto next = [&] {
      set_device on(worker_gpu);
      return rx->next();
    };
    for (std::uint64_t v = 1; v <= 2; ++v) {
      if (v > 1) w.step();
      auto pub = std::async(std::launch::async, [&] { return tx->publish(v, w.views); });
      REQUIRE(next());
      CHECK(pub.get().acknowledged == 1);
    }
    const auto held = download_on(worker_gpu, *ww);
    w.step();
    flip->store(1);  // the second device frame of version 3
    auto pub = std::async(std::launch::async, [&] { return tx->publish(3, w.views); });
    CHECK_THROWS_AS(next(), error);
    CHECK(download_on(worker_gpu, *ww) == held);  // refused: version 2, bit for bit
    const auto healed = next();                 // the sender follows the nack with a full transfer
    REQUIRE(healed);
    CHECK(healed->full);
    CHECK(healed->version == 3);
    CHECK(download_on(worker_gpu, *ww) == w.host);
    pub.get();
    w.step();
    auto pub4 = std::async(std::launch::async, [&] { return tx->publish(4, w.views); });
    const auto v4 = next();
    REQUIRE(v4);
    CHECK_FALSE(v4->full);
    CHECK(pub4.get().acknowledged == 1);
    CHECK(download_on(worker_gpu, *ww) == w.host);
    tx->close();
    CHECK_FALSE(next());
  }
}

TEST_CASE("over NCCL: a late worker gets one full transfer, a restarted one with its weights only patches") {
  trainer_weights w;
  const auto stream = make_on<stream_holder>(trainer_gpu);
  auto tx = make_trainer(w.layout, stream->s);
  const auto first_w = make_on<device_model>(worker_gpu, w.layout);
  const auto late_w = make_on<device_model>(worker_gpu, w.layout);
  worker<gpu_receiver> first;
  {
    auto [t, r, watch] = connect_pair();
    tx->add_receiver(std::move(t));
    first.rx = make_gpu_receiver(w.layout, *first_w, std::move(r), sc::frame_commit_mode::atomic);
  }
  first.start();
  for (std::uint64_t v = 1; v <= 3; ++v) {
    if (v > 1) w.step();
    CHECK(tx->publish(v, w.views).acknowledged == 1);
  }
  // The late worker is driven from this thread, so that it can "die" between versions and come back.
  std::unique_ptr<gpu_receiver> late;
  {
    auto [t, r, watch] = connect_pair();
    tx->add_receiver(std::move(t));
    late = make_gpu_receiver(w.layout, *late_w, std::move(r), sc::frame_commit_mode::streamed);
  }
  const auto next = [](gpu_receiver& rx) {
    set_device on(worker_gpu);
    return rx.next();
  };
  const auto caught_up = next(*late);  // the full transfer of version 3, encoded on the trainer's GPU
  REQUIRE(caught_up);
  CHECK(caught_up->full);
  CHECK(caught_up->version == 3);
  CHECK(download_on(worker_gpu, *late_w) == w.host);
  w.step();
  {
    auto pub = std::async(std::launch::async, [&] { return tx->publish(4, w.views); });
    const auto v4 = next(*late);
    REQUIRE(v4);
    CHECK_FALSE(v4->full);
    CHECK(pub.get().acknowledged == 2);
  }
  CHECK(download_on(worker_gpu, *late_w) == w.host);

  // It "restarts": its receiver and link go (the trainer's session ends at its next send), and a new one comes
  // with the weights it held (a new process would restore them from disk).
  late.reset();
  {
    auto [t, r, watch] = connect_pair();
    tx->add_receiver(std::move(t));
    sync::receiver_options ro;
    ro.has_version = true;
    ro.version = 4;
    late = make_gpu_receiver(w.layout, *late_w, std::move(r), sc::frame_commit_mode::atomic, ro);
  }
  for (std::uint64_t v = 5; v <= 6; ++v) {
    w.step();
    auto pub = std::async(std::launch::async, [&] { return tx->publish(v, w.views); });
    const auto got = next(*late);
    REQUIRE(got);
    CHECK_FALSE(got->full);  // patches only: the restored version was vouched for by its checksum
    CHECK(got->version == v);
    CHECK(pub.get().acknowledged == 2);
    CHECK(download_on(worker_gpu, *late_w) == w.host);
  }
  const auto sessions = tx->receivers();
  REQUIRE(!sessions.empty());
  CHECK(sessions.back().full_transfers == 0);  // the restarted worker's session (the newest)
  CHECK(sessions.back().version == 6);
  CHECK(first.fulls == 1);  // version 1, the first publish
  tx->close();
  CHECK_FALSE(next(*late));
}

TEST_CASE("over NCCL: a worker that stops receiving mid-version is not waited for; its link aborts within the timeout") {
  // 64 Mi elements. The stuck worker never posts a receive for version 3, so its link never gets a credit and no
  // send of it is enqueued; the good worker's version must not wait for it. (A version that changes every element
  // has a case of its own below: its dense rice frames take seconds to encode and verify on the GPU.)
  trainer_weights w(model_layout({{"big", dtype::bf16, {8192, 8192}}}));
  const auto stream = make_on<stream_holder>(trainer_gpu);
  sync::sender_options so;
  so.lag_grace = 500ms;
  auto tx = make_trainer(w.layout, stream->s, so);
  // With more than two GPUs the stuck worker has a GPU of its own; with two it shares the good worker's.
  const int stuck_gpu = gpu_count > 2 ? gpu_count - 2 : worker_gpu;
  MESSAGE("good worker on GPU " << worker_gpu << ", stuck worker on GPU " << stuck_gpu);
  const auto good_w = make_on<device_model>(worker_gpu, w.layout);
  const auto stuck_w = make_on<device_model>(stuck_gpu, w.layout);
  worker<gpu_receiver> good;
  std::shared_ptr<nccl_link<inproc_transport>> good_trainer_end;
  {
    auto [t, r, watch] = connect_pair(2s);
    good_trainer_end = watch;
    tx->add_receiver(std::move(t));
    good.rx = make_gpu_receiver(w.layout, *good_w, std::move(r), sc::frame_commit_mode::atomic);
  }
  good.start();
  // The stuck worker applies versions 1 and 2 on this thread, then stops reading (alive, link open).
  std::unique_ptr<gpu_receiver> stuck;
  std::shared_ptr<nccl_link<inproc_transport>> stuck_trainer_end;
  {
    auto [t, r, watch] = connect_pair(2s, nullptr, stuck_gpu);
    tx->add_receiver(std::move(t));
    stuck = make_gpu_receiver(w.layout, *stuck_w, std::move(r), sc::frame_commit_mode::atomic, {}, stuck_gpu);
    stuck_trainer_end = watch;
  }
  for (std::uint64_t v = 1; v <= 2; ++v) {
    if (v > 1) w.step();
    auto pub = std::async(std::launch::async, [&] { return tx->publish(v, w.views); });
    {
      set_device on(stuck_gpu);
      REQUIRE(stuck->next());
    }
    CHECK(pub.get().acknowledged == 2);
  }
  w.step();
  const auto t0 = std::chrono::steady_clock::now();
  const auto r3 = tx->publish(3, w.views);
  const double s3 = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("version 3 with a stuck worker: publish " << s3 * 1e3 << " ms");
  // What each session saw (the record of a failure, if any: bench/results/gpu-test-runs/).
  for (const auto& st : tx->receivers())
    MESSAGE("session " << st.id << ": connected " << st.connected << ", version " << st.version << ", lagging " << st.lagging
                       << ", last error: " << (st.last_error.empty() ? "(none)" : st.last_error));
  MESSAGE("good link, trainer end: aborted " << good_trainer_end->aborted() << ", frames sent " << good_trainer_end->stats().frames_sent
                                             << ", deferred NCCL calls " << good_trainer_end->stats().deferred_calls
                                             << ", its ncclCommAbort took " << good_trainer_end->stats().abort_ms << " ms (-1: none)");
  CHECK(r3.acknowledged == 1);
  CHECK(r3.marked_lagging == 1);
  if (good.failed) MESSAGE("the good worker stopped: " << good.why);
  CHECK(s3 < 10.0);  // the lag bound (0.5 s, or twice the good worker's time), not the stuck worker
  CHECK(download_on(worker_gpu, *good_w) == w.host);
  // No one receives the stuck worker's frames: 2 s without progress and the trainer's end of its link aborts
  // (its sends leave the GPU); the good worker goes on meanwhile.
  const auto t_stuck = std::chrono::steady_clock::now();
  for (std::uint64_t v = 4; v <= 5; ++v) {
    w.step();
    CHECK(tx->publish(v, w.views).acknowledged == 1);
    CHECK(download_on(worker_gpu, *good_w) == w.host);
  }
  while (!stuck_trainer_end->aborted() && std::chrono::steady_clock::now() - t_stuck < 10s) std::this_thread::sleep_for(10ms);
  CHECK(stuck_trainer_end->aborted());
  MESSAGE("the stuck worker's link aborted " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3
                                             << " ms after version 3 was published (timeout 2 s); its ncclCommAbort took "
                                             << stuck_trainer_end->stats().abort_ms << " ms");
  // The stuck worker, reading again, finds its device path dead within its own timeout (6 s): an error, not a
  // hang; its weights hold version 2 still (nothing of version 3 was written).
  const auto t_read = std::chrono::steady_clock::now();
  {
    set_device on(stuck_gpu);
    CHECK_THROWS(stuck->next());
  }
  CHECK(std::chrono::steady_clock::now() - t_read < 12s);
  CHECK(stuck->version() == 2);
  // Gone: its session ends, and the sender holds the good worker only.
  stuck.reset();
  bool ended = false;
  for (int i = 0; i < 500 && !ended; ++i) {
    for (const auto& s : tx->receivers()) ended = ended || !s.connected;
    std::this_thread::sleep_for(10ms);
  }
  CHECK(ended);
  w.step();
  CHECK(tx->publish(6, w.views).acknowledged == 1);
  CHECK(download_on(worker_gpu, *good_w) == w.host);
  tx->close();
}

TEST_CASE("over NCCL: a version that changes every element, far beyond NCCL's buffers, arrives bit-identical (atomic and streamed)") {
  // The stalled-worker case above, without the stalled worker: it tells a failure of large versions on the device
  // path apart from the effect of a stalled peer.
  for (const auto mode : {sc::frame_commit_mode::atomic, sc::frame_commit_mode::streamed}) {
    CAPTURE(mode == sc::frame_commit_mode::atomic ? "atomic" : "streamed");
    trainer_weights w(model_layout({{"big", dtype::bf16, {8192, 8192}}}));
    const auto stream = make_on<stream_holder>(trainer_gpu);
    auto tx = make_trainer(w.layout, stream->s);
    const auto good_w = make_on<device_model>(worker_gpu, w.layout);
    worker<gpu_receiver> good;
    {
      auto [t, r, watch] = connect_pair(2s);
      tx->add_receiver(std::move(t));
      good.rx = make_gpu_receiver(w.layout, *good_w, std::move(r), mode);
    }
    good.start();
    for (std::uint64_t v = 1; v <= 4; ++v) {
      if (v == 2) w.step();
      if (v == 3) w.scramble();
      if (v == 4) w.step();
      const auto t0 = std::chrono::steady_clock::now();
      const auto r = tx->publish(v, w.views);
      MESSAGE("version " << v << ": " << r.acknowledged << " acknowledged, " << r.payload_bytes << " bytes, "
                         << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3 << " ms");
      for (const auto& st : tx->receivers())
        if (!st.last_error.empty()) MESSAGE("session " << st.id << ": " << st.last_error);
      CHECK(r.acknowledged == 1);
      CHECK(download_on(worker_gpu, *good_w) == w.host);
    }
    if (good.failed) MESSAGE("the worker stopped: " << good.why);
    tx->close();
  }
}
