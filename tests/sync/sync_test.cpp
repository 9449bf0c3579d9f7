// The sync engine over the in-process transport: fan-out, atomic versions, catch-up, refusals.
#include "../core/test_models.hpp"
#include "tampering_link.hpp"

#include <doctest/doctest.h>
#include <sparsesync/sync/device_weights.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/relay.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/inproc.hpp>

#include <atomic>
#include <map>
#include <set>
#include <thread>

using namespace sparsesync;
using namespace sparsesync::test;
using sync_sender = sync::sender<auto_encoder, fixed_bytes, inproc_transport>;
using sync_receiver = sync::receiver<inproc_transport>;

namespace {

model_layout small_layout() {
  return model_layout({{"emb", dtype::bf16, {64, 257}}, {"ln", dtype::bf16, {257}}, {"w", dtype::bf16, {257, 300}}, {"s", dtype::f32, {99}}});
}

std::uint64_t checksum_of(const host_model& m) {
  std::uint64_t sum = 0;
  for (std::size_t t = 0; t < m.layout.size(); ++t)
    for (std::uint64_t i = 0; i < m.layout[t].numel(); ++i) sum += element_hash(m.layout.first_element(t) + i, m.get(t, i));
  return sum;
}

// A rollout worker: a receiver thread applying versions, and a reader thread that checks it only ever sees
// complete versions (content checksum equal to one the trainer published).
struct worker {
  host_model weights;
  std::unique_ptr<sync_receiver> rx;
  std::thread applier, reader;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> applied{0}, fulls{0}, torn{0}, reads{0};

  worker(const model_layout& layout, inproc_transport link, sync::receiver_options opt = {}, const host_model* initial = nullptr)
      : weights(initial ? *initial : host_model(layout)) {
    auto views = weights.mutable_views();
    rx = std::make_unique<sync_receiver>(layout, views, std::move(link), opt);
  }
  void start(const std::set<std::uint64_t>* valid, std::mutex* valid_mutex) {
    applier = std::thread([this] {
      try {
        while (auto v = rx->next()) {
          ++applied;
          if (v->full) ++fulls;
        }
      } catch (const std::exception& e) {
        MESSAGE("receiver stopped: " << e.what());
      }
    });
    reader = std::thread([this, valid, valid_mutex] {
      while (!stop) {
        std::shared_lock lock(rx->weights_mutex());
        if (!rx->has_version()) continue;
        const auto sum = checksum_of(weights);
        std::lock_guard g(*valid_mutex);
        if (!valid->count(sum)) ++torn;
        ++reads;
      }
    });
  }
  void join() {
    stop = true;
    if (applier.joinable()) applier.join();
    if (reader.joinable()) reader.join();
  }
};

}  // namespace

TEST_CASE("one trainer, four receivers, many versions: all bit-identical, never a torn version") {
  const auto layout = small_layout();
  host_model trainer(layout);
  fill_random(trainer, 1);
  sync::sender_options so;
  so.encode.log2_chunk = 10;
  sync_sender tx(layout, so, fixed_bytes{16384});
  std::set<std::uint64_t> valid;
  std::mutex valid_mutex;
  std::vector<std::unique_ptr<worker>> workers;
  for (int i = 0; i < 4; ++i) {
    auto [a, b] = make_inproc_pair();
    tx.add_receiver(std::move(b));
    workers.push_back(std::make_unique<worker>(layout, std::move(a)));
    workers.back()->start(&valid, &valid_mutex);
  }
  REQUIRE(tx.wait_for_receivers(4, std::chrono::seconds(20)));
  for (std::uint64_t v = 1; v <= 12; ++v) {
    if (v > 1) perturb_ulp(trainer, 0.01, v);
    {
      std::lock_guard g(valid_mutex);
      valid.insert(checksum_of(trainer));
    }
    const auto views = trainer.views();
    const auto rep = tx.publish(v, views);
    CHECK(rep.acknowledged == 4);
    CHECK(rep.lagging == 0);
    CHECK(rep.target_checksum == checksum_of(trainer));
    if (v > 1) CHECK(rep.payload_bytes < layout.bytes() / 4);  // a patch, not the dense weights
    for (auto& w : workers) {
      std::shared_lock lock(w->rx->weights_mutex());
      REQUIRE(w->rx->version() == v);
      REQUIRE(w->weights == trainer);
    }
  }
  tx.close();
  for (auto& w : workers) {
    w->join();
    CHECK(w->applied == 12);
    CHECK(w->fulls == 1);  // the first version only
    CHECK(w->torn == 0);
    CHECK(w->reads > 0);
  }
}

