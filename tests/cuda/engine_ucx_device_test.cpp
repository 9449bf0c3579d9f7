// The one sync engine over UCX with device frames: a trainer on GPU 0 in this process (sync::sender + device_source,
// frames kept on the GPU) and rollout workers as processes on the last GPU (engine_ucx_device_worker.cpp:
// sync::receiver + device_sink), each on a ucx_device_link whose control is the host UCX transport with a key, its
// frames GPU to GPU as UCX tagged messages of CUDA memory (cuda_ipc within the host). Processes, because CUDA IPC
// maps memory of another process only. Checked: every version bit-identical in atomic and streamed commit (a hash
// of each worker's downloaded weights against the trainer's host copy) with the frames carried on the device path;
// a frame damaged on the device path refused with the weights untouched, healed by a full transfer; a worker
// SIGKILLed with a version's frames in flight, and one that hangs mid-version, not holding the trainer (publish
// returns long before any bound, the others finish). The trainer's link timeout is 2 s, the workers' 6 s.
// Exits 77 (skipped) with fewer than two CUDA devices; not built where UCX has no CUDA transports (CMake says why).
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/key.hpp>
#include <sparsesync/transport/ucx.hpp>
#include <sparsesync/transport/ucx_device_link.hpp>

#include <doctest/doctest.h>

#include "gpu_sync_fixtures.hpp"
#include "line_process.hpp"
#include "require_gpu.cuh"  // host code only

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

using namespace sparsesync;
using namespace std::chrono_literals;
namespace sc = sparsesync::cuda;

namespace {

const int gpu_count = sparsesync_test::require_gpus_or_skip(2);
const int worker_gpu = gpu_count - 1;

using device_link = ucx_device_link<ucx_transport>;
static_assert(check_device_link<device_link>);

std::string hex(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

std::uint64_t fnv1a(const std::vector<std::uint16_t>& w) {  // as engine_ucx_device_worker.cpp
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const auto x : w) {
    h = (h ^ (x & 0xff)) * 0x100000001b3ull;
    h = (h ^ (x >> 8)) * 0x100000001b3ull;
  }
  return h;
}

struct gpu_worker : sparsesync_test::line_process {
  gpu_worker(std::uint16_t port, const std::string& key_file, const std::string& commit, std::uint64_t flip_at = 0, std::uint64_t stall_at = 0)
      : line_process({SPARSESYNC_UCX_DEVICE_WORKER, "--port", std::to_string(port), "--key-file", key_file, "--device", std::to_string(worker_gpu),
                      "--commit", commit, "--flip-at", std::to_string(flip_at), "--stall-at", std::to_string(stall_at)}) {}
};

// The trainer: a sender on GPU 0 whose receivers join through a UCX listener with a key (an acceptor thread).
struct trainer {
  using sender_t = sync::sender<rice, fixed_bytes, device_link, sync::device_source>;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("sparsesync-ucx-device-" + std::to_string(::getpid()));
  std::string key_file = (dir / "key").string();
  std::shared_ptr<ucx_context> context = ucx_context::create();
  ucx_options opt;
  std::unique_ptr<ucx_listener> listener;
  sparsesync_test::stream_holder stream;
  model_layout layout = sparsesync_test::test_layout();
  std::vector<std::uint16_t> host = sparsesync_test::random_weights(layout.numel());
  std::mt19937_64 rng{5};
  sparsesync_test::device_model model{layout};
  std::vector<const_tensor_view> views;
  std::unique_ptr<sender_t> tx;
  std::atomic<bool> stop{false};
  std::mutex transports_mutex;
  std::string transports;  // the first link's endpoint, as UCX configured it
  std::thread acceptor;

  trainer() {
    std::filesystem::create_directories(dir);
    opt.key = pre_shared_key::generate();
    opt.receive_timeout = 60s;
    write_key_file(key_file, *opt.key);
    listener = std::make_unique<ucx_listener>(context, "127.0.0.1", 0, opt);
    model.upload(host);
    const auto v = sparsesync_test::device_views(layout, model);
    views.assign(v.begin(), v.end());
    sync::sender_options so;
    so.lag_grace = 1s;
    so.ack_timeout = 60s;
    so.encode.mode = value_mode::ulp;
    sc::device_source_options ds;
    ds.stream = stream.s;
    ds.frames_on_device = true;
    tx = std::make_unique<sender_t>(layout, so, fixed_bytes{1u << 20}, sync::device_source<rice>(sc::compiled_device_encoder_backend(ds)));
    acceptor = std::thread([this] {
      cudaSetDevice(0);
      ucx_device_link_options lo;
      lo.device = 0;
      lo.timeout = 2s;
      while (!stop) {
        try {
          auto link = device_link::connect_sender(listener->accept(1s), lo);
          {
            std::lock_guard lock(transports_mutex);
            if (transports.empty()) transports = link.transports();
          }
          tx->add_receiver(std::move(link));
        } catch (const std::exception&) {
          // accept timed out (or a worker died while joining): look at `stop` again
        }
      }
    });
  }
  ~trainer() {
    stop = true;
    acceptor.join();
    tx->close();
    listener->close();
    std::filesystem::remove_all(dir);
  }
  std::uint16_t port() const { return listener->port(); }

