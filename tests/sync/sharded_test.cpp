// Sharded senders: N trainer ranks, each holding only its shard (core/shard.hpp) and publishing it through its
// own sync::sender, and workers (sync::sharded_receiver) that assemble one version from all ranks and commit it
// whole. Checked: shard helpers tile a layout and refuse gaps and overlaps; every version bit-identical on every
// worker with one version number and a whole-model checksum equal to the model's; a corrupted bucket in one
// shard refuses the whole version (weights untouched), and both ranks heal it with full transfers of their
// shards; ranks that disagree on the version number are refused.
#include <sparsesync/core/model_checksum.hpp>
#include <sparsesync/core/shard.hpp>
#include <sparsesync/gen/adam_bf16.hpp>
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/sync/sharded_receiver.hpp>
#include <sparsesync/transport/inproc.hpp>

#include <doctest/doctest.h>

#include "tampering_link.hpp"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

using namespace sparsesync;

namespace {

model_layout test_layout() { return gen::make_gpt_like_layout(64, 2, 1000); }

// A trainer rank: only its shard's pieces, in its own memory (copied from the generator's full model, as if
// its optimizer had produced them).
struct trainer_rank {
  std::vector<shard_piece> pieces;
  model_layout layout;
  std::vector<std::vector<unsigned char>> memory;
  sync::sender<rice, fixed_bytes, inproc_transport> tx;

  trainer_rank(const model_layout& full, std::vector<shard_piece> p, sync::sender_options opt)
      : pieces(std::move(p)), layout(shard_layout(full, pieces)), tx(layout, opt, fixed_bytes{16 << 10}) {
    for (std::size_t i = 0; i < layout.size(); ++i) memory.emplace_back(layout[i].bytes());
  }
  void take(const model_layout& full, std::span<const const_tensor_view> model) {
    const auto v = shard_views<const_tensor_view>(full, model, pieces);
    for (std::size_t i = 0; i < v.size(); ++i) std::memcpy(memory[i].data(), v[i].data, memory[i].size());
  }
  std::vector<const_tensor_view> views() const {
    std::vector<const_tensor_view> v;
    for (std::size_t i = 0; i < layout.size(); ++i) v.push_back({memory[i].data(), layout[i].numel(), layout[i].dtype});
    return v;
  }
};

using tampering_link = sparsesync_test::tampering_link<inproc_transport>;

using worker_rx = sync::sharded_receiver<tampering_link>;

struct worker {
  gen::tensor_set weights;
  std::unique_ptr<worker_rx> rx;
  std::vector<std::shared_ptr<std::atomic<long>>> flips;
  explicit worker(const model_layout& full) : weights(full) {}
};

// Connects every worker to every rank (a link per pair), constructing the workers' receivers while the ranks'
// sessions answer the handshakes.
void connect(const model_layout& full, std::vector<std::unique_ptr<trainer_rank>>& ranks, std::vector<std::unique_ptr<worker>>& workers) {
  for (auto& w : workers) {
    std::vector<std::pair<std::vector<shard_piece>, tampering_link>> links;
    for (auto& r : ranks) {
      auto [a, b] = make_inproc_pair();
      r->tx.add_receiver(std::move(a));
      auto flip = std::make_shared<std::atomic<long>>(-1);
      w->flips.push_back(flip);
      links.emplace_back(r->pieces, tampering_link(std::move(b), flip));
    }
    const auto views = w->weights.mutable_views();
    w->rx = std::make_unique<worker_rx>(full, views, std::move(links));
  }
}

// The whole-model checksum of a sharded version: the sum of the shards' content checksums, each over its shard
// layout (what every rank's sender reports and what the worker computes).
std::uint64_t sharded_checksum(const std::vector<std::unique_ptr<trainer_rank>>& ranks) {
  std::uint64_t sum = 0;
  for (const auto& r : ranks) sum += model_checksum(r->layout, r->views());
  return sum;
}

bool same_bytes(const model_layout& full, const gen::tensor_set& a, const gen::tensor_set& b) {
  for (std::size_t t = 0; t < full.size(); ++t)
    if (std::memcmp(a.tensor(t).data, b.tensor(t).data, full[t].bytes()) != 0) return false;
  return true;
}

}  // namespace

