// The receiver over a pipelined device link, on the CPU: frames announced as device frames, their receives posted
// ahead (up to max_posted_device_receives), handed to the sink in order; versions bit-identical, refused versions kept in step. The "device" here
// is host memory: the link turns each host bucket of a host sender into an announcement plus a frame that lands
// only when its receive completes, and the sink keeps its slots in host memory over a host_sink.
#include "../core/test_models.hpp"

#include <doctest/doctest.h>
#include <sparsesync/sync/host_sink.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/sync/version_sink.hpp>
#include <sparsesync/transport/device_link.hpp>
#include <sparsesync/transport/inproc.hpp>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace sparsesync;
using namespace sparsesync::test;

namespace {

// What the worker's link saw, for the test to check the pipelining itself.
struct link_log {
  std::vector<std::string> calls;  // "post", "complete", "receive" (the unpipelined call), in order
  std::size_t most_posted = 0;
  long flip_frame = -1;  // damages the frame with this index (counted over all versions) on arrival
  bool landed = false;   // received_device(): every posted frame has landed at once (else: none until completed)
  std::size_t polls = 0;
};

// A pipelined device_link over an inproc_transport whose peer is a host sender.
class host_pipelined_link {
 public:
  using transport_concept = transport_tag;
  using device_link_concept = device_link_tag;
  host_pipelined_link(inproc_transport inner, std::shared_ptr<link_log> log) : inner_(std::move(inner)), log_(std::move(log)) {}

  void send(std::span<const std::byte> m) { inner_.send(m); }
  bool receive(std::vector<std::byte>& m) {
    if (!inner_.receive(m)) return false;
    if (sync::type_of(m) == sync::message_type::bucket) {  // the frame goes the "device" way, announced here
      const auto body = sync::body_of(m);
      announced_.emplace_back(reinterpret_cast<const unsigned char*>(body.data()), reinterpret_cast<const unsigned char*>(body.data()) + body.size());
      m = sync::encode_bucket_device(body.size());
    }
    return true;
  }
  void close() noexcept { inner_.close(); }
  [[nodiscard]] std::size_t max_frame_size() const noexcept { return inner_.max_frame_size(); }
  void send_device(const device_frame&) { throw transport_error(transport_errc::invalid_argument, "the worker's end sends no frames"); }
  void receive_device(void* dst, std::size_t bytes, void* after, std::span<unsigned char> head) {
    log_->calls.push_back("receive");
    take(dst, bytes, after);
    land(head);
  }
  void post_receive_device(void* dst, std::size_t bytes, void* after) {
    log_->calls.push_back("post");
    take(dst, bytes, after);
    log_->most_posted = std::max(log_->most_posted, posted_.size());
  }
  void complete_receive_device(std::span<unsigned char> head) {
    log_->calls.push_back("complete");
    land(head);
  }
  bool received_device() {
    ++log_->polls;
    return log_->landed && !posted_.empty();
  }
  void abort() noexcept { inner_.close(); }

 private:
  struct posted {
    unsigned char* dst;
    std::vector<unsigned char> frame;
  };
  void take(void* dst, std::size_t bytes, void* after) {
    if (after) throw transport_error(transport_errc::invalid_argument, "host memory has no stream to wait for");
    if (announced_.empty() || announced_.front().size() != bytes)
      throw transport_error(transport_errc::protocol, "a receive for a frame that was not announced with that size");
    if (posted_.size() >= max_posted_device_receives) throw transport_error(transport_errc::invalid_argument, "too many receives posted");
    posted_.push_back({static_cast<unsigned char*>(dst), std::move(announced_.front())});
    announced_.pop_front();
  }
  // The frame lands in its slot only now: a sink that read the slot before the receive completed would see zeros.
  void land(std::span<unsigned char> head) {
    if (posted_.empty()) throw transport_error(transport_errc::invalid_argument, "no receive posted");
    auto p = std::move(posted_.front());
    posted_.pop_front();
    if (frames_++ == log_->flip_frame) p.frame.back() ^= 0x5a;
    std::memcpy(p.dst, p.frame.data(), p.frame.size());
    std::memcpy(head.data(), p.dst, std::min(head.size(), p.frame.size()));
  }

