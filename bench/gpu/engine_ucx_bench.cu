// The one sync engine between two processes on two GPUs of one host, over three links in one run: nccl_link (frames
// on an NCCL pair communicator), ucx_device_link (frames as UCX tagged messages of CUDA memory: cuda_ipc within the
// host), and the host UCX transport (frames staged through host memory by the engine: the baseline a host transport
// gives). Every link's control is the host UCX transport with a key. The trainer (this process, GPU 0) spawns the
// worker (this binary with --worker, GPU 1: a separate process, as CUDA IPC needs), which regenerates the trainer's
// weights on its GPU and checks its own bit for bit after every version. Also, on the same pair: the bandwidth of one
// dense frame (cudaMalloc'd, --dense-mb) through ncclBroadcast on a 2-rank communicator of NCCL's defaults, through
// nccl_link, and through ucx_device_link. The ucx_device_link's endpoint, as UCX configured it, is printed (set
// UCX_PROTO_INFO=y to see the protocols UCX picks per message size and memory type).
//
//   engine_ucx_bench [--layers N (28)] [--density D (0.01)] [--versions V (5)] [--links nccl,ucx-device,ucx-host]
//                    [--commit atomic|streamed] [--dense-mb M (2048)] [--dense-reps R (5)] [--json FILE]
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/key.hpp>
#include <sparsesync/transport/nccl_link.hpp>
#include <sparsesync/transport/ucx.hpp>
#include <sparsesync/transport/ucx_device_link.hpp>

#include "bench_support.cuh"
#include "line_process.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace sparsesync;
namespace sc = sparsesync::cuda;
using namespace bench_gpu;
using namespace std::chrono_literals;