TEST_CASE("a sender told its link's speed sends entropy where it pays (auto); its receivers stay bit-identical") {
  // Two senders of the same weight-like versions, one over a stated 0.1 Gb/s link to GPU receivers
  // (format/link_cost.hpp): its patches are smaller, and its receiver, applying entropy buckets onto the weights
  // the engine keeps (the base they need), ends where the trainer is.
  const model_layout layout({{"w", dtype::bf16, {300000}}, {"b", dtype::bf16, {40000}}});
  host_model trainer(layout);
  fill_normal_bf16(trainer, 7);
  sync::sender_options slow;
  slow.encode.link = link_cost::gigabits(0.1);
  sync_sender tx_link(layout, slow, fixed_bytes{1 << 18}), tx_plain(layout, {}, fixed_bytes{1 << 18});
  std::set<std::uint64_t> valid;
  std::mutex valid_mutex;
  auto [a, b] = make_inproc_pair();
  tx_link.add_receiver(std::move(b));
  worker linked(layout, std::move(a));
  auto [c, d] = make_inproc_pair();
  tx_plain.add_receiver(std::move(d));
  worker plain(layout, std::move(c));
  linked.start(&valid, &valid_mutex);
  plain.start(&valid, &valid_mutex);
  REQUIRE(tx_link.wait_for_receivers(1, std::chrono::seconds(20)));
  REQUIRE(tx_plain.wait_for_receivers(1, std::chrono::seconds(20)));
  for (std::uint64_t v = 1; v <= 4; ++v) {
    if (v > 1) step_weightlike(trainer, 0.01, 40 + v);
    {
      std::lock_guard g(valid_mutex);
      valid.insert(checksum_of(trainer));
    }
    const auto views = trainer.views();
    const auto r_link = tx_link.publish(v, views);
    const auto r_plain = tx_plain.publish(v, views);
    CHECK(r_link.acknowledged == 1);
    CHECK(r_plain.acknowledged == 1);
    CHECK(r_link.target_checksum == r_plain.target_checksum);
    if (v > 1) {
      CHECK(r_link.changed == r_plain.changed);
      CHECK(r_link.payload_bytes < r_plain.payload_bytes);
    }
    std::shared_lock lock(linked.rx->weights_mutex());
    REQUIRE(linked.weights == trainer);
  }
  tx_link.close();
  tx_plain.close();
  linked.join();
  plain.join();
  CHECK(linked.applied == 4);
  CHECK(linked.torn == 0);
  CHECK(plain.weights == trainer);
}

TEST_CASE("host_source: an encoder chosen at run time encodes every bucket; receivers stay bit-identical") {
  // Three senders of the same versions: auto (Sel), and entropy and bitmap chosen at run time through the same
  // sender type. entropy's patches are smaller than auto's (no link stated: auto leaves entropy out), bitmap's
  // carry a bit for every element; each receiver ends where the trainer is.
  const model_layout layout({{"w", dtype::bf16, {300000}}, {"b", dtype::bf16, {40000}}});
  host_model trainer(layout);
  fill_normal_bf16(trainer, 11);
  const auto with = [&](std::optional<encoder_id> id) {
    return std::make_unique<sync_sender>(layout, sync::sender_options{}, fixed_bytes{1 << 18}, sync_sender::source_type(id));
  };
  std::vector<std::unique_ptr<sync_sender>> tx;
  tx.push_back(with(std::nullopt));
  tx.push_back(with(encoder_id::entropy));
  tx.push_back(with(encoder_id::bitmap));
  CHECK_FALSE(tx[0]->source().encoder().has_value());
  CHECK(tx[1]->source().encoder() == encoder_id::entropy);
  std::set<std::uint64_t> valid;
  std::mutex valid_mutex;
  std::vector<std::unique_ptr<worker>> workers;
  for (auto& t : tx) {
    auto [a, b] = make_inproc_pair();
    t->add_receiver(std::move(b));
    workers.push_back(std::make_unique<worker>(layout, std::move(a)));
    workers.back()->start(&valid, &valid_mutex);
    REQUIRE(t->wait_for_receivers(1, std::chrono::seconds(20)));
  }
  for (std::uint64_t v = 1; v <= 3; ++v) {
    if (v > 1) step_weightlike(trainer, 0.01, 60 + v);
    {
      std::lock_guard g(valid_mutex);
      valid.insert(checksum_of(trainer));
    }
    std::vector<sync::publish_report> r;
    for (auto& t : tx) r.push_back(t->publish(v, trainer.views()));
    for (const auto& x : r) {
      CHECK(x.acknowledged == 1);
      CHECK(x.target_checksum == r[0].target_checksum);
    }
    if (v > 1) {
      CHECK(r[1].payload_bytes < r[0].payload_bytes);
      CHECK(r[2].payload_bytes * 8 >= layout.numel());
      CHECK(r[0].payload_bytes * 8 < layout.numel());
    }
  }
  for (auto& t : tx) t->close();
  for (auto& w : workers) {
    w->join();
    CHECK(w->applied == 3);
    CHECK(w->torn == 0);
    CHECK(w->weights == trainer);
  }
  CHECK_THROWS_AS(sync_sender::source_type(static_cast<encoder_id>(0)), error);
  CHECK_THROWS_AS(sync_sender::source_type(static_cast<encoder_id>(9)), error);
}

