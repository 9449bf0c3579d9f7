// The sync engine over asio_tcp on 127.0.0.1: one trainer, four receivers, many versions. Every receiver
// must end every version bit-identical to the trainer, and a reader thread per receiver, taking the
// weights lock the way a rollout engine would, must never see a version that was only partly applied.
#include <sparsesync/gen/adam_bf16.hpp>
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>

using namespace sparsesync;
using namespace std::chrono_literals;

namespace {

using tcp_sender = sync::sender<auto_encoder, fixed_bytes, asio_tcp_transport>;
using tcp_receiver = sync::receiver<asio_tcp_transport>;

std::uint64_t checksum_of(const model_layout& layout, const gen::tensor_set& w) {
  std::uint64_t sum = 0;
  for (std::size_t t = 0; t < layout.size(); ++t) {
    const auto v = w.tensor(t);
    sum += content_checksum(static_cast<const std::uint16_t*>(v.data), v.numel, layout.first_element(t));
  }
  return sum;
}

struct worker {
  gen::tensor_set weights;
  std::unique_ptr<tcp_receiver> rx;
  std::thread applier, reader;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> applied{0}, torn{0}, reads{0};
  std::string error;

  worker(const model_layout& layout, asio_tcp_transport link) : weights(layout) {
    auto views = weights.mutable_views();
    rx = std::make_unique<tcp_receiver>(layout, views, std::move(link));
  }

  void start(const model_layout& layout, const std::set<std::uint64_t>& valid, std::mutex& valid_mutex) {
    applier = std::thread([this] {
      try {
        while (rx->next()) ++applied;
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    reader = std::thread([this, &layout, &valid, &valid_mutex] {
      while (!stop) {
        std::shared_lock lock(rx->weights_mutex());
        if (!rx->has_version()) continue;
        const auto sum = checksum_of(layout, weights);
        std::lock_guard g(valid_mutex);
        if (!valid.count(sum)) ++torn;
        ++reads;
        std::this_thread::yield();
      }
    });
  }
  void join() {
    if (applier.joinable()) applier.join();
    stop = true;
    if (reader.joinable()) reader.join();
  }
};

}  // namespace

TEST_CASE("four receivers over TCP on loopback: every version bit-identical, never a partly applied one") {
  const auto layout = gen::make_gpt_like_layout(64, 2, 1000);
  gen::adam_bf16_options go;
  go.seed = 11;
  go.lr = 2e-5;
  go.threads = 1;
  gen::adam_bf16_model trainer(layout, go);

  asio_tcp_options opt;
  opt.key = pre_shared_key::generate();
  opt.receive_timeout = 60s;
  asio_tcp_listener listener("127.0.0.1", 0, opt);
  sync::sender_options so;
  so.history = 4;
  so.ack_timeout = 60s;
  tcp_sender tx(layout, so, fixed_bytes{64 << 10});  // several buckets per version: the pipelined path

  std::vector<std::unique_ptr<worker>> workers;
  std::thread acceptor([&] {
    for (int i = 0; i < 4; ++i) tx.add_receiver(listener.accept(20s));
  });
  for (int i = 0; i < 4; ++i) workers.push_back(std::make_unique<worker>(layout, asio_tcp_transport::connect("127.0.0.1", listener.port(), opt)));
  acceptor.join();

  std::set<std::uint64_t> valid;
  std::mutex valid_mutex;
  valid.insert(checksum_of(layout, trainer.weights()));
  for (auto& w : workers) w->start(layout, valid, valid_mutex);

  constexpr int versions = 25;
  for (int v = 1; v <= versions; ++v) {
    if (v > 1) trainer.step();
    {
      std::lock_guard g(valid_mutex);
      valid.insert(checksum_of(layout, trainer.weights()));
    }
    const auto views = trainer.views();
    const auto report = tx.publish(static_cast<std::uint64_t>(v), views);
    REQUIRE(report.acknowledged == 4);
    REQUIRE(report.lagging == 0);
    // Acknowledged means committed and verified: compare every byte now, under the readers' lock.
    for (auto& w : workers) {
      std::shared_lock lock(w->rx->weights_mutex());
      REQUIRE(w->rx->has_version());
      REQUIRE(w->rx->version() == static_cast<std::uint64_t>(v));
      for (std::size_t t = 0; t < layout.size(); ++t)
        REQUIRE(std::memcmp(w->weights.tensor(t).data, trainer.tensor(t).data, layout[t].bytes()) == 0);
    }
  }
  for (const auto& r : tx.receivers()) {
    CHECK(r.connected);
    CHECK(r.full_transfers == 0);  // the first version reached them as the first publish, every later one as a patch
  }
  tx.close();
  for (auto& w : workers) {
    w->join();
    CHECK_MESSAGE(w->error.empty(), w->error);
    CHECK(w->applied == versions);
    CHECK(w->torn == 0);
    CHECK(w->reads > 0);
  }
}