namespace {

struct options {
  std::uint64_t layers = 28;
  double density = 0.01;
  int versions = 5;
  std::vector<std::string> links{"nccl", "ucx-device", "ucx-host"};
  std::string commit = "atomic";
  std::uint64_t dense_mb = 2048;
  int dense_reps = 5;
  std::string json;
  // Worker only.
  bool worker = false;
  std::uint16_t port = 0;
  std::string key_file;
};

using ucx_nccl_link = nccl_link<ucx_transport>;
using ucx_dev_link = ucx_device_link<ucx_transport>;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

nccl_link_options nccl_options(int device) {
  nccl_link_options o;
  o.device = device;
  o.timeout = 60s;
  return o;
}
ucx_device_link_options ucx_dev_options(int device) {
  ucx_device_link_options o;
  o.device = device;
  o.timeout = 60s;
  return o;
}

void send_word(ucx_transport& t, const std::string& w) {
  t.send(std::span(reinterpret_cast<const std::byte*>(w.data()), w.size()));
}
std::string receive_word(ucx_transport& t) {
  std::vector<std::byte> m;
  if (!t.receive(m)) throw std::runtime_error("the peer closed");
  return std::string(reinterpret_cast<const char*>(m.data()), m.size());
}

// ---------------- the worker (GPU 1) ----------------

// The trainer's weights at version v, regenerated here: fill, then steps 2..v (bench_support.cuh's stateless hash).
struct reference_weights {
  gpu_model ref;
  int at = 0;
  explicit reference_weights(const model_layout& l) : ref(l) {}
  void advance_to(int v, double density, cudaStream_t s) {
    const auto threshold = static_cast<std::uint64_t>(density * static_cast<double>(1ull << 53));
    if (at == 0 || v < at) {
      fill_kernel<<<4096, 256, 0, s>>>(ref.data, ref.n, 1);
      at = 1;
    }
    for (; at < v;) step_kernel<<<4096, 256, 0, s>>>(ref.data, ref.n, static_cast<std::uint64_t>(++at), threshold);
    CK(cudaStreamSynchronize(s));
  }
};

template <class Link>
void worker_engine(const std::string& name, const model_layout& layout, const options& o, Link link, gpu_model& weights, reference_weights& ref,
                   cudaStream_t stream) {
  CK(cudaMemset(weights.data, 0, weights.n * 2));
  sc::device_sink_options so;
  so.stream = stream;
  so.commit = o.commit == "streamed" ? sc::frame_commit_mode::streamed : sc::frame_commit_mode::atomic;
  sync::receiver<Link, sync::device_sink> rx(layout, sync::device_sink(sc::compiled_device_applier_backend(layout, weights.views, so)), std::move(link));
  while (auto v = rx.next()) {
    ref.advance_to(static_cast<int>(v->version), o.density, stream);
    std::printf("verified %s %llu %llu %.3f\n", name.c_str(), static_cast<unsigned long long>(v->version),
                static_cast<unsigned long long>(count_differences(weights, ref.ref)), v->seconds * 1e3);
    std::fflush(stdout);
  }
}

int run_worker(const options& o) {
  const int device = 1;
  CK(cudaSetDevice(device));
  ucx_options uo;
  uo.key = load_key_file(o.key_file);
  auto ctx = ucx_context::create();
  const auto connect = [&] {
    for (int attempt = 0;; ++attempt) {
      try {
        return ucx_transport::connect(ctx, "127.0.0.1", o.port, uo);
      } catch (const transport_error& e) {
        if (e.transport_code() != transport_errc::connect_failed || attempt > 100) throw;
        std::this_thread::sleep_for(100ms);
      }
    }
  };
  const auto layout = qwen7b_layout(o.layers);
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    // Dense frames: one buffer, received o.dense_reps times per path.
    const std::size_t bytes = o.dense_mb << 20;
    void* dst = nullptr;
    CK(cudaMalloc(&dst, bytes));
    auto c = connect();
    {
      nccl_communicator comm(receive_unique_id(c), device);
      for (int r = 0; r < o.dense_reps + 1; ++r) {
        (void)receive_word(c);
        if (ncclBroadcast(dst, dst, bytes, ncclUint8, 0, comm.get(), stream) != ncclSuccess) throw std::runtime_error("ncclBroadcast");
        CK(cudaStreamSynchronize(stream));
        send_word(c, "done");
      }
    }
    auto nl = ucx_nccl_link::connect_receiver(connect(), nccl_options(device));
    for (int r = 0; r < o.dense_reps + 1; ++r) {
      (void)receive_word(nl.control());
      nl.receive_device(dst, bytes, nullptr, {});
      send_word(nl.control(), "done");
    }
    auto ul = ucx_dev_link::connect_receiver(connect(), ucx_dev_options(device));
    for (int r = 0; r < o.dense_reps + 1; ++r) {
      (void)receive_word(ul.control());
      ul.receive_device(dst, bytes, nullptr, {});
      send_word(ul.control(), "done");
    }
    CK(cudaFree(dst));
  }
  gpu_model weights(layout);
  reference_weights ref(layout);
  for (const auto& name : o.links) {
    if (name == "nccl") worker_engine(name, layout, o, ucx_nccl_link::connect_receiver(connect(), nccl_options(device)), weights, ref, stream);
    else if (name == "ucx-device") worker_engine(name, layout, o, ucx_dev_link::connect_receiver(connect(), ucx_dev_options(device)), weights, ref, stream);
    else worker_engine(name, layout, o, connect(), weights, ref, stream);
  }
  std::printf("worker done\n");
  std::fflush(stdout);
  return 0;
}

// ---------------- the trainer (GPU 0) ----------------

void dense_row(const char* row, std::size_t bytes, std::vector<double> ms) {
  char line[512];
  std::snprintf(line, sizeof line, "\"row\":\"%s\",\"bytes\":%llu,\"reps\":%zu,\"median_ms\":%.3f,\"gb_per_s\":%.1f", row,
                static_cast<unsigned long long>(bytes), ms.size(), median(ms), static_cast<double>(bytes) / median(ms) / 1e6);
  emit(line);
}

// One round: a word on the control link, the frame, the worker's "done" (a control round trip, microseconds).
template <class Send>
std::vector<double> dense_rounds(ucx_transport& control, int reps, Send send) {
  std::vector<double> ms;
  for (int r = 0; r < reps + 1; ++r) {  // the first round sets up (registration, IPC handles): not counted
    CK(cudaDeviceSynchronize());
    const auto t = std::chrono::steady_clock::now();
    send_word(control, "go");
    send();
    if (receive_word(control) != "done") throw std::runtime_error("dense: the worker did not confirm");
    if (r) ms.push_back(ms_since(t));
  }
  return ms;
}