TEST_CASE("a late receiver gets a full transfer, one a few versions behind replays kept patches") {
  const auto layout = small_layout();
  host_model trainer(layout);
  fill_random(trainer, 2);
  sync_sender tx(layout, {}, fixed_bytes{16384});
  std::set<std::uint64_t> valid;
  std::mutex valid_mutex;
  host_model at_v2(layout);
  for (std::uint64_t v = 1; v <= 6; ++v) {
    if (v > 1) perturb_ulp(trainer, 0.02, 100 + v);
    if (v == 2) at_v2 = trainer;
    valid.insert(checksum_of(trainer));
    const auto views = trainer.views();
    tx.publish(v, views);
  }
  auto [a, b] = make_inproc_pair();
  tx.add_receiver(std::move(b));
  worker late(layout, std::move(a));
  auto [c, d] = make_inproc_pair();
  tx.add_receiver(std::move(d));
  sync::receiver_options restored;
  restored.has_version = true;
  restored.version = 2;
  worker behind(layout, std::move(c), restored, &at_v2);
  late.start(&valid, &valid_mutex);
  behind.start(&valid, &valid_mutex);
  REQUIRE(tx.wait_for_receivers(2, std::chrono::seconds(20)));
  CHECK(late.weights == trainer);  // committed before the acknowledgement the sender waited for
  CHECK(behind.weights == trainer);
  tx.close();
  late.join();
  behind.join();
  CHECK(late.fulls == 1);
  CHECK(behind.fulls == 0);
  CHECK(behind.applied == 4);  // 2->3->4->5->6
}

TEST_CASE("a receiver whose weights are not the version it claims is refused the patch and healed by a full transfer") {
  const auto layout = small_layout();
  host_model trainer(layout);
  fill_random(trainer, 3);
  sync_sender tx(layout);
  tx.publish(1, trainer.views());
  host_model wrong = trainer;
  wrong.set(2, 5, wrong.get(2, 5) ^ 1);
  auto [a, b] = make_inproc_pair();
  tx.add_receiver(std::move(b));
  sync::receiver_options claim;
  claim.has_version = true;
  claim.version = 1;
  worker w(layout, std::move(a), claim, &wrong);
  std::set<std::uint64_t> valid{checksum_of(trainer)};
  std::mutex m;
  w.start(&valid, &m);
  REQUIRE(tx.wait_for_receivers(1, std::chrono::seconds(20)));
  CHECK(w.weights == trainer);
  const auto status = tx.receivers();
  REQUIRE(status.size() == 1);
  CHECK(status[0].full_transfers == 1);
  tx.close();
  w.join();
  CHECK(w.fulls == 1);
}

TEST_CASE("a receiver for another layout is refused at the handshake") {
  sync_sender tx(small_layout());
  auto [a, b] = make_inproc_pair();
  tx.add_receiver(std::move(b));
  host_model other(model_layout({{"x", dtype::bf16, {10}}}));
  auto views = other.mutable_views();
  CHECK_THROWS_AS(sync_receiver(other.layout, views, std::move(a)), sparsesync::error);
  tx.close();
}

