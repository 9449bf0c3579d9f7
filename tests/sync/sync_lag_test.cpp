// A stalled receiver must not set the pace (issue 14, found 4): publish() stops waiting for a receiver that
// is much slower than the others, marks it lagging, and the receiver catches up once it resumes.
#include "../core/test_models.hpp"

#include <doctest/doctest.h>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/inproc.hpp>

#include <atomic>
#include <chrono>
#include <thread>

using namespace sparsesync;
using namespace sparsesync::test;
using namespace std::chrono_literals;
using sync_sender = sync::sender<auto_encoder, fixed_bytes, inproc_transport>;
using sync_receiver = sync::receiver<inproc_transport>;

namespace {

model_layout lag_layout() { return model_layout({{"emb", dtype::bf16, {64, 257}}, {"w", dtype::bf16, {257, 300}}}); }

// Small chunks; ack_timeout far above the lag bound (before the lag bound every publish waited this long for a
// stalled receiver).
sync::sender_options lag_options() {
  sync::sender_options so;
  so.encode.log2_chunk = 10;
  so.ack_timeout = 10s;
  return so;
}

// A receiver applying versions on its own thread once started.
struct applier {
  host_model weights;
  std::unique_ptr<sync_receiver> rx;
  std::thread thread;
  std::atomic<std::uint64_t> applied{0};

  applier(const model_layout& layout, inproc_transport link) : weights(layout) {
    auto views = weights.mutable_views();
    rx = std::make_unique<sync_receiver>(layout, views, std::move(link));
  }
  void start() {
    thread = std::thread([this] {
      try {
        while (rx->next()) ++applied;
      } catch (const std::exception& e) {
        MESSAGE("receiver stopped: " << e.what());
      }
    });
  }
  ~applier() {
    if (thread.joinable()) thread.join();
  }
};

}  // namespace

TEST_CASE("sender: a stalled receiver is marked lagging and not waited for; it catches up when it resumes") {
  const auto layout = lag_layout();
  host_model trainer(layout);
  fill_random(trainer, 3);
  sync_sender tx(layout, lag_options(), fixed_bytes{16384});

  auto [a, b] = make_inproc_pair();
  tx.add_receiver(std::move(b));
  applier healthy(layout, std::move(a));
  auto [c, d] = make_inproc_pair();
  tx.add_receiver(std::move(d));
  applier stalled(layout, std::move(c));  // handshaken, but reads nothing until started below
  healthy.start();
  REQUIRE(tx.wait_for_receivers(2, 20s));

  const int versions = 5;
  for (std::uint64_t v = 1; v <= versions; ++v) {
    if (v > 1) perturb_ulp(trainer, 0.01, 40 + v);
    const auto views = trainer.views();
    const auto rep = tx.publish(v, views);
    MESSAGE("version " << v << ": publish took " << rep.seconds << " s");
    CHECK(rep.seconds < 3.0);
    CHECK(rep.acknowledged == 1);
    CHECK(rep.lagging == 1);
    CHECK(rep.marked_lagging == (v == 1 ? 1u : 0u));  // marked once, then not waited for until it catches up
    std::shared_lock lock(healthy.rx->weights_mutex());
    CHECK(healthy.weights == trainer);
  }
  auto status = tx.receivers();
  REQUIRE(status.size() == 2);
  CHECK(status[1].lagging);
  CHECK(status[1].times_lagging == 1);

  stalled.start();  // resumes: the stale version 1, then kept patches up to the newest
  REQUIRE(tx.wait_for_receivers(2, 20s));
  {
    std::shared_lock lock(stalled.rx->weights_mutex());
    CHECK(stalled.weights == trainer);
    CHECK(stalled.rx->version() == versions);
  }
  status = tx.receivers();
  CHECK_FALSE(status[1].lagging);  // healed: waited for again from the next version on
  perturb_ulp(trainer, 0.01, 99);
  const auto views = trainer.views();
  const auto rep = tx.publish(versions + 1, views);
  CHECK(rep.acknowledged == 2);
  CHECK(rep.lagging == 0);
  tx.close();
}

TEST_CASE("sender: publish() polling for acks (ack_poll) sees every ack, and still stops at the lag bound for a stalled receiver") {
  const auto layout = lag_layout();
  host_model trainer(layout);
  fill_random(trainer, 5);
  sync::sender_options so = lag_options();
  so.ack_poll = 5s;  // longer than the lag bound: the poll must end where the sleep would have
  sync_sender tx(layout, so, fixed_bytes{16384});
  auto [a, b] = make_inproc_pair();
  tx.add_receiver(std::move(b));
  applier first(layout, std::move(a));
  auto [c, d] = make_inproc_pair();
  tx.add_receiver(std::move(d));
  applier second(layout, std::move(c));
  first.start();
  second.start();
  REQUIRE(tx.wait_for_receivers(2, 20s));
  for (std::uint64_t v = 1; v <= 4; ++v) {
    if (v > 1) perturb_ulp(trainer, 0.01, 70 + v);
    const auto views = trainer.views();
    const auto rep = tx.publish(v, views);
    CHECK(rep.seconds < 2.5);  // a poll blind to the acks would run its 5 s
    CHECK(rep.acknowledged == 2);
    CHECK(rep.lagging == 0);
    for (applier* w : {&first, &second}) {
      std::shared_lock lock(w->rx->weights_mutex());
      CHECK(w->weights == trainer);
      CHECK(w->rx->version() == v);
    }
  }
  // A third receiver that reads nothing: publish() returns at the lag bound (lag_grace), not after ack_poll.
  auto [e, f] = make_inproc_pair();
  tx.add_receiver(std::move(f));
  applier stalled(layout, std::move(e));  // handshaken (the constructor), holding no version
  perturb_ulp(trainer, 0.01, 90);
  const auto views = trainer.views();
  const auto rep = tx.publish(5, views);
  CHECK(rep.seconds < 3.0);
  CHECK(rep.acknowledged == 2);
  CHECK(rep.lagging == 1);
  stalled.start();  // resumes: a full transfer of the newest version
  CHECK(tx.wait_for_receivers(3, 20s));
  {
    std::shared_lock lock(stalled.rx->weights_mutex());
    CHECK(stalled.weights == trainer);
  }
  tx.close();
}