TEST_CASE("shard helpers: flat and tensor shards tile the layout; gaps and overlaps are refused") {
  const auto full = test_layout();
  for (std::size_t world = 1; world <= 5; ++world) {
    std::vector<std::vector<shard_piece>> shards;
    std::uint64_t total = 0;
    for (std::size_t r = 0; r < world; ++r) {
      shards.push_back(flat_shard(full, r, world));
      total += shard_layout(full, shards.back()).numel();
    }
    CHECK(total == full.numel());
    CHECK(check_shards(full, shards));
  }
  std::vector<std::vector<shard_piece>> gap{flat_shard(full, 0, 3), flat_shard(full, 2, 3)};
  CHECK_FALSE(check_shards(full, gap));
  std::vector<std::vector<shard_piece>> overlap{flat_shard(full, 0, 2), flat_shard(full, 1, 2), flat_shard(full, 1, 2)};
  CHECK_FALSE(check_shards(full, overlap));
  const std::size_t first[] = {0};
  std::vector<std::size_t> others;
  for (std::size_t t = 1; t < full.size(); ++t) others.push_back(t);
  std::vector<std::vector<shard_piece>> stages{tensor_shard(full, first), tensor_shard(full, others)};
  CHECK(check_shards(full, stages));
  const auto sl = shard_layout(full, flat_shard(full, 1, 2));
  CHECK(sl[0].name.find('[') != std::string::npos);
  CHECK_THROWS_AS(shard_layout(full, std::vector<shard_piece>{{0, full[0].numel(), 1}}), error);
}

