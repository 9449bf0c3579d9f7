// The one sync engine with GPU weights (sync::sender + device_source -> sync::receiver + device_sink) over the
// in-process transport on one GPU: what a version costs end to end (encode on the GPU, frames down to the host,
// through the transport, up to the worker's GPU, verified, committed, acknowledged) with the trainer's snapshot
// advance included, for the snapshot in GPU memory and in pinned host memory; and, measured in the same run on
// the same card, the baselines: the dense copy that a snapshot update used to cost (cudaMemcpy of the model),
// and a dense sync through host memory (the model down to pinned host memory and up again, no transport).
// Also: the first version (a full transfer, paid once), and the memory each side holds beside its weights.
//
//   engine_bench [--layers N (28)] [--density D (0.01)] [--versions V (5)] [--snapshot device|host|both] [--json FILE]
// The layout is Qwen2.5-7B's (hidden 3584, 28 layers, vocab 152064, GQA 512, MLP 18944, q/k/v biases, untied).
#include <sparsesync/cuda/sync/device_engine.cuh>
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/inproc.hpp>

#include "bench_support.cuh"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace sparsesync;
namespace sc = sparsesync::cuda;

namespace {

using namespace bench_gpu;

struct options {
  std::uint64_t layers = 28;
  double density = 0.01;
  int versions = 5;
  std::string snapshot = "both";
  std::string json;
};

// Dense baselines on this card: the model copied on the GPU (the old snapshot update), and the model taken
// through pinned host memory and back in 256 MiB pieces (a dense sync through host memory without a transport).
void dense_baselines(const gpu_model& src, gpu_model& dst) {
  std::vector<double> d2d, staged;
  const std::size_t piece = 256u << 20;
  unsigned char* pinned = nullptr;
  CK(cudaMallocHost(&pinned, 2 * piece));
  cudaStream_t down, up;
  CK(cudaStreamCreate(&down));
  CK(cudaStreamCreate(&up));
  cudaEvent_t ev[2];
  for (auto& e : ev) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  for (int r = 0; r < 4; ++r) {
    CK(cudaDeviceSynchronize());
    auto t = std::chrono::steady_clock::now();
    CK(cudaMemcpy(dst.data, src.data, src.n * 2, cudaMemcpyDeviceToDevice));
    CK(cudaDeviceSynchronize());
    if (r) d2d.push_back(ms_since(t));
    t = std::chrono::steady_clock::now();
    const std::size_t bytes = src.n * 2;
    // Two pinned halves: piece k goes down on `down` while piece k - 1 goes up on `up`.
    for (std::size_t at = 0, k = 0; at < bytes; at += piece, ++k) {
      const std::size_t len = std::min(piece, bytes - at);
      unsigned char* buf = pinned + (k % 2) * piece;
      CK(cudaStreamSynchronize(up));  // (simple and conservative: the half is free again)
      CK(cudaMemcpyAsync(buf, reinterpret_cast<const unsigned char*>(src.data) + at, len, cudaMemcpyDeviceToHost, down));
      CK(cudaEventRecord(ev[k % 2], down));
      CK(cudaStreamWaitEvent(up, ev[k % 2], 0));
      CK(cudaMemcpyAsync(reinterpret_cast<unsigned char*>(dst.data) + at, buf, len, cudaMemcpyHostToDevice, up));
    }
    CK(cudaDeviceSynchronize());
    if (r) staged.push_back(ms_since(t));
  }
  char line[512];
  std::snprintf(line, sizeof line, "\"row\":\"dense_baselines\",\"model_bytes\":%llu,\"snapshot_copy_d2d_ms\":%.3f,\"dense_host_staged_ms\":%.3f",
                static_cast<unsigned long long>(src.n * 2), median(d2d), median(staged));
  emit(line);
  for (auto& e : ev) cudaEventDestroy(e);
  cudaStreamDestroy(down);
  cudaStreamDestroy(up);
  cudaFreeHost(pinned);
}

void run_engine(const model_layout& layout, const options& o, sync::snapshot_place place, gpu_model& trainer, gpu_model& worker) {
  using sender_t = sync::sender<rice, fixed_bytes, inproc_transport, sync::device_source>;
  using receiver_t = sync::receiver<inproc_transport, sync::device_sink>;
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  fill_kernel<<<4096, 256, 0, stream>>>(trainer.data, trainer.n, 1);
  CK(cudaMemsetAsync(worker.data, 0, worker.n * 2, stream));
  CK(cudaStreamSynchronize(stream));
  std::size_t free0 = 0, total = 0;
  CK(cudaMemGetInfo(&free0, &total));
  {
    sync::sender_options so;
    so.encode.mode = value_mode::ulp;
    sc::device_source_options dso;
    dso.stream = stream;
    dso.snapshot = place;
    dso.expected_density = o.density * 1.5;
    sender_t tx(layout, so, fixed_bytes{}, sc::make_device_source<rice>(dso));
    auto [a, b] = make_inproc_pair();
    tx.add_receiver(std::move(a));
    receiver_t rx(layout, sc::make_device_sink(layout, worker.views, {stream, sc::frame_commit_mode::atomic}), std::move(b));
    std::vector<sync::applied_version> applied;
    std::mutex applied_mutex;
    std::thread worker_thread([&] {
      while (auto v = rx.next()) {
        std::lock_guard g(applied_mutex);
        applied.push_back(*v);
      }
    });
    // The worker acknowledges before its next() returns: wait for its report of version v.
    const auto worker_report = [&](int v) {
      for (;;) {
        {
          std::lock_guard g(applied_mutex);
          if (applied.size() >= static_cast<std::size_t>(v)) return applied[static_cast<std::size_t>(v) - 1];
        }
        std::this_thread::yield();
      }
    };
    const auto views = trainer.const_views();
    const auto threshold = static_cast<std::uint64_t>(o.density * static_cast<double>(1ull << 53));
    std::vector<double> version_ms, encode_ms, snapshot_ms, apply_ms;
    double bits = 0;
    for (int v = 1; v <= o.versions + 1; ++v) {
      if (v > 1) {
        step_kernel<<<4096, 256, 0, stream>>>(trainer.data, trainer.n, static_cast<std::uint64_t>(v), threshold);
        CK(cudaStreamSynchronize(stream));
      }
      const auto t = std::chrono::steady_clock::now();
      const auto r = tx.publish(static_cast<std::uint64_t>(v), views);
      const double ms = ms_since(t);
      if (r.acknowledged != 1) throw std::runtime_error("the worker did not acknowledge version " + std::to_string(v));
      const auto wr = worker_report(v);
      const auto diff = count_differences(trainer, worker);
      if (diff != 0) throw std::runtime_error("the worker differs from the trainer in " + std::to_string(diff) + " elements");
      char line[768];
      std::snprintf(line, sizeof line,
                    "\"row\":\"engine_version\",\"snapshot\":\"%s\",\"version\":%d,\"full\":%s,\"changed\":%llu,\"payload_bytes\":%llu,"
                    "\"version_ms\":%.3f,\"encode_ms\":%.3f,\"source_encode_ms\":%.3f,\"snapshot_ms\":%.3f,\"gpu_wait_ms\":%.3f,\"download_ms\":%.3f,"
                    "\"hand_off_ms\":%.3f,\"launch_ms\":%.3f,"
                    "\"worker_ms\":%.3f,\"bit_identical\":true",
                    place == sync::snapshot_place::device ? "device" : "host_pinned", v, v == 1 ? "true" : "false",
                    static_cast<unsigned long long>(r.changed), static_cast<unsigned long long>(r.payload_bytes), ms, r.encode_seconds * 1e3,
                    r.source.encode_seconds * 1e3, r.snapshot_seconds * 1e3, r.source.gpu_wait_seconds * 1e3, r.source.download_seconds * 1e3,
                    r.source.hand_off_seconds * 1e3, r.source.launch_seconds * 1e3, wr.seconds * 1e3);
      emit(line);
      if (v > 1) {
        version_ms.push_back(ms);
        encode_ms.push_back(r.encode_seconds * 1e3);
        snapshot_ms.push_back(r.snapshot_seconds * 1e3);
        apply_ms.push_back(wr.seconds * 1e3);
        bits = 8.0 * static_cast<double>(r.payload_bytes) / static_cast<double>(std::max<std::uint64_t>(1, r.changed));
      }
    }
    std::size_t free1 = 0;
    CK(cudaMemGetInfo(&free1, &total));
    const auto tm = tx.source().memory();
    const auto wm = rx.sink().memory();
    char line[768];
    std::snprintf(line, sizeof line,
                  "\"row\":\"engine_summary\",\"snapshot\":\"%s\",\"density\":%.4f,\"versions\":%d,\"median_version_ms\":%.3f,"
                  "\"median_encode_ms\":%.3f,\"median_snapshot_advance_ms\":%.3f,\"median_worker_ms\":%.3f,\"bits_per_change\":%.3f,"
                  "\"trainer_snapshot_gpu_bytes\":%llu,\"trainer_snapshot_host_bytes\":%llu,\"trainer_scratch_gpu_bytes\":%llu,"
                  "\"worker_scratch_gpu_bytes\":%llu,\"gpu_bytes_held_by_engine\":%llu",
                  place == sync::snapshot_place::device ? "device" : "host_pinned", o.density, o.versions, median(version_ms), median(encode_ms),
                  median(snapshot_ms), median(apply_ms), bits, static_cast<unsigned long long>(tm.snapshot_device),
                  static_cast<unsigned long long>(tm.snapshot_host), static_cast<unsigned long long>(tm.scratch_device),
                  static_cast<unsigned long long>(wm.scratch_device), static_cast<unsigned long long>(free0 - free1));
    emit(line);
    tx.close();
    worker_thread.join();
  }
  CK(cudaStreamDestroy(stream));
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--layers") o.layers = std::stoull(next());
    else if (a == "--density") o.density = std::stod(next());
    else if (a == "--versions") o.versions = std::stoi(next());
    else if (a == "--snapshot") o.snapshot = next();
    else if (a == "--json") o.json = next();
    else {
      std::fprintf(stderr, "usage: engine_bench [--layers N] [--density D] [--versions V] [--snapshot device|host|both] [--json FILE]\n");
      return 2;
    }
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_card = prop.name;
  if (!o.json.empty()) g_json = std::fopen(o.json.c_str(), "w");
  const auto layout = qwen7b_layout(o.layers);
  char line[256];
  std::snprintf(line, sizeof line, "\"row\":\"setup\",\"layers\":%llu,\"tensors\":%zu,\"numel\":%llu",
                static_cast<unsigned long long>(o.layers), layout.size(), static_cast<unsigned long long>(layout.numel()));
  emit(line);
  try {
    gpu_model trainer(layout), worker(layout);
    dense_baselines(trainer, worker);
    if (o.snapshot == "device" || o.snapshot == "both") run_engine(layout, o, sync::snapshot_place::device, trainer, worker);
    if (o.snapshot == "host" || o.snapshot == "both") run_engine(layout, o, sync::snapshot_place::host_pinned, trainer, worker);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_bench: %s\n", e.what());
    return 1;
  }
  if (g_json) std::fclose(g_json);
  return 0;
}