template <class Link>
void trainer_engine(const std::string& name, const model_layout& layout, const options& o, Link link, gpu_model& trainer,
                    sparsesync_test::line_process& worker, cudaStream_t stream, const std::string& transports = {}) {
  using sender_t = sync::sender<rice, fixed_bytes, Link, sync::device_source>;
  fill_kernel<<<4096, 256, 0, stream>>>(trainer.data, trainer.n, 1);
  CK(cudaStreamSynchronize(stream));
  sync::sender_options so;
  so.encode.mode = value_mode::ulp;
  so.history = 2;
  so.ack_timeout = 300s;
  sc::device_source_options dso;
  dso.stream = stream;
  dso.expected_density = o.density * 1.5;
  dso.frames_on_device = name != "ucx-host";  // a host transport takes host frames: downloaded once, as they are made
  const fixed_bytes policy{sync::device_bucket_bytes};
  const std::size_t buckets = policy.plan(layout, default_log2_chunk).size();
  sender_t tx(layout, so, policy, sync::device_source<rice>(sc::compiled_device_encoder_backend(dso)));
  tx.add_receiver(std::move(link));
  const auto views = trainer.const_views();
  const auto threshold = static_cast<std::uint64_t>(o.density * static_cast<double>(1ull << 53));
  std::vector<double> version_ms;
  std::uint64_t payload = 0;
  for (int v = 1; v <= o.versions + 1; ++v) {
    if (v > 1) {
      step_kernel<<<4096, 256, 0, stream>>>(trainer.data, trainer.n, static_cast<std::uint64_t>(v), threshold);
      CK(cudaStreamSynchronize(stream));
    }
    const auto t = std::chrono::steady_clock::now();
    const auto r = tx.publish(static_cast<std::uint64_t>(v), views);
    const double ms = ms_since(t);
    if (r.acknowledged != 1) throw std::runtime_error(name + ": the worker did not acknowledge version " + std::to_string(v));
    const std::string want = "verified " + name + " " + std::to_string(v) + " ";
    if (!worker.wait_for_line(want, 120s)) throw std::runtime_error(name + ": the worker did not verify version " + std::to_string(v));
    unsigned long long diff = 1;
    double apply_ms = 0;
    std::sscanf(worker.last_line.c_str() + want.size(), "%llu %lf", &diff, &apply_ms);
    if (diff != 0) throw std::runtime_error(name + ": the worker differs from the trainer in " + std::to_string(diff) + " elements");
    char line[800];
    std::snprintf(line, sizeof line,
                  "\"row\":\"engine_version\",\"link\":\"%s\",\"commit\":\"%s\",\"version\":%d,\"full\":%s,\"buckets\":%zu,\"changed\":%llu,"
                  "\"payload_bytes\":%llu,\"version_ms\":%.3f,\"encode_ms\":%.3f,\"worker_version_ms\":%.3f,\"bit_identical\":true",
                  name.c_str(), o.commit.c_str(), v, v == 1 ? "true" : "false", buckets, static_cast<unsigned long long>(r.changed),
                  static_cast<unsigned long long>(r.payload_bytes), ms, r.encode_seconds * 1e3, apply_ms);
    emit(line);
    if (v > 1) {
      version_ms.push_back(ms);
      payload = r.payload_bytes;
    }
  }
  char line[600];
  std::snprintf(line, sizeof line,
                "\"row\":\"engine_summary\",\"link\":\"%s\",\"commit\":\"%s\",\"density\":%.4f,\"versions\":%d,\"model_bytes\":%llu,"
                "\"median_version_ms\":%.3f,\"payload_bytes\":%llu",
                name.c_str(), o.commit.c_str(), o.density, o.versions, static_cast<unsigned long long>(trainer.n * 2), median(version_ms),
                static_cast<unsigned long long>(payload));
  emit(line);
  if (!transports.empty()) std::printf("%s's endpoint (trainer's end):\n%s\n", name.c_str(), transports.c_str());
  tx.close();
}

