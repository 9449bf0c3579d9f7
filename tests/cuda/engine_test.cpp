// The one sync engine with weights on the GPU: sync::sender with a device_source and sync::receiver with a
// device_sink (and host sinks on the same sender), over the in-process transport on one GPU. Checked: every
// version leaves every worker bit-identical to the trainer and acknowledged with the verified checksum; the
// GPU engine's versions have the host engine's sizes and checksums; a late worker and a worker whose weights
// hold no version get full transfers encoded on the GPU; a restarted worker that restored the right version
// gets patches; a corrupted bucket is refused (nack) with the weights untouched in both commit modes and
// healed by a full transfer; the snapshot in pinned host memory keeps no GPU copy of the model. Exits 77
// (CTest: skipped) without a CUDA device. Plain C++: the GPU backends come compiled from sparsesync::cuda_engine
// (the header-only route, device_engine.cuh, is what that library and bench/gpu/engine_bench.cu compile).
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/inproc.hpp>

#include <doctest/doctest.h>

#include "engine_worker.hpp"
#include "gpu_sync_fixtures.hpp"
#include "tampering_link.hpp"
#include "require_gpu.cuh"  // host code only

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

using namespace sparsesync;
namespace sc = sparsesync::cuda;
using sparsesync_test::device_model;
using sparsesync_test::device_views;
using sparsesync_test::stream_holder;

namespace engine_test_support {
using tampering_link = sparsesync_test::tampering_link<sparsesync::inproc_transport>;
}  // namespace engine_test_support

namespace {

using engine_test_support::tampering_link;
const int gpu_count = sparsesync_test::require_gpu_or_skip();

using device_sender = sync::sender<rice, fixed_bytes, tampering_link, sync::device_source>;
using host_sender = sync::sender<rice, fixed_bytes, inproc_transport>;
using device_receiver = sync::receiver<tampering_link, sync::device_sink>;
using host_receiver = sync::receiver<tampering_link>;


std::vector<const_tensor_view> const_views(const std::vector<tensor_view>& v) { return {v.begin(), v.end()}; }

std::vector<tensor_view> host_views(const model_layout& layout, std::vector<std::uint16_t>& w) {
  std::vector<tensor_view> v;
  for (std::size_t t = 0; t < layout.size(); ++t) v.push_back({w.data() + layout.first_element(t), layout[t].numel(), layout[t].dtype});
  return v;
}

template <class Rx>
using worker = sparsesync_test::engine_worker<Rx>;

struct link_pair {
  tampering_link sender_end, receiver_end;
  std::shared_ptr<std::atomic<long>> flip;
};
link_pair make_links() {
  auto [a, b] = make_inproc_pair();
  auto flip = std::make_shared<std::atomic<long>>(-1);
  auto never = std::make_shared<std::atomic<long>>(-1);
  return {tampering_link(std::move(a), never), tampering_link(std::move(b), flip), flip};
}

// A backend behind a decorator that forwards what a wrapper written before session 25 would (a timing or logging
// layer, as engine_nccl_bench's): everything but version_written(). The deferred snapshot advance (host
// snapshot) that version_written() starts must still be done before publish() returns: the caller then changes
// the weights it reads.
class decorated_backend final : public sync::device_encoder_backend {
 public:
  explicit decorated_backend(std::unique_ptr<sync::device_encoder_backend> inner) : inner_(std::move(inner)) {}
  void prepare(const model_layout& layout, std::vector<bucket_plan> plans, encoder_id encoder, const encode_options& enc) override {
    inner_->prepare(layout, std::move(plans), encoder, enc);
  }
  [[nodiscard]] bool has_version() const override { return inner_->has_version(); }
  sync::source_totals encode_version(std::span<const const_tensor_view> weights, const sync::frame_emitter& emit) override {
    return inner_->encode_version(weights, emit);
  }
  void encode_full(const sync::frame_emitter& emit) override { inner_->encode_full(emit); }
  void invalidate() override { inner_->invalidate(); }
  [[nodiscard]] sync::device_memory_report memory() const override { return inner_->memory(); }
  double settle() override { return inner_->settle(); }