TEST_CASE("two trainer ranks, two workers: one version from both shards, bit-identical, one whole-model checksum") {
  const auto full = test_layout();
  gen::adam_bf16_options go;
  go.seed = 5;
  go.lr = 3e-5;
  go.threads = 1;
  gen::adam_bf16_model model(full, go);
  sync::sender_options so;
  so.ack_timeout = std::chrono::seconds(60);
  so.lag_grace = std::chrono::seconds(60);  // a healing worker is waited for, not marked lagging (slow sanitizer builds)
  std::vector<std::unique_ptr<trainer_rank>> ranks;
  for (std::size_t r = 0; r < 2; ++r) ranks.push_back(std::make_unique<trainer_rank>(full, flat_shard(full, r, 2), so));
  std::vector<std::unique_ptr<worker>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(std::make_unique<worker>(full));
  connect(full, ranks, workers);
  // Every rank holds its shard only.
  CHECK(ranks[0]->layout.numel() + ranks[1]->layout.numel() == full.numel());

  std::vector<std::thread> worker_threads;
  std::vector<std::vector<sync::sharded_version>> got(workers.size());
  std::mutex got_mutex;
  std::atomic<int> refused{0};
  for (std::size_t i = 0; i < workers.size(); ++i)
    worker_threads.emplace_back([&, i] {
      for (;;) {
        try {
          auto v = workers[i]->rx->next();
          if (!v) return;
          std::lock_guard g(got_mutex);
          got[i].push_back(*v);
        } catch (const error&) {
          ++refused;
        }
      }
    });
  // A worker acknowledges inside next(), so publish() may return before the worker's thread has recorded the
  // version: the record of worker i, once it holds n versions.
  const auto record_of = [&](std::size_t i, std::size_t n) {
    for (int spin = 0; spin < 30000; ++spin) {
      {
        std::lock_guard g(got_mutex);
        if (got[i].size() >= n) return got[i];
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::lock_guard g(got_mutex);
    return got[i];
  };

  auto publish_all = [&](std::uint64_t version, std::vector<sync::publish_report>& reports) {
    std::vector<std::thread> t;
    reports.assign(ranks.size(), {});
    for (std::size_t r = 0; r < ranks.size(); ++r) t.emplace_back([&, r] { reports[r] = ranks[r]->tx.publish(version, ranks[r]->views()); });
    for (auto& x : t) x.join();
  };

  std::vector<sync::publish_report> reports;
  for (std::uint64_t v = 1; v <= 5; ++v) {
    if (v > 1) model.step();
    for (auto& r : ranks) r->take(full, model.views());
    publish_all(v, reports);
    for (const auto& rep : reports) CHECK(rep.acknowledged == 2);
    const std::uint64_t whole = sharded_checksum(ranks);
    CHECK(reports[0].target_checksum + reports[1].target_checksum == whole);
    for (auto& w : workers) {
      std::shared_lock lock(w->rx->weights_mutex());
      CHECK(w->rx->has_version());
      CHECK(w->rx->version() == v);
      CHECK(w->rx->checksum() == whole);
      CHECK(same_bytes(full, w->weights, model.weights()));
    }
  }

  // Worker 0's link from rank 1 corrupts a bucket of version 6: the whole version is refused (rank 0's shard
  // too), then both ranks heal worker 0 with full transfers of their shards; worker 1 never notices.
  model.step();
  for (auto& r : ranks) r->take(full, model.views());
  workers[0]->flips[1]->store(0);
  publish_all(6, reports);
  for (const auto& rep : reports) CHECK(rep.acknowledged == 2);  // healed within the publish
  CHECK(refused == 1);
  for (auto& w : workers) CHECK(same_bytes(full, w->weights, model.weights()));
  const auto got0 = record_of(0, 6), got1 = record_of(1, 6);
  CHECK(got0.size() == 6);
  CHECK(got1.size() == 6);
  if (got0.size() == 6 && got1.size() == 6) {
    CHECK(got0.back().version == 6);
    CHECK(got0.back().full);
    CHECK(got0.back().shards.size() == 2);
    CHECK_FALSE(got1.back().full);
  }
  for (auto& r : ranks) {
    const auto st = r->tx.receivers();
    CHECK(st[0].full_transfers == 1);
    CHECK(st[1].full_transfers == 0);
  }

  for (auto& r : ranks) r->tx.close();
  for (auto& t : worker_threads) t.join();
  CHECK(refused == 1);
  for (std::size_t i = 0; i < workers.size(); ++i) {
    CHECK(got[i].size() == 6);
    for (std::size_t k = 0; k < got[i].size(); ++k) CHECK(got[i][k].version == k + 1);
  }
}

TEST_CASE("a refused shard leaves every shard of the worker on the old version, bit for bit") {
  const auto full = test_layout();
  gen::adam_bf16_options go;
  go.seed = 9;
  go.lr = 3e-5;
  go.threads = 1;
  gen::adam_bf16_model model(full, go);
  sync::sender_options so;
  so.ack_timeout = std::chrono::seconds(60);
  so.lag_grace = std::chrono::seconds(60);  // a healing worker is waited for, not marked lagging (slow sanitizer builds)
  std::vector<std::unique_ptr<trainer_rank>> ranks;
  for (std::size_t r = 0; r < 2; ++r) ranks.push_back(std::make_unique<trainer_rank>(full, flat_shard(full, r, 2), so));
  std::vector<std::unique_ptr<worker>> workers;
  workers.push_back(std::make_unique<worker>(full));
  connect(full, ranks, workers);
  auto& w = *workers[0];

  auto publish_async = [&](std::uint64_t v0, std::uint64_t v1) {
    std::vector<std::thread> t;
    t.emplace_back([&, v0] { (void)ranks[0]->tx.publish(v0, ranks[0]->views()); });
    t.emplace_back([&, v1] { (void)ranks[1]->tx.publish(v1, ranks[1]->views()); });
    return t;
  };
  for (auto& r : ranks) r->take(full, model.views());
  auto t1 = publish_async(1, 1);
  CHECK(w.rx->next());
  for (auto& t : t1) t.join();
  gen::tensor_set v1(full);
  for (std::size_t t = 0; t < full.size(); ++t) std::memcpy(v1.mutable_views()[t].data, w.weights.tensor(t).data, full[t].bytes());
  CHECK(same_bytes(full, v1, model.weights()));

  model.step();
  for (auto& r : ranks) r->take(full, model.views());
  w.flips[0]->store(0);  // rank 0's shard arrives damaged; rank 1's is fine
  auto t2 = publish_async(2, 2);
  CHECK_THROWS_AS(w.rx->next(), error);
  {
    std::shared_lock lock(w.rx->weights_mutex());
    CHECK(same_bytes(full, w.weights, v1));  // rank 1's verified patch was not written either
    CHECK(w.rx->has_version());
    CHECK(w.rx->version() == 1);
  }
  auto healed = w.rx->next();  // both ranks heard the nack: full transfers of their shards of version 2
  for (auto& t : t2) t.join();
  REQUIRE(healed);  // (every thread of this test is joined here)
  CHECK(healed->version == 2);
  CHECK(healed->full);
  CHECK(same_bytes(full, w.weights, model.weights()));
  CHECK(healed->checksum == sharded_checksum(ranks));

  // Ranks that disagree on the version number: refused, weights untouched.
  model.step();
  for (auto& r : ranks) r->take(full, model.views());
  auto t3 = publish_async(3, 4);
  CHECK_THROWS_WITH_AS(w.rx->next(), doctest::Contains("sent version 4"), error);
  CHECK(w.rx->version() == 2);
  w.rx->close();  // the ranks' sessions, now sending full transfers nobody reads, see the link end
  for (auto& r : ranks) r->tx.close();
  for (auto& t : t3) t.join();
}