TEST_CASE("a link too small for a bucket's full transfer is refused when it is added, naming the bucket and the limit") {
  // The bf16 bucket of small_layout (93,805 elements in one bucket) makes a full-transfer frame of ~200 KB.
  inproc_options small;
  small.max_frame_size = 64 << 10;
  {
    sync_sender tx(small_layout());
    auto [a, b] = make_inproc_pair(small);
    try {
      tx.add_receiver(std::move(b));
      FAIL("a link of 64 KiB frames was accepted for ~200 KB full-transfer frames");
    } catch (const sparsesync::error& e) {
      CHECK(e.code() == errc::invalid_argument);
      CHECK(std::string(e.what()).find("bucket 0") != std::string::npos);
      CHECK(std::string(e.what()).find("65536 (max_frame_size)") != std::string::npos);
    }
    CHECK(tx.receivers().empty());
  }
  // Buckets of 16 KiB (chunks of 4096 elements, so that the large tensors split that finely) fit the same link: it
  // is taken, and a receiver behind it gets the first version.
  sync::sender_options so;
  so.encode.log2_chunk = 12;
  sync_sender tx(small_layout(), so, fixed_bytes{16 << 10});
  auto [a, b] = make_inproc_pair(small);
  tx.add_receiver(std::move(b));
  host_model trainer(small_layout()), worker(small_layout());
  fill_random(trainer, 7);
  auto views = worker.mutable_views();
  sync_receiver rx(worker.layout, views, std::move(a));
  std::thread t([&] { CHECK(rx.next().has_value()); });
  CHECK(tx.publish(1, trainer.views()).acknowledged == 1);
  t.join();
  CHECK(worker == trainer);
  tx.close();
}

namespace {
// A host source with version_source requirement 6, as a GPU source with a deferred snapshot advance has it:
// settle() is counted, and fails once when asked to.
std::atomic<int> settled{0};
std::atomic<bool> fail_next_settle{false};
template <class Sel, class Policy>
struct settling_host_source : sync::host_source<Sel, Policy> {
  double settle() {
    ++settled;
    if (fail_next_settle.exchange(false)) throw sparsesync::error(errc::io, "settle failed");
    return 0.0;
  }
};
}  // namespace

TEST_CASE("a source's settle() runs before publish() returns; when it fails, the next version is a full transfer") {
  static_assert(sync::settling_source<settling_host_source<auto_encoder, fixed_bytes>>);
  const auto layout = small_layout();
  host_model trainer(layout);
  fill_random(trainer, 11);
  sync::sender<auto_encoder, fixed_bytes, inproc_transport, settling_host_source> tx(layout, {}, fixed_bytes{16384});
  auto [a, b] = make_inproc_pair();
  tx.add_receiver(std::move(b));
  worker w(layout, std::move(a));
  std::set<std::uint64_t> valid;
  std::mutex m;
  w.start(&valid, &m);
  settled = 0;
  for (std::uint64_t v = 1; v <= 4; ++v) {
    if (v > 1) perturb_ulp(trainer, 0.02, 300 + v);
    {
      std::lock_guard g(m);
      valid.insert(checksum_of(trainer));
    }
    if (v == 3) fail_next_settle = true;
    const int before = settled;
    if (v == 3) {
      CHECK_THROWS_AS(tx.publish(v, trainer.views()), sparsesync::error);
    } else {
      CHECK(tx.publish(v, trainer.views()).acknowledged == 1);
      CHECK(w.weights == trainer);
    }
    CHECK(settled == before + 1);
  }
  // Version 1 and version 4 (after the failed settle, the snapshot held no version) came as full transfers.
  tx.close();
  w.join();
  CHECK(w.fulls == 2);
  CHECK(w.torn == 0);
}