 private:
  std::unique_ptr<sync::device_encoder_backend> inner_;
};

// The trainer of every case: the test layout's random weights on the GPU and a device_source sender over them
// (rice, ulp values, 1 MiB buckets, the snapshot where `place` says; the backend decorated if asked). Cases bind
// its members by name.
struct gpu_trainer {
  model_layout layout = sparsesync_test::test_layout();
  stream_holder stream;
  device_model model{layout};
  std::vector<std::uint16_t> weights = sparsesync_test::random_weights(layout.numel());
  sync::sender_options opt = ulp_options();
  device_sender tx;
  // `enc`: the encoder, chosen at run time (device_source's second constructor); rice is also the type's.
  explicit gpu_trainer(sync::snapshot_place place = sync::snapshot_place::device, bool decorated = false, encoder_id enc = encoder_id::rice)
      : tx(layout, opt, fixed_bytes{1u << 20}, sync::device_source<rice>(backend(source_options(stream.s, place), decorated), enc)) {
    model.upload(weights);
  }
  static std::unique_ptr<sync::device_encoder_backend> backend(const sc::device_source_options& o, bool decorated) {
    auto b = sc::compiled_device_encoder_backend(o);
    if (decorated) return std::make_unique<decorated_backend>(std::move(b));
    return b;
  }
  static sync::sender_options ulp_options() {
    sync::sender_options o;
    o.encode.mode = value_mode::ulp;
    return o;
  }
  static sc::device_source_options source_options(cudaStream_t s, sync::snapshot_place place) {
    sc::device_source_options o;
    o.stream = s;
    o.snapshot = place;
    return o;
  }
};

template <class E = rice>
void run_fan_out(sync::snapshot_place place, bool decorated = false) {
  gpu_trainer t(place, decorated, E::id);
  [[maybe_unused]] auto& [layout, stream, trainer, weights, opt, tx] = t;
  REQUIRE(tx.source().encoder() == E::id);
  // The host engine with E on the same weights: the reference sizes and checksums.
  sync::sender<E, fixed_bytes, inproc_transport> host_tx(layout, opt, fixed_bytes{1u << 20});
  auto [href_a, href_b] = make_inproc_pair();
  host_tx.add_receiver(std::move(href_a));
  std::vector<std::uint16_t> host_ref(layout.numel());
  sync::receiver<inproc_transport> host_ref_rx(layout, host_views(layout, host_ref), std::move(href_b));
  std::thread host_ref_thread([&] {
    while (host_ref_rx.next()) {
    }
  });

  // Two GPU workers (atomic and streamed commit) and one host worker on the same sender.
  device_model gpu_atomic(layout), gpu_streamed(layout);
  std::vector<std::uint16_t> host_worker(layout.numel());
  worker<device_receiver> wa, ws;
  worker<host_receiver> wh;
  {
    auto l = make_links();
    tx.add_receiver(std::move(l.sender_end));
    wa.rx = std::make_unique<device_receiver>(layout, sync::device_sink(sc::compiled_device_applier_backend(layout, device_views(layout, gpu_atomic), {})), std::move(l.receiver_end));
  }
  {
    auto l = make_links();
    tx.add_receiver(std::move(l.sender_end));
    sc::device_sink_options o;
    o.commit = sc::frame_commit_mode::streamed;
    ws.rx = std::make_unique<device_receiver>(layout, sync::device_sink(sc::compiled_device_applier_backend(layout, device_views(layout, gpu_streamed), o)),
                                              std::move(l.receiver_end));
  }
  {
    auto l = make_links();
    tx.add_receiver(std::move(l.sender_end));
    wh.rx = std::make_unique<host_receiver>(layout, host_views(layout, host_worker), std::move(l.receiver_end));
  }
  wa.start();
  ws.start();
  wh.start();

  std::mt19937_64 rng(11);
  const auto trainer_views = const_views(device_views(layout, trainer));
  for (std::uint64_t v = 1; v <= 6; ++v) {
    if (v > 1) {
      sparsesync_test::step(weights, rng);
      trainer.upload(weights);
    }
    const auto r = tx.publish(v, trainer_views);
    std::vector<const_tensor_view> hv;
    for (std::size_t t = 0; t < layout.size(); ++t) hv.push_back({weights.data() + layout.first_element(t), layout[t].numel(), layout[t].dtype});
    const auto hr = host_tx.publish(v, hv);
    CHECK(r.acknowledged == 3);
    CHECK(r.lagging == 0);
    CHECK(r.payload_bytes == hr.payload_bytes);      // the same encoding, byte count for byte count
    CHECK(r.target_checksum == hr.target_checksum);  // and the same content checksum
    CHECK(r.changed == hr.changed);
    CHECK(gpu_atomic.download() == weights);
    CHECK(gpu_streamed.download() == weights);
    CHECK(host_worker == weights);
    for (const auto& s : tx.receivers()) {
      CHECK(s.version == v);
      CHECK(s.full_transfers == 0);
    }
  }
  const auto mem = tx.source().memory();
  if (place == sync::snapshot_place::device) {
    CHECK(mem.snapshot_device == layout.numel() * 2);
    CHECK(mem.snapshot_host == 0);
  } else {
    CHECK(mem.snapshot_device == 0);
    CHECK(mem.snapshot_host == layout.numel() * 2);
  }
  tx.close();
  host_tx.close();
  host_ref_thread.join();
  CHECK(host_ref == weights);
  CHECK(wa.refused == 0);
  CHECK(ws.refused == 0);
  CHECK(wh.refused == 0);
}

}  // namespace

