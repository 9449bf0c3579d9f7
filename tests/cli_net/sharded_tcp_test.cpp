// Sharded senders as separate processes over TCP on loopback: two trainer processes, each holding only its
// flat shard (core/shard.hpp) and publishing it through its own sync::sender with a key, and two workers
// (sync::sharded_receiver) in this process assembling every version from both. Checked: every version reaches
// both workers bit-identical to the model, with one version number and one whole-model checksum equal to the
// sum of the ranks' reported target checksums; both trainer processes see every version acknowledged by both
// workers and exit cleanly.
#include <sparsesync/core/shard.hpp>
#include <sparsesync/gen/adam_bf16.hpp>
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/sync/sharded_receiver.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <doctest/doctest.h>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

using namespace sparsesync;
using namespace std::chrono_literals;

namespace {

constexpr int versions = 8;
constexpr int world = 2;
constexpr int workers = 2;

model_layout test_layout() { return gen::make_gpt_like_layout(64, 2, 1000); }

gen::adam_bf16_options model_options() {
  gen::adam_bf16_options go;
  go.seed = 21;
  go.lr = 3e-5;
  go.threads = 1;
  return go;
}

void write_all(int fd, const void* p, std::size_t n) {
  const auto* c = static_cast<const char*>(p);
  while (n) {
    const auto w = ::write(fd, c, n);
    if (w <= 0) _exit(20);
    c += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Reads n bytes within `timeout`; false on timeout or end of file.
bool read_all(int fd, void* p, std::size_t n, std::chrono::milliseconds timeout) {
  auto* c = static_cast<char*>(p);
  while (n) {
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, static_cast<int>(timeout.count())) <= 0) return false;
    const auto r = ::read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// One trainer rank, in its own process: its shard only. Writes its port, then each version's target checksum,
// to `out`. Exit code 0 when every version was acknowledged by every worker.
int run_rank(int rank, const asio_tcp_options& opt, int out) {
  alarm(120);  // never outlive the test
  try {
    const auto full = test_layout();
    gen::adam_bf16_model model(full, model_options());
    const auto pieces = flat_shard(full, static_cast<std::size_t>(rank), world);
    const auto layout = shard_layout(full, pieces);
    std::vector<std::vector<unsigned char>> memory;
    for (std::size_t i = 0; i < layout.size(); ++i) memory.emplace_back(layout[i].bytes());
    asio_tcp_listener listener("127.0.0.1", 0, opt);
    const std::uint16_t port = listener.port();
    write_all(out, &port, sizeof port);
    sync::sender_options so;
    so.ack_timeout = 60s;
    so.lag_grace = 60s;
    sync::sender<rice, fixed_bytes, asio_tcp_transport> tx(layout, so, fixed_bytes{16 << 10});
    for (int i = 0; i < workers; ++i) tx.add_receiver(listener.accept(30s));
    for (int v = 1; v <= versions; ++v) {
      if (v > 1) model.step();
      const auto mine = shard_views<const_tensor_view>(full, model.views(), pieces);
      std::vector<const_tensor_view> views;
      for (std::size_t i = 0; i < mine.size(); ++i) {
        std::memcpy(memory[i].data(), mine[i].data, memory[i].size());  // as if this rank's optimizer wrote it
        views.push_back({memory[i].data(), layout[i].numel(), layout[i].dtype});
      }
      const auto r = tx.publish(static_cast<std::uint64_t>(v), views);
      if (r.acknowledged != static_cast<std::size_t>(workers)) return 3;
      write_all(out, &r.target_checksum, sizeof r.target_checksum);
    }
    tx.close();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 4;
  }
}

}  // namespace

TEST_CASE("two trainer processes, two workers over TCP: sharded versions, bit-identical, one checksum per version") {
  asio_tcp_options opt;
  opt.key = pre_shared_key::generate();
  opt.receive_timeout = 60s;
  // The trainer processes start before this process makes any thread (fork copies only the calling thread).
  pid_t pids[world];
  int pipes[world][2];
  for (int r = 0; r < world; ++r) {
    REQUIRE(::pipe(pipes[r]) == 0);
    pids[r] = ::fork();
    REQUIRE(pids[r] >= 0);
    if (pids[r] == 0) {
      ::close(pipes[r][0]);
      _exit(run_rank(r, opt, pipes[r][1]));
    }
    ::close(pipes[r][1]);
  }
  std::uint16_t ports[world] = {};
  for (int r = 0; r < world; ++r) REQUIRE(read_all(pipes[r][0], &ports[r], sizeof ports[r], 30s));

  const auto full = test_layout();
  std::vector<std::unique_ptr<gen::tensor_set>> weights;
  std::vector<std::unique_ptr<sync::sharded_receiver<asio_tcp_transport>>> rx;
  for (int w = 0; w < workers; ++w) {
    weights.push_back(std::make_unique<gen::tensor_set>(full));
    std::vector<std::pair<std::vector<shard_piece>, asio_tcp_transport>> links;
    for (int r = 0; r < world; ++r)
      links.emplace_back(flat_shard(full, static_cast<std::size_t>(r), world), connect_retrying("127.0.0.1", ports[r], opt));
    const auto views = weights.back()->mutable_views();
    rx.push_back(std::make_unique<sync::sharded_receiver<asio_tcp_transport>>(full, views, std::move(links)));
  }

  // Each worker checks every version against the model as the trainer made it (the same generator here).
  std::vector<std::vector<sync::sharded_version>> got(workers);
  std::vector<int> mismatched(workers, 0);
  std::vector<std::string> errors(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      gen::adam_bf16_model model(full, model_options());
      try {
        while (auto v = rx[w]->next()) {
          if (v->version > 1) model.step();
          std::shared_lock lock(rx[w]->weights_mutex());
          for (std::size_t t = 0; t < full.size(); ++t)
            if (std::memcmp(weights[w]->tensor(t).data, model.weights().tensor(t).data, full[t].bytes()) != 0) ++mismatched[w];
          got[w].push_back(*v);
        }
      } catch (const std::exception& e) {
        errors[w] = e.what();
      }
    });
  std::vector<std::uint64_t> rank_sums(versions, 0);
  for (int r = 0; r < world; ++r)
    for (int v = 0; v < versions; ++v) {
      std::uint64_t c = 0;
      REQUIRE(read_all(pipes[r][0], &c, sizeof c, 60s));
      rank_sums[static_cast<std::size_t>(v)] += c;
    }
  for (int r = 0; r < world; ++r) {
    int st = 0;
    REQUIRE(::waitpid(pids[r], &st, 0) == pids[r]);
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    ::close(pipes[r][0]);
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < workers; ++w) {
    CAPTURE(w);
    CHECK(errors[w].empty());
    CHECK(mismatched[w] == 0);
    REQUIRE(got[w].size() == static_cast<std::size_t>(versions));
    for (int v = 0; v < versions; ++v) {
      CHECK(got[w][static_cast<std::size_t>(v)].version == static_cast<std::uint64_t>(v + 1));
      CHECK(got[w][static_cast<std::size_t>(v)].checksum == rank_sums[static_cast<std::size_t>(v)]);
      CHECK(got[w][static_cast<std::size_t>(v)].shards.size() == static_cast<std::size_t>(world));
    }
    CHECK(got[w].front().full);
    CHECK_FALSE(got[w].back().full);
  }
}