  inproc_transport inner_;
  std::shared_ptr<link_log> log_;
  std::deque<std::vector<unsigned char>> announced_;
  std::deque<posted> posted_;
  long frames_ = 0;
};
static_assert(check_device_link<host_pipelined_link>);
static_assert(pipelined_device_link<host_pipelined_link>);
static_assert(polled_device_link<host_pipelined_link>);

// A device_frame_sink whose "device memory" is host memory: each slot is its own zeroed buffer, and a frame is
// verified by the host_sink it wraps once it is added.
class host_frame_sink {
 public:
  explicit host_frame_sink(std::span<const tensor_view> buffers) : inner_(buffers) {}
  void prepare(const model_layout& layout) { inner_.prepare(layout); }
  std::uint64_t checksum() { return inner_.checksum(); }
  void begin(bool full, std::optional<std::uint64_t> known) {
    slots_.clear();
    inner_.begin(full, known);
  }
  status add_bucket(std::span<const unsigned char> frame) { return inner_.add_bucket(frame); }
  status finish(const patch_header& h) { return inner_.finish(h); }
  void commit() { inner_.commit(); }
  [[nodiscard]] std::uint64_t changed() const { return inner_.changed(); }
  [[nodiscard]] std::uint64_t target_checksum() const { return inner_.target_checksum(); }
  void abort() { inner_.abort(); }

  sync::device_slot device_frame_slot(std::size_t bytes) {
    slots_.emplace_back(bytes);
    most_reserved = std::max(most_reserved, slots_.size());
    return {slots_.back().data(), nullptr};
  }
  status add_device_bucket(std::span<const unsigned char> head) {
    REQUIRE(!slots_.empty());
    const auto frame = std::move(slots_.front());
    slots_.pop_front();
    REQUIRE(head.size() <= frame.size());
    CHECK(std::equal(head.begin(), head.end(), frame.begin()));  // the head the link copied is the frame's own
    return inner_.add_bucket(frame);
  }
  std::size_t most_reserved = 0;

 private:
  sync::host_sink inner_;
  std::deque<std::vector<unsigned char>> slots_;
};
static_assert(sync::device_frame_sink<host_frame_sink>);

model_layout layout_for_test() { return model_layout({{"a", dtype::bf16, {96, 130}}, {"b", dtype::bf16, {4000}}, {"c", dtype::f32, {777}}}); }

}  // namespace