TEST_CASE("GPU trainer, GPU and host workers: every version bit-identical, acknowledged, sized as the host engine's") {
  run_fan_out(sync::snapshot_place::device);
}

TEST_CASE("the snapshot in pinned host memory: the same versions, no GPU copy of the model") {
  run_fan_out(sync::snapshot_place::host_pinned);
}

TEST_CASE("the encoder chosen at run time (entropy, as the Python Publisher's encoder= does): the host engine's bytes, every worker bit-identical") {
  run_fan_out<entropy>(sync::snapshot_place::device);
}

TEST_CASE("a decorated backend that does not forward version_written: the deferred advance still done within publish()") {
  run_fan_out(sync::snapshot_place::host_pinned, true);
}

TEST_CASE("late and restarted GPU workers: full transfers encoded on the GPU, patches for a restored version") {
  gpu_trainer t;
  [[maybe_unused]] auto& [layout, stream, trainer, weights, opt, tx] = t;
  const auto trainer_views = const_views(device_views(layout, trainer));
  std::mt19937_64 rng(5);
  for (std::uint64_t v = 1; v <= 3; ++v) {
    if (v > 1) sparsesync_test::step(weights, rng);
    trainer.upload(weights);
    (void)tx.publish(v, trainer_views);  // nobody listens yet
  }

  // Joins late, with garbage in its buffers: a full transfer of version 3, from the GPU snapshot.
  device_model late(layout);
  late.upload(std::vector<std::uint16_t>(layout.numel(), 0x7fc0));
  worker<device_receiver> wl;
  {
    auto l = make_links();
    tx.add_receiver(std::move(l.sender_end));
    wl.rx = std::make_unique<device_receiver>(layout, sync::device_sink(sc::compiled_device_applier_backend(layout, device_views(layout, late), {})), std::move(l.receiver_end));
  }
  wl.start();
  REQUIRE(tx.wait_for_receivers(1, std::chrono::seconds(60)));
  CHECK(late.download() == weights);
  CHECK(wl.fulls == 1);

  // Restarted: its weights restored from elsewhere hold version 3; the handshake's checksum (computed on the
  // GPU) proves it, so it gets patches, not a full transfer.
  device_model restored(layout);
  restored.upload(weights);
  worker<device_receiver> wr;
  {
    auto l = make_links();
    tx.add_receiver(std::move(l.sender_end));
    sync::receiver_options ro;
    ro.has_version = true;
    ro.version = 3;
    wr.rx = std::make_unique<device_receiver>(layout, sync::device_sink(sc::compiled_device_applier_backend(layout, device_views(layout, restored), {})), std::move(l.receiver_end), ro);
  }
  wr.start();
  REQUIRE(tx.wait_for_receivers(2, std::chrono::seconds(60)));
  for (std::uint64_t v = 4; v <= 5; ++v) {
    sparsesync_test::step(weights, rng);
    trainer.upload(weights);
    const auto r = tx.publish(v, trainer_views);
    CHECK(r.acknowledged == 2);
    CHECK(late.download() == weights);
    CHECK(restored.download() == weights);
  }
  const auto st = tx.receivers();
  REQUIRE(st.size() == 2);
  CHECK(st[0].full_transfers == 1);
  CHECK(st[1].full_transfers == 0);
  CHECK(wr.fulls == 0);
  tx.close();
}

