// A GPU rollout worker process for engine_ucx_device_test.cpp: connects to the trainer over the host UCX transport
// with the key in --key-file, sets up a ucx_device_link on GPU --device, and applies versions into its own GPU weights
// (the test model of gpu_sync_fixtures.hpp) with a device_sink in --commit mode. Per version it prints
// "applied VERSION full|patch CHECKSUM" and "weights VERSION HASH" (FNV-1a of the weights it holds, downloaded), or
// "refused VERSION HASH" for a version it refused (the weights it holds then); at the end "device FRAMES BYTES" (what
// its link carried on the device path). --flip-at V flips a byte of the first device frame of version V after it
// arrived (a frame damaged on the device path); --stall-at V stops once the first device frame of version V is
// announced, prints "stalled V" and sleeps (stalling_link.hpp).
//
//   engine_ucx_device_worker --port P --key-file F --device D [--commit atomic|streamed] [--flip-at V] [--stall-at V]
//                            [--timeout-ms T (6000: 3x the trainer's 2 s)]
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>
#include <sparsesync/format/wire.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/transport/ucx.hpp>
#include <sparsesync/transport/ucx_device_link.hpp>

#include "gpu_sync_fixtures.hpp"
#include "stalling_link.hpp"
#include "worker_support.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

namespace ss = sparsesync;

namespace {

using device_link = ss::ucx_device_link<ss::ucx_transport>;
using sparsesync_test::arg_value;

// Flips the last byte (inside the chunk data, past the header) of the first device frame of version `flip_at`.
class flipping_link {
 public:
  using transport_concept = ss::transport_tag;
  using device_link_concept = ss::device_link_tag;
  flipping_link(device_link inner, std::uint64_t flip_at, std::shared_ptr<std::uint64_t[]> carried)
      : inner_(std::move(inner)), flip_at_(flip_at), carried_(std::move(carried)) {}
  void send(std::span<const std::byte> m) { inner_.send(m); }
  bool receive(std::vector<std::byte>& out) {
    if (!inner_.receive(out)) return false;
    if (ss::sync::type_of(out) == ss::sync::message_type::version_begin) {
      ss::patch_prologue pro;
      if (ss::parse_patch_prologue(ss::sync::body_of(out), pro)) version_ = pro.header.target_version;
    }
    return true;
  }
  void close() noexcept { inner_.close(); }
  [[nodiscard]] std::size_t max_frame_size() const noexcept { return inner_.max_frame_size(); }
  void send_device(const ss::device_frame& f) { inner_.send_device(f); }
  void receive_device(void* dst, std::size_t bytes, void* after, std::span<unsigned char> head) {
    inner_.receive_device(dst, bytes, after, head);
    ++carried_[0];
    carried_[1] += bytes;
    if (flip_at_ && version_ == flip_at_ && !flipped_) {
      flipped_ = true;
      unsigned char b = 0;
      auto* at = static_cast<unsigned char*>(dst) + bytes - 1;
      ss::cuda::throw_on_cuda_error(cudaMemcpy(&b, at, 1, cudaMemcpyDeviceToHost), "read");
      b ^= 0x5a;
      ss::cuda::throw_on_cuda_error(cudaMemcpy(at, &b, 1, cudaMemcpyHostToDevice), "write");
    }
  }
  void abort() noexcept { inner_.abort(); }

 private:
  device_link inner_;
  std::uint64_t flip_at_;
  std::uint64_t version_ = 0;
  bool flipped_ = false;
  std::shared_ptr<std::uint64_t[]> carried_;  // device frames and bytes received
};

std::uint64_t fnv1a(const std::vector<std::uint16_t>& w) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const auto x : w) {
    h = (h ^ (x & 0xff)) * 0x100000001b3ull;
    h = (h ^ (x >> 8)) * 0x100000001b3ull;
  }
  return h;
}

ss::ucx_transport connect_retrying(const std::shared_ptr<ss::ucx_context>& ctx, std::uint16_t port, const ss::ucx_options& opt) {
  for (int attempt = 0;; ++attempt) {
    try {
      return ss::ucx_transport::connect(ctx, "127.0.0.1", port, opt);
    } catch (const ss::transport_error& e) {
      if (e.transport_code() != ss::transport_errc::connect_failed || attempt >= 100) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const auto port = static_cast<std::uint16_t>(std::stoul(arg_value(argc, argv, "--port", "0")));
  const std::uint64_t stall_at = std::stoull(arg_value(argc, argv, "--stall-at", "0"));
  const std::uint64_t flip_at = std::stoull(arg_value(argc, argv, "--flip-at", "0"));
  const int device = std::stoi(arg_value(argc, argv, "--device", "0"));
  const std::string commit = arg_value(argc, argv, "--commit", "atomic");
  ss::cuda::throw_on_cuda_error(cudaSetDevice(device), "cudaSetDevice");
  ss::ucx_options opt;
  opt.key = ss::load_key_file(arg_value(argc, argv, "--key-file", ""));
  ss::ucx_device_link_options lo;
  lo.device = device;
  lo.timeout = std::chrono::milliseconds(std::stoll(arg_value(argc, argv, "--timeout-ms", "6000")));
  const auto layout = sparsesync_test::test_layout();
  sparsesync_test::device_model weights(layout);
  const auto views = sparsesync_test::device_views(layout, weights);
  auto control = connect_retrying(ss::ucx_context::create(), port, opt);
  auto link = device_link::connect_receiver(std::move(control), lo);
  ss::cuda::device_sink_options so;
  so.commit = commit == "streamed" ? ss::cuda::frame_commit_mode::streamed : ss::cuda::frame_commit_mode::atomic;
  using stalling = sparsesync_test::stalling_link<flipping_link>;
  std::shared_ptr<std::uint64_t[]> carried(new std::uint64_t[2]{0, 0});
  ss::sync::receiver<stalling, ss::sync::device_sink> rx(layout, ss::sync::device_sink(ss::cuda::compiled_device_applier_backend(layout, views, so)),
                                                           stalling(flipping_link(std::move(link), flip_at, carried), stall_at,
                                                                    ss::sync::message_type::bucket_device));
  std::uint64_t last = 0;
  for (;;) {
    try {
      const auto v = rx.next();
      if (!v) break;
      last = v->version;
      std::printf("applied %llu %s %016llx\nweights %llu %016llx\n", static_cast<unsigned long long>(v->version), v->full ? "full" : "patch",
                  static_cast<unsigned long long>(v->checksum), static_cast<unsigned long long>(v->version),
                  static_cast<unsigned long long>(fnv1a(weights.download())));
    } catch (const ss::error& e) {
      std::printf("refused %llu %016llx (%s)\n", static_cast<unsigned long long>(last + 1), static_cast<unsigned long long>(fnv1a(weights.download())),
                  e.what());
    }
    std::fflush(stdout);
  }
  std::printf("device %llu %llu\n", static_cast<unsigned long long>(carried[0]), static_cast<unsigned long long>(carried[1]));
  std::fflush(stdout);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "engine_ucx_device_worker: %s\n", e.what());
  return 1;
}