TEST_CASE("pipelined device receives: posted ahead as far as the link takes, handed on in order; refused versions stay in step") {
  const auto layout = layout_for_test();
  host_model trainer(layout);
  fill_random(trainer, 7);
  sync::sender_options so;
  so.encode.log2_chunk = 10;
  sync::sender<auto_encoder, fixed_bytes, inproc_transport> tx(layout, so, fixed_bytes{4096});  // several buckets a version
  auto [a, b] = make_inproc_pair();
  tx.add_receiver(std::move(b));
  auto log = std::make_shared<link_log>();
  host_model worker(layout);
  const auto views = worker.mutable_views();
  sync::receiver<host_pipelined_link, host_frame_sink> rx(layout, host_frame_sink(views), host_pipelined_link(std::move(a), log));

  std::vector<std::string> outcomes;
  std::thread applier([&] {
    for (;;) {
      try {
        const auto v = rx.next();
        if (!v) return;
        outcomes.push_back("v" + std::to_string(v->version) + (v->full ? " full" : ""));
      } catch (const error& e) {
        outcomes.push_back(std::string("refused: ") + e.what());
      }
    }
  });
  REQUIRE(tx.wait_for_receivers(1, std::chrono::seconds(20)));

  // Version 1 is a full transfer: received one frame at a time.
  REQUIRE(tx.publish(1, trainer.views()).acknowledged == 1);
  CHECK(std::count(log->calls.begin(), log->calls.end(), "post") == 0);
  const auto full_frames = std::count(log->calls.begin(), log->calls.end(), "receive");
  CHECK(full_frames >= 2);
  log->calls.clear();

  // Patches: each frame's receive is posted before the frame announced before it is handed on.
  for (std::uint64_t v = 2; v <= 4; ++v) {
    perturb_ulp(trainer, 0.02, v);
    const auto rep = tx.publish(v, trainer.views());
    REQUIRE(rep.acknowledged == 1);
    std::shared_lock lock(rx.weights_mutex());
    REQUIRE(worker == trainer);
  }
  const auto posts = std::count(log->calls.begin(), log->calls.end(), "post");
  CHECK(posts >= 6);
  CHECK(std::count(log->calls.begin(), log->calls.end(), "complete") == posts);
  CHECK(std::count(log->calls.begin(), log->calls.end(), "receive") == 0);
  CHECK(log->most_posted == max_posted_device_receives);  // as many ahead as the link takes, never more
  CHECK(rx.sink().most_reserved == max_posted_device_receives);
  for (std::size_t i = 0; i < max_posted_device_receives; ++i)
    CHECK(log->calls[i] == "post");  // the first frames' receives all went out before the first frame was handed on
  log->calls.clear();

  // A frame damaged on the device path: the version is refused with every frame after the damaged one still
  // received (both ends stay in step); the sender heals the worker with a full transfer of the same version, and
  // the next patch is pipelined again.
  log->flip_frame = static_cast<long>(full_frames + posts);
  perturb_ulp(trainer, 0.02, 5);
  REQUIRE(tx.publish(5, trainer.views()).acknowledged == 1);
  {
    std::shared_lock lock(rx.weights_mutex());
    CHECK(worker == trainer);
  }
  const auto posts_of_5 = std::count(log->calls.begin(), log->calls.end(), "post");
  CHECK(posts_of_5 >= 2);
  CHECK(std::count(log->calls.begin(), log->calls.end(), "complete") == posts_of_5);
  CHECK(std::count(log->calls.begin(), log->calls.end(), "receive") == full_frames);  // the heal
  log->calls.clear();
  perturb_ulp(trainer, 0.02, 6);
  REQUIRE(tx.publish(6, trainer.views()).acknowledged == 1);
  CHECK(std::count(log->calls.begin(), log->calls.end(), "post") >= 2);
  CHECK(std::count(log->calls.begin(), log->calls.end(), "receive") == 0);
  {
    std::shared_lock lock(rx.weights_mutex());
    CHECK(worker == trainer);
  }
  tx.close();
  applier.join();
  REQUIRE(outcomes.size() == 7);
  CHECK(outcomes[0] == "v1 full");
  CHECK(outcomes[3] == "v4");
  CHECK(outcomes[4].rfind("refused: payload checksum mismatch", 0) == 0);
  CHECK(outcomes[5] == "v5 full");
  CHECK(outcomes[6] == "v6");
}

TEST_CASE("pipelined device receives over a polled link: a frame that has landed is handed on at once, not when the window fills") {
  const auto layout = layout_for_test();
  host_model trainer(layout);
  fill_random(trainer, 11);
  sync::sender_options so;
  so.encode.log2_chunk = 10;
  sync::sender<auto_encoder, fixed_bytes, inproc_transport> tx(layout, so, fixed_bytes{4096});
  auto [a, b] = make_inproc_pair();
  tx.add_receiver(std::move(b));
  auto log = std::make_shared<link_log>();
  log->landed = true;
  host_model worker(layout);
  const auto views = worker.mutable_views();
  sync::receiver<host_pipelined_link, host_frame_sink> rx(layout, host_frame_sink(views), host_pipelined_link(std::move(a), log));
  std::thread applier([&] {
    while (rx.next()) {
    }
  });
  REQUIRE(tx.wait_for_receivers(1, std::chrono::seconds(20)));
  REQUIRE(tx.publish(1, trainer.views()).acknowledged == 1);
  log->calls.clear();
  log->polls = 0;
  for (std::uint64_t v = 2; v <= 3; ++v) {
    perturb_ulp(trainer, 0.02, v);
    REQUIRE(tx.publish(v, trainer.views()).acknowledged == 1);
    std::shared_lock lock(rx.weights_mutex());
    REQUIRE(worker == trainer);
  }
  const auto posts = std::count(log->calls.begin(), log->calls.end(), "post");
  CHECK(posts >= 6);
  CHECK(log->polls >= static_cast<std::size_t>(posts));
  CHECK(log->most_posted == 1);  // never more than the frame just announced: each one left as soon as it was posted
  for (std::size_t i = 0; i + 1 < log->calls.size(); i += 2) {
    CHECK(log->calls[i] == "post");
    CHECK(log->calls[i + 1] == "complete");
  }
  tx.close();
  applier.join();
}