TEST_CASE("a relay tree: the trainer sends one copy, two leaves behind the relay stay bit-identical") {
  using relay_t = sync::relay<auto_encoder, fixed_bytes, inproc_transport, inproc_transport>;
  const auto layout = small_layout();
  host_model trainer(layout);
  fill_random(trainer, 4);
  sync_sender tx(layout);
  auto [up_rx, up_tx] = make_inproc_pair();
  tx.add_receiver(std::move(up_tx));
  host_model relay_weights(layout);
  auto relay_views = relay_weights.mutable_views();
  relay_t relay(layout, relay_views, std::move(up_rx));
  std::thread relay_thread([&] { relay.run(); });
  std::set<std::uint64_t> valid;
  std::mutex valid_mutex;
  std::vector<std::unique_ptr<worker>> leaves;
  for (int i = 0; i < 2; ++i) {
    auto [a, b] = make_inproc_pair();
    relay.add_receiver(std::move(b));
    leaves.push_back(std::make_unique<worker>(layout, std::move(a)));
    leaves.back()->start(&valid, &valid_mutex);
  }
  std::uint64_t sent_per_version = 0;
  for (std::uint64_t v = 1; v <= 5; ++v) {
    if (v > 1) perturb_ulp(trainer, 0.01, 200 + v);
    {
      std::lock_guard g(valid_mutex);
      valid.insert(checksum_of(trainer));
    }
    const auto rep = tx.publish(v, trainer.views());
    CHECK(rep.acknowledged == 1);  // the trainer serves only the relay
    sent_per_version = rep.payload_bytes;
    // The relay republishes after acknowledging upstream: wait (bounded) for the leaves to reach v.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (auto& l : leaves) {
      for (;;) {
        std::shared_lock lock(l->rx->weights_mutex());
        if (l->rx->has_version() && l->rx->version() == v) {
          CHECK(l->weights == trainer);
          break;
        }
        lock.unlock();
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  CHECK(sent_per_version > 0);
  tx.close();
  relay_thread.join();
  for (auto& l : leaves) {
    l->join();
    CHECK(l->torn == 0);
    CHECK(l->applied == 5);
  }
}

TEST_CASE("protocol messages round-trip and every truncation or foreign byte string is refused") {
  const sync::hello h{0x1234, true, 7, 0xABCDEF};
  const auto m = sync::encode(h);
  sync::hello back;
  REQUIRE(sync::decode(m, back).ok());
  CHECK(back.layout_hash == h.layout_hash);
  CHECK(back.has_version);
  CHECK(back.version == 7);
  CHECK(back.checksum == h.checksum);
  for (std::size_t n = 0; n < m.size(); ++n) CHECK_FALSE(sync::decode(std::span(m).first(n), back).ok());
  auto longer = m;
  longer.push_back(std::byte{0});
  CHECK_FALSE(sync::decode(longer, back).ok());
  auto other_version = m;
  other_version[5] = std::byte{2};
  CHECK(sync::decode(other_version, back).code() == errc::unsupported_version);
  sync::welcome w;
  CHECK_FALSE(sync::decode(m, w).ok());  // a hello is not a welcome
  const auto n = sync::encode(sync::nack{9, errc::base_mismatch, "why"});
  sync::nack nb;
  REQUIRE(sync::decode(n, nb).ok());
  CHECK(nb.version == 9);
  CHECK(nb.code == errc::base_mismatch);
  CHECK(nb.message == "why");
}

TEST_CASE("hello carries the device-frames flag; unknown flags and bad bucket_device announcements are refused") {
  sync::hello h{0x1234, false, 0, 0, true};
  auto m = sync::encode(h);
  sync::hello back;
  REQUIRE(sync::decode(m, back).ok());
  CHECK(back.device_frames);
  h.device_frames = false;
  REQUIRE(sync::decode(sync::encode(h), back).ok());
  CHECK_FALSE(back.device_frames);
  m[7] = std::byte{2};  // flags (u16 after the version): bit 1 means nothing yet
  CHECK(sync::decode(m, back).code() == errc::malformed);
  auto w = sync::encode(sync::welcome{1, false, 0});
  w[7] = std::byte{1};  // a welcome has no flags
  sync::welcome wb;
  CHECK_FALSE(sync::decode(w, wb).ok());

  std::uint64_t bytes = 0;
  const auto a = sync::encode_bucket_device(4096);
  REQUIRE(sync::decode_bucket_device(a, bytes).ok());
  CHECK(bytes == 4096);
  for (std::size_t n = 0; n < a.size(); ++n) CHECK_FALSE(sync::decode_bucket_device(std::span(a).first(n), bytes).ok());
  CHECK_FALSE(sync::decode_bucket_device(sync::encode_bucket_device(bucket_header_bytes - 1), bytes).ok());  // not even a header
  CHECK_FALSE(sync::decode_bucket_device(sync::encode_bucket_device(sync::hard_max_device_frame + 1), bytes).ok());
  CHECK(sync::decode_bucket_device(sync::encode_bucket_device(sync::hard_max_device_frame), bytes).ok());
}

namespace {
// A host sink whose abort() says the old weights could not be put back, as a GPU sink's streamed rollback that
// fails does: the receiver must still nack the version (the sender is waiting for its answer) and then hold no
// version, so that the sender's full transfer heals it.
class unrestorable_sink {
 public:
  explicit unrestorable_sink(std::span<const tensor_view> buffers) : inner_(buffers) {}
  void prepare(const model_layout& l) { inner_.prepare(l); }
  std::uint64_t checksum() { return inner_.checksum(); }
  void begin(bool full, std::optional<std::uint64_t> known) { inner_.begin(full, known); }
  status add_bucket(std::span<const unsigned char> frame) { return inner_.add_bucket(frame); }
  status finish(const patch_header& h) { return inner_.finish(h); }
  void commit() { inner_.commit(); }
  [[nodiscard]] std::uint64_t changed() const { return inner_.changed(); }
  [[nodiscard]] std::uint64_t target_checksum() const { return inner_.target_checksum(); }
  void abort() {
    inner_.abort();
    ++aborts;
    throw error(errc::invalid_argument, "the old weights could not be put back");
  }
  int aborts = 0;

 private:
  sync::host_sink inner_;
};
static_assert(sync::check_version_sink<unrestorable_sink>);
}  // namespace

TEST_CASE("a refused version whose old weights cannot be put back is still nacked, and a full transfer heals the receiver") {
  const auto layout = small_layout();
  host_model trainer(layout);
  fill_random(trainer, 3);
  sync_sender tx(layout, {}, fixed_bytes{16u << 10});
  auto [a, b] = make_inproc_pair();
  tx.add_receiver(std::move(a));
  auto flip = std::make_shared<std::atomic<long>>(-1);
  host_model held(layout);
  using rx_t = sync::receiver<sparsesync_test::tampering_link<inproc_transport>, unrestorable_sink>;
  rx_t rx(layout, unrestorable_sink(held.mutable_views()), sparsesync_test::tampering_link<inproc_transport>(std::move(b), flip));
  std::atomic<int> applied{0}, refused{0};
  std::string other;
  std::thread t([&] {
    for (;;) {
      try {
        if (!rx.next()) return;
        ++applied;
      } catch (const error&) {
        ++refused;  // the damaged version, then the failed restore
      } catch (const std::exception& e) {
        other = e.what();
        return;
      }
    }
  });
  CHECK(tx.publish(1, trainer.views()).acknowledged == 1);
  perturb_ulp(trainer, 0.01, 4);
  flip->store(0);  // the next bucket the receiver takes is damaged
  const auto r2 = tx.publish(2, trainer.views());
  CHECK(r2.acknowledged == 1);  // healed inside the same publish by a full transfer
  CHECK(held == trainer);
  CHECK(refused >= 1);
  CHECK(rx.sink().aborts >= 1);
  CHECK(rx.version() == 2);
  perturb_ulp(trainer, 0.01, 5);
  CHECK(tx.publish(3, trainer.views()).acknowledged == 1);
  CHECK(held == trainer);
  bool healed = false;
  for (const auto& s : tx.receivers()) healed = healed || s.full_transfers >= 1;
  CHECK(healed);
  tx.close();
  t.join();
  CHECK(other.empty());
}

namespace {

// A host source whose next encode fails after the version's prologue went out (fail_next): what a trainer whose
// encode throws midway (an allocation, a device fault) leaves in the versions' stream.
template <class Sel, class Policy>
class flaky_source {
 public:
  void prepare(const model_layout& layout, const encode_options& enc, const Policy& policy) {
    layout_ = &layout;
    buckets_ = policy.plan(layout, enc.log2_chunk).size();
    inner_.prepare(layout, enc, policy);
  }
  [[nodiscard]] bool has_version() const { return inner_.has_version(); }
  sync::source_totals encode_version(std::span<const const_tensor_view> w, const patch_options& po, sync::version_stream& out) {
    if (fail_next.exchange(false)) {
      std::vector<unsigned char> bytes;
      sparsesync::detail::write_patch_prologue(bytes, sparsesync::detail::patch_header_for(*layout_, buckets_, po, !has_version(), 0), {},
                                               po.metadata);
      sync::stream_writer(out).prologue(bytes);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the sessions send it
      inner_.invalidate();
      throw error(errc::invalid_argument, "flaky_source: the encode failed midway");
    }
    return inner_.encode_version(w, po, out);
  }
  void encode_full(const patch_options& po, sync::version_stream& out) { inner_.encode_full(po, out); }
  void invalidate() { inner_.invalidate(); }
  static inline std::atomic<bool> fail_next{false};

 private:
  sync::host_source<Sel, Policy> inner_;
  const model_layout* layout_ = nullptr;
  std::size_t buckets_ = 0;
};

}  // namespace

TEST_CASE("an encode that fails after part of its version was sent ends those sessions: no receiver or publish() left waiting") {
  using flaky_sender = sync::sender<auto_encoder, fixed_bytes, inproc_transport, flaky_source>;
  const auto layout = small_layout();
  host_model trainer(layout);
  fill_random(trainer, 21);
  sync::sender_options so;
  so.encode.log2_chunk = 10;
  so.ack_timeout = std::chrono::seconds(20);  // a regression fails here instead of waiting 10 minutes
  flaky_sender tx(layout, so, fixed_bytes{16384});
  auto [a, b] = make_inproc_pair();
  tx.add_receiver(std::move(b));
  host_model first(layout);
  auto first_views = first.mutable_views();
  sync_receiver rx(layout, first_views, std::move(a));
  std::atomic<bool> ended{false};
  std::thread applier([&] {
    try {
      while (rx.next()) {
      }
    } catch (const std::exception& e) {
      MESSAGE("first receiver stopped: " << e.what());
    }
    ended = true;
  });
  REQUIRE(tx.wait_for_receivers(1, std::chrono::seconds(20)));
  for (std::uint64_t v = 1; v <= 2; ++v) {
    if (v > 1) perturb_ulp(trainer, 0.01, 30 + v);
    const auto views = trainer.views();
    CHECK(tx.publish(v, views).acknowledged == 1);
  }
  const host_model v2 = trainer;
  perturb_ulp(trainer, 0.01, 40);
  flaky_source<auto_encoder, fixed_bytes>::fail_next = true;
  {
    const auto views = trainer.views();
    CHECK_THROWS_AS(tx.publish(3, views), sparsesync::error);
  }
  // The session that had sent version 3's prologue is over: its receiver's link closed, its weights version 2.
  for (int i = 0; i < 200 && !ended; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  CHECK(ended);
  applier.join();
  {
    std::shared_lock lock(rx.weights_mutex());
    CHECK(first == v2);
  }
  CHECK_FALSE(tx.receivers().at(0).connected);
  // A receiver that connects now gets the next version whole.
  auto [c, d] = make_inproc_pair();
  tx.add_receiver(std::move(d));
  host_model second(layout);
  auto second_views = second.mutable_views();
  sync_receiver rx2(layout, second_views, std::move(c));
  std::thread applier2([&] {
    try {
      while (rx2.next()) {
      }
    } catch (const std::exception& e) {
      MESSAGE("second receiver stopped: " << e.what());
    }
  });
  perturb_ulp(trainer, 0.01, 41);
  const auto views = trainer.views();
  const auto rep = tx.publish(4, views);
  CHECK(rep.acknowledged == 1);
  {
    std::shared_lock lock(rx2.weights_mutex());
    CHECK(second == trainer);
  }
  tx.close();
  applier2.join();
}

TEST_CASE("device_source: an encoder chosen at run time must exist; Sel's is the default") {
  CHECK_THROWS_AS(sync::device_source<rice>(nullptr, static_cast<encoder_id>(9)), error);
  CHECK_THROWS_AS(sync::device_source<rice>(nullptr, static_cast<encoder_id>(0)), error);
  CHECK(sync::device_source<rice>(nullptr, encoder_id::entropy).encoder() == encoder_id::entropy);
  CHECK(sync::device_source<rice>().encoder() == encoder_id::rice);
}