TEST_CASE("a corrupted bucket: refused with the weights untouched in both commit modes, then healed by a full transfer") {
  for (const auto mode : {sc::frame_commit_mode::atomic, sc::frame_commit_mode::streamed}) {
    CAPTURE(static_cast<int>(mode));
    gpu_trainer t;
    [[maybe_unused]] auto& [layout, stream, trainer, weights, opt, tx] = t;
    REQUIRE(fixed_bytes{1u << 20}.plan(layout, opt.encode.log2_chunk).size() >= 3);
    device_model w(layout);
    auto l = make_links();
    auto flip = l.flip;
    tx.add_receiver(std::move(l.sender_end));
    sc::device_sink_options o;
    o.commit = mode;
    device_receiver rx(layout, sync::device_sink(sc::compiled_device_applier_backend(layout, device_views(layout, w), o)), std::move(l.receiver_end));
    const auto trainer_views = const_views(device_views(layout, trainer));

    // The worker's side runs here, the trainer's publish on a thread (it returns once the worker acknowledged).
    sync::publish_report report;
    auto publish = [&](std::uint64_t v) { return std::thread([&, v] { report = tx.publish(v, trainer_views); }); };
    auto t1 = publish(1);
    auto first = rx.next();
    t1.join();
    REQUIRE(first);
    CHECK(first->full);
    CHECK(report.acknowledged == 1);
    const auto v1 = weights;
    CHECK(w.download() == v1);

    std::mt19937_64 rng(3);
    sparsesync_test::step(weights, rng);
    trainer.upload(weights);
    flip->store(2);  // the third bucket of version 2 arrives with a flipped byte
    auto t2 = publish(2);
    CHECK_THROWS_AS(rx.next(), error);
    CHECK(w.download() == v1);  // refused: not a bit changed (streamed mode: the written buckets rolled back)
    CHECK(rx.has_version());  // the worker still holds version 1, verified
    CHECK(rx.version() == 1);
    auto healed = rx.next();  // the sender heard the nack: a full transfer of version 2, from the GPU
    t2.join();
    REQUIRE(healed);
    CHECK(healed->full);
    CHECK(healed->version == 2);
    CHECK(w.download() == weights);
    CHECK(report.acknowledged == 1);
    const auto st = tx.receivers();
    REQUIRE(st.size() == 1);
    CHECK(st[0].full_transfers == 1);
    CHECK(st[0].version == 2);
    CHECK(st[0].last_error.find("refused version 2") != std::string::npos);
    tx.close();
  }
}

TEST_CASE("versions where some buckets, or all, have no changes: every GPU worker applies them (atomic and streamed)") {
  // The Python cupy case (bench/results/gpu-test-runs/python-cupy-empty-bucket-2340db9.log) was refused as
  // "non-canonical: bucket 1 refused on the GPU" exactly when one bucket of the version had no change.
  gpu_trainer t;
  [[maybe_unused]] auto& [layout, stream, trainer, weights, opt, tx] = t;
  device_model gpu_atomic(layout), gpu_streamed(layout);
  worker<device_receiver> wa, ws;
  for (auto* w : {&wa, &ws}) {
    auto l = make_links();
    tx.add_receiver(std::move(l.sender_end));
    sc::device_sink_options o;
    o.commit = w == &wa ? sc::frame_commit_mode::atomic : sc::frame_commit_mode::streamed;
    w->rx = std::make_unique<device_receiver>(layout, sync::device_sink(sc::compiled_device_applier_backend(layout, device_views(layout, w == &wa ? gpu_atomic : gpu_streamed), o)),
                                             std::move(l.receiver_end));
    w->start();
  }
  const auto trainer_views = const_views(device_views(layout, trainer));
  const std::size_t bucket = (1u << 20) / 2;  // elements per 1 MiB bucket of BF16
  std::mt19937_64 rng(3);
  for (std::uint64_t v = 1; v <= 5; ++v) {
    // 2: only the first bucket changes; 3: only the last; 4: nothing changes; 5: every other bucket.
    for (std::size_t i = 0; v > 1 && i < weights.size(); ++i) {
      const std::size_t b = i / bucket, last = (weights.size() - 1) / bucket;
      const bool in = v == 2 ? b == 0 : v == 3 ? b == last : v == 5 ? b % 2 == 1 : false;
      if (in && rng() % 50 == 0) weights[i] = static_cast<std::uint16_t>(weights[i] + 1);
    }
    trainer.upload(weights);
    const auto r = tx.publish(v, trainer_views);
    CAPTURE(v);
    for (const auto& s : tx.receivers())
      if (!s.last_error.empty()) MESSAGE("version " << v << ", session " << s.id << ": " << s.last_error);
    CHECK(r.acknowledged == 2);
    CHECK(gpu_atomic.download() == weights);
    CHECK(gpu_streamed.download() == weights);
  }
  tx.close();
  CHECK(wa.refused == 0);
  CHECK(ws.refused == 0);
}