int run_trainer(const options& o, const char* self) {
  const int device = 0;
  CK(cudaSetDevice(device));
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) {
    std::fprintf(stderr, "engine_ucx_bench: needs two GPUs (found %d)\n", n);
    return 77;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, device));
  g_card = prop.name;
  if (!o.json.empty()) g_json = std::fopen(o.json.c_str(), "w");
  const auto dir = std::filesystem::temp_directory_path() / ("sparsesync-ucx-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto key_file = (dir / "key").string();
  ucx_options uo;
  uo.key = pre_shared_key::generate();
  uo.receive_timeout = 600s;
  write_key_file(key_file, *uo.key);
  auto ctx = ucx_context::create();
  ucx_listener listener(ctx, "127.0.0.1", 0, uo);
  std::vector<std::string> args{self, "--worker", "--port", std::to_string(listener.port()), "--key-file", key_file,
                                "--layers", std::to_string(o.layers), "--density", std::to_string(o.density), "--versions",
                                std::to_string(o.versions), "--links", join(o.links), "--commit", o.commit,
                                "--dense-mb", std::to_string(o.dense_mb), "--dense-reps", std::to_string(o.dense_reps)};
  sparsesync_test::line_process worker(args);
  const auto accept = [&] { return listener.accept(120s); };
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    const std::size_t bytes = o.dense_mb << 20;
    void* src = nullptr;
    CK(cudaMalloc(&src, bytes));
    CK(cudaMemset(src, 0x5a, bytes));
    auto c = accept();
    {
      ucx_transport* peers[] = {&c};
      nccl_communicator comm(share_unique_id<ucx_transport>(std::span<ucx_transport* const>(peers)), device);
      dense_row("dense_nccl_broadcast", bytes, dense_rounds(c, o.dense_reps, [&] {
                  if (ncclBroadcast(src, src, bytes, ncclUint8, 0, comm.get(), stream) != ncclSuccess) throw std::runtime_error("ncclBroadcast");
                }));
    }
    auto nl = ucx_nccl_link::connect_sender(accept(), nccl_options(device));
    dense_row("dense_nccl_link", bytes, dense_rounds(nl.control(), o.dense_reps, [&] { nl.send_device({src, bytes, nullptr, nullptr, {}}); }));
    auto ul = ucx_dev_link::connect_sender(accept(), ucx_dev_options(device));
    dense_row("dense_ucx_device_link", bytes, dense_rounds(ul.control(), o.dense_reps, [&] { ul.send_device({src, bytes, nullptr, nullptr, {}}); }));
    std::printf("ucx-device (dense)'s endpoint (trainer's end):\n%s\n", ul.transports().c_str());
    CK(cudaFree(src));
  }
  {
    gpu_model trainer(qwen7b_layout(o.layers));
    const auto layout = qwen7b_layout(o.layers);
    for (const auto& name : o.links) {
      if (name == "nccl") {
        trainer_engine(name, layout, o, ucx_nccl_link::connect_sender(accept(), nccl_options(device)), trainer, worker, stream);
      } else if (name == "ucx-device") {
        auto l = ucx_dev_link::connect_sender(accept(), ucx_dev_options(device));
        const std::string tr = l.transports();
        trainer_engine(name, layout, o, std::move(l), trainer, worker, stream, tr);
      } else if (name == "ucx-host") {
        trainer_engine(name, layout, o, accept(), trainer, worker, stream);
      } else {
        throw std::runtime_error("unknown link " + name);
      }
    }
  }
  const bool done = worker.wait_for_line("worker done", 60s);
  std::filesystem::remove_all(dir);
  if (g_json) std::fclose(g_json);
  return done && worker.join() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--layers") o.layers = std::stoull(next());
    else if (a == "--density") o.density = std::stod(next());
    else if (a == "--versions") o.versions = std::stoi(next());
    else if (a == "--links") o.links = split(next());
    else if (a == "--commit") o.commit = next();
    else if (a == "--dense-mb") o.dense_mb = std::stoull(next());
    else if (a == "--dense-reps") o.dense_reps = std::stoi(next());
    else if (a == "--json") o.json = next();
    else if (a == "--worker") o.worker = true;
    else if (a == "--port") o.port = static_cast<std::uint16_t>(std::stoul(next()));
    else if (a == "--key-file") o.key_file = next();
    else {
      std::fprintf(stderr, "usage: engine_ucx_bench [--layers N] [--density D] [--versions V] [--links nccl,ucx-device,ucx-host] "
                           "[--commit atomic|streamed] [--dense-mb M] [--dense-reps R] [--json FILE]\n");
      return 2;
    }
  }
  if (o.worker) return run_worker(o);
  std::string self(4096, '\0');
  const auto len = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (len <= 0) throw std::runtime_error("cannot find this executable");
  self.resize(static_cast<std::size_t>(len));
  return run_trainer(o, self.c_str());
} catch (const std::exception& e) {
  std::fprintf(stderr, "engine_ucx_bench: %s\n", e.what());
  return 1;
}