  std::pair<sync::publish_report, double> publish(std::uint64_t v) {
    if (v > 1) {
      sparsesync_test::step(host, rng);
      model.upload(host);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = tx->publish(v, views);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE("version " << v << ": " << r.acknowledged << " acknowledged, " << r.lagging << " lagging, publish " << s * 1e3 << " ms");
    return {r, s};
  }
};

}  // namespace

TEST_CASE("over UCX device frames: every version bit-identical in both commit modes, frames GPU to GPU") {
  sc::throw_on_cuda_error(cudaSetDevice(0), "cudaSetDevice");
  trainer t;
  gpu_worker atomic_w(t.port(), t.key_file, "atomic"), streamed_w(t.port(), t.key_file, "streamed");
  REQUIRE(t.tx->wait_for_receivers(2, 60s));
  {
    std::lock_guard lock(t.transports_mutex);
    MESSAGE("the trainer's endpoint, as UCX configured it:\n" << t.transports);
  }
  for (std::uint64_t v = 1; v <= 5; ++v) {
    const auto [r, s] = t.publish(v);
    CHECK(r.acknowledged == 2);
    const std::string weights = "weights " + std::to_string(v) + " " + hex(fnv1a(t.host));
    CHECK(atomic_w.wait_for_line(weights, 30s));
    CHECK(streamed_w.wait_for_line(weights, 30s));
  }
  t.tx->close();
  for (auto* w : {&atomic_w, &streamed_w}) {
    REQUIRE(w->wait_for_line("device ", 30s));
    MESSAGE("worker's device path: " << w->last_line);
    unsigned long long frames = 0, bytes = 0;
    CHECK(std::sscanf(w->last_line.c_str(), "device %llu %llu", &frames, &bytes) == 2);
    CHECK(frames >= 4);  // every patch's buckets came on the device path
    CHECK(bytes > 0);
    CHECK(w->join() == 0);
  }
}

TEST_CASE("over UCX device frames: a frame damaged on the device path is refused, the weights untouched, healed by a full transfer") {
  sc::throw_on_cuda_error(cudaSetDevice(0), "cudaSetDevice");
  trainer t;
  gpu_worker atomic_w(t.port(), t.key_file, "atomic", 3), streamed_w(t.port(), t.key_file, "streamed", 3);
  REQUIRE(t.tx->wait_for_receivers(2, 60s));
  std::string at2;
  for (std::uint64_t v = 1; v <= 2; ++v) {
    CHECK(t.publish(v).first.acknowledged == 2);
    at2 = hex(fnv1a(t.host));
    CHECK(atomic_w.wait_for_line("weights " + std::to_string(v) + " " + at2, 30s));
    CHECK(streamed_w.wait_for_line("weights " + std::to_string(v) + " " + at2, 30s));
  }
  // The sender follows the nack with a full transfer: publish() returns with both healed at version 3.
  CHECK(t.publish(3).first.acknowledged == 2);
  const std::string at3 = hex(fnv1a(t.host));
  for (auto* w : {&atomic_w, &streamed_w}) {
    // Refused, holding version 2's weights bit for bit (streamed commit rolled back what it had applied), then healed.
    CHECK(w->wait_for_line("refused 3 " + at2, 30s));
    CHECK(w->wait_for_line("applied 3 full", 30s));
    CHECK(w->wait_for_line("weights 3 " + at3, 30s));
  }
  for (std::uint64_t v = 4; v <= 5; ++v) {
    CHECK(t.publish(v).first.acknowledged == 2);
    const std::string weights = "weights " + std::to_string(v) + " " + hex(fnv1a(t.host));
    CHECK(atomic_w.wait_for_line(weights, 30s));
    CHECK(streamed_w.wait_for_line(weights, 30s));
  }
  t.tx->close();
  CHECK(atomic_w.join() == 0);
  CHECK(streamed_w.join() == 0);
}

TEST_CASE("over UCX device frames: a worker killed or hung mid-version does not hold the trainer") {
  sc::throw_on_cuda_error(cudaSetDevice(0), "cudaSetDevice");
  trainer t;
  gpu_worker good(t.port(), t.key_file, "atomic");
  auto victim = std::make_unique<gpu_worker>(t.port(), t.key_file, "atomic", 0, 3);
  REQUIRE(t.tx->wait_for_receivers(2, 60s));
  for (std::uint64_t v = 1; v <= 2; ++v) CHECK(t.publish(v).first.acknowledged == 2);

  // Version 3: the victim stops at its first device frame, and is SIGKILLed as soon as it says so.
  std::thread killer([&] {
    if (victim->wait_for_line("stalled 3", 30s)) ::kill(victim->pid, SIGKILL);
  });
  const auto [r3, s3] = t.publish(3);
  killer.join();
  CHECK(r3.acknowledged == 1);
  CHECK(s3 < 10.0);  // the other finished: the dead worker's frames were not waited for
  CHECK(victim->join() == -1);
  CHECK(good.wait_for_line("weights 3 " + hex(fnv1a(t.host)), 30s));

  // A worker that hangs mid-version and stays alive: after the lag bound the other's version is done, it is
  // marked lagging, and publish() returns; its link aborts after 2 s without progress.
  auto hung = std::make_unique<gpu_worker>(t.port(), t.key_file, "streamed", 0, 5);
  REQUIRE(t.tx->wait_for_receivers(2, 60s));
  CHECK(t.publish(4).first.acknowledged == 2);
  const auto [r5, s5] = t.publish(5);
  CHECK(r5.acknowledged == 1);
  CHECK(r5.lagging == 1);
  CHECK(s5 < 10.0);
  CHECK(hung->wait_for_line("stalled 5", 10s));
  const auto [r6, s6] = t.publish(6);  // the hung worker's frames never leave; the other goes on
  CHECK(r6.acknowledged == 1);
  CHECK(s6 < 10.0);
  hung.reset();  // killed
  CHECK(good.wait_for_line("weights 6 " + hex(fnv1a(t.host)), 30s));
  t.tx->close();
  CHECK(good.join() == 0);
}
