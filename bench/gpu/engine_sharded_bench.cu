// Sharded trainers over NCCL on one host: T trainer ranks (GPUs 0..T-1) each hold only their flat shard of a
// 7B-shaped BF16 model (FSDP-style: a contiguous range of the flattened model) and publish it through their own
// sync::sender (device_source, frames kept on the GPU); W workers on the last W GPUs assemble every version through
// a sync::sharded_receiver of device_sinks, one nccl_link (pair communicator) per rank-worker pair. For each T of
// --trainers, in turn, in one process on the same worker GPUs: the version time (all ranks publish at once; a
// version is done when every rank's publish has its acknowledgements), every worker checked bit-identical against
// a reference model it computes itself, and what each rank's engine holds in GPU memory next to its shard.
// The issue's target: 2 -> 2 at least as fast per version as 1 -> 2, no rank holding more than its shard + O(payload).
//
//   engine_sharded_bench [--layers N (28)] [--density D (0.01)] [--versions V (5)] [--trainers 1,2] [--workers W (2)]
//                        [--encoder varint|rice (varint)] [--commit atomic|streamed (atomic)] [--json FILE]
#include <sparsesync/core/shard.hpp>
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/sync/sharded_receiver.hpp>
#include <sparsesync/transport/inproc.hpp>
#include <sparsesync/transport/nccl_link.hpp>

#include "bench_support.cuh"

#include <atomic>
#include <cstdio>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

using namespace sparsesync;
namespace sc = sparsesync::cuda;

namespace {

using namespace bench_gpu;
using link_t = nccl_link<inproc_transport>;
using receiver_t = sync::sharded_receiver<link_t, sync::device_sink>;

struct options {
  std::uint64_t layers = 28;
  double density = 0.01;
  int versions = 5;
  std::vector<int> trainers{1, 2};
  int workers = 2;
  std::string encoder = "varint";
  std::string commit = "atomic";
  std::string json;
};

struct device_buffer {
  int device;
  std::uint16_t* p = nullptr;
  std::uint64_t n;
  device_buffer(int d, std::uint64_t elements) : device(d), n(elements) {
    CK(cudaSetDevice(d));
    CK(cudaMalloc(&p, n * 2));
    CK(cudaMemset(p, 0, n * 2));
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() {
    cudaSetDevice(device);
    cudaFree(p);
  }
};

// Elements in which two buffers of the current GPU differ.
std::uint64_t differences(const std::uint16_t* a, const std::uint16_t* b, std::uint64_t n) {
  unsigned long long* d = nullptr;
  CK(cudaMalloc(&d, 8));
  CK(cudaMemset(d, 0, 8));
  differ_kernel<<<1024, 256>>>(a, b, n, d);
  unsigned long long h = 0;
  CK(cudaMemcpy(&h, d, 8, cudaMemcpyDeviceToHost));
  CK(cudaFree(d));
  return h;
}

std::size_t free_bytes(int device) {
  CK(cudaSetDevice(device));
  CK(cudaDeviceSynchronize());
  std::size_t f = 0, t = 0;
  CK(cudaMemGetInfo(&f, &t));
  return f;
}

template <class Enc>
void run(const model_layout& full, const options& o, int ranks, int gpus) {
  using sender_t = sync::sender<Enc, fixed_bytes, link_t, sync::device_source>;
  const auto mode = o.commit == "streamed" ? sc::frame_commit_mode::streamed : sc::frame_commit_mode::atomic;
  const auto threshold = static_cast<std::uint64_t>(o.density * static_cast<double>(1ull << 53));
  const std::uint64_t seed = 1;

  // Trainer ranks: a shard each, on GPUs 0..ranks-1.
  struct rank {
    int device;
    std::vector<shard_piece> pieces;
    model_layout layout;
    std::uint64_t first = 0;
    std::unique_ptr<device_buffer> shard;
    std::vector<const_tensor_view> views;  // the shard's tensors (pieces), back to back in `shard`
    cudaStream_t stream{};
    std::size_t free_before = 0;
    std::unique_ptr<sender_t> tx;
  };
  std::vector<rank> rs(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    auto& k = rs[static_cast<std::size_t>(r)];
    k.device = r;
    k.pieces = flat_shard(full, static_cast<std::size_t>(r), static_cast<std::size_t>(ranks));
    k.layout = shard_layout(full, k.pieces);
    k.first = full.first_element(k.pieces.front().tensor) + k.pieces.front().offset;
    k.shard = std::make_unique<device_buffer>(r, k.layout.numel());
    for (std::size_t t = 0; t < k.layout.size(); ++t) k.views.push_back({k.shard->p + k.layout.first_element(t), k.layout[t].numel(), k.layout[t].dtype});
    CK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    fill_kernel<<<4096, 256, 0, k.stream>>>(k.shard->p, k.shard->n, seed, k.first);  // its range of the model
    CK(cudaStreamSynchronize(k.stream));
    k.free_before = free_bytes(r);
    sync::sender_options so;
    so.encode.mode = value_mode::ulp;
    so.history = 2;
    sc::device_source_options dso;
    dso.stream = k.stream;
    dso.expected_density = o.density * 1.5;
    dso.frames_on_device = true;
    CK(cudaSetDevice(r));
    k.tx = std::make_unique<sender_t>(k.layout, so, fixed_bytes{sync::device_bucket_bytes}, sync::device_source<Enc>(sc::compiled_device_encoder_backend(dso)));
  }

  // Workers on the last W GPUs: the model, a reference computed in place, a sharded receiver.
  struct worker {
    int device;
    std::unique_ptr<device_buffer> model, reference;
    std::vector<cudaStream_t> streams;
    std::unique_ptr<receiver_t> rx;
    std::atomic<int> applied{0};
    std::thread thread;
    std::string failure;
  };
  std::vector<std::unique_ptr<worker>> ws;
  for (int w = 0; w < o.workers; ++w) {
    auto x = std::make_unique<worker>();
    x->device = gpus - o.workers + w;
    x->model = std::make_unique<device_buffer>(x->device, full.numel());
    x->reference = std::make_unique<device_buffer>(x->device, full.numel());
    fill_kernel<<<4096, 256>>>(x->reference->p, full.numel(), seed);
    CK(cudaDeviceSynchronize());
    std::vector<tensor_view> views;
    for (std::size_t t = 0; t < full.size(); ++t) views.push_back({x->model->p + full.first_element(t), full[t].numel(), full[t].dtype});
    std::vector<receiver_t::shard_link> links;
    for (auto& k : rs) {
      auto [a, b] = make_inproc_pair();
      nccl_link_options wo;
      wo.device = x->device;
      wo.timeout = std::chrono::seconds(60);
      auto worker_end = std::async(std::launch::async, [b = std::move(b), wo]() mutable { return link_t::connect_receiver(std::move(b), wo); });
      nccl_link_options to;
      to.device = k.device;
      to.timeout = std::chrono::seconds(30);
      k.tx->add_receiver(link_t::connect_sender(std::move(a), to));
      CK(cudaSetDevice(x->device));
      cudaStream_t s{};
      CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      x->streams.push_back(s);
      sc::device_sink_options sink;
      sink.stream = s;
      sink.commit = mode;
      const auto sv = shard_views<tensor_view>(full, views, k.pieces);
      links.push_back({k.pieces, sync::device_sink(sc::compiled_device_applier_backend(k.layout, sv, sink)), worker_end.get()});
    }
    x->rx = std::make_unique<receiver_t>(full, std::move(links));
    ws.push_back(std::move(x));
  }
  for (auto& w : ws)
    w->thread = std::thread([x = w.get()] {
      try {
        while (x->rx->next()) x->applied.fetch_add(1);
      } catch (const std::exception& e) {
        x->failure = e.what();
        x->applied.store(1 << 30);
      }
    });

  std::vector<double> version_ms;
  for (int v = 1; v <= o.versions + 1; ++v) {
    if (v > 1) {
      for (auto& k : rs) {
        CK(cudaSetDevice(k.device));
        step_kernel<<<4096, 256, 0, k.stream>>>(k.shard->p, k.shard->n, static_cast<std::uint64_t>(v), threshold, k.first);
        CK(cudaStreamSynchronize(k.stream));
      }
      for (auto& w : ws) {
        CK(cudaSetDevice(w->device));
        step_kernel<<<4096, 256>>>(w->reference->p, full.numel(), static_cast<std::uint64_t>(v), threshold);
        CK(cudaDeviceSynchronize());
      }
    }
    std::vector<sync::publish_report> reports(rs.size());
    const auto t = std::chrono::steady_clock::now();
    {
      std::vector<std::jthread> pub;
      for (std::size_t i = 0; i < rs.size(); ++i)
        pub.emplace_back([&, i] { reports[i] = rs[i].tx->publish(static_cast<std::uint64_t>(v), rs[i].views); });
    }
    const double ms = ms_since(t);
    std::uint64_t payload = 0, changed = 0;
    double encode_ms = 0;
    for (const auto& r : reports) {
      if (r.acknowledged != ws.size()) throw std::runtime_error("not every worker acknowledged version " + std::to_string(v));
      payload += r.payload_bytes;
      changed += r.changed;
      encode_ms = std::max(encode_ms, r.encode_seconds * 1e3);
    }
    for (auto& w : ws) {
      while (w->applied.load() < v) std::this_thread::yield();
      if (!w->failure.empty()) throw std::runtime_error("worker failed: " + w->failure);
      CK(cudaSetDevice(w->device));
      if (const auto d = differences(w->reference->p, w->model->p, full.numel()); d != 0)
        throw std::runtime_error("worker on GPU " + std::to_string(w->device) + " differs in " + std::to_string(d) + " elements");
    }
    char line[700];
    std::snprintf(line, sizeof line,
                  "\"row\":\"engine_sharded_version\",\"encoder\":\"%s\",\"commit\":\"%s\",\"trainers\":%d,\"workers\":%d,\"version\":%d,"
                  "\"full\":%s,\"changed\":%llu,\"payload_bytes\":%llu,\"version_ms\":%.3f,\"slowest_rank_encode_ms\":%.3f,\"bit_identical\":true",
                  std::string(Enc::name).c_str(), o.commit.c_str(), ranks, o.workers, v, v == 1 ? "true" : "false", static_cast<unsigned long long>(changed),
                  static_cast<unsigned long long>(payload), ms, encode_ms);
    emit(line);
    if (v > 1) version_ms.push_back(ms);
  }
  for (auto& k : rs) {
    const auto m = k.tx->source().memory();
    const std::size_t held = k.free_before - free_bytes(k.device);
    char line[600];
    std::snprintf(line, sizeof line,
                  "\"row\":\"engine_sharded_rank_memory\",\"trainers\":%d,\"rank\":%d,\"shard_bytes\":%llu,\"snapshot_gpu_bytes\":%llu,"
                  "\"scratch_gpu_bytes\":%llu,\"gpu_bytes_held_by_engine\":%llu,\"model_bytes\":%llu",
                  ranks, k.device, static_cast<unsigned long long>(k.layout.numel() * 2), static_cast<unsigned long long>(m.snapshot_device),
                  static_cast<unsigned long long>(m.scratch_device), static_cast<unsigned long long>(held),
                  static_cast<unsigned long long>(full.numel() * 2));
    emit(line);
  }
  char line[400];
  std::snprintf(line, sizeof line,
                "\"row\":\"engine_sharded_summary\",\"encoder\":\"%s\",\"commit\":\"%s\",\"trainers\":%d,\"workers\":%d,\"density\":%.4f,"
                "\"versions\":%d,\"median_version_ms\":%.3f",
                std::string(Enc::name).c_str(), o.commit.c_str(), ranks, o.workers, o.density, o.versions, median(version_ms));
  emit(line);
  for (auto& k : rs) k.tx->close();
  for (auto& w : ws) w->thread.join();
  for (auto& w : ws) {
    w->rx.reset();  // its sinks use the streams below: gone first
    for (auto s : w->streams) {
      cudaSetDevice(w->device);
      cudaStreamDestroy(s);
    }
  }
  for (auto& k : rs) {
    k.tx.reset();
    cudaSetDevice(k.device);
    cudaStreamDestroy(k.stream);
  }
}

std::vector<int> int_list(const std::string& s) {
  std::vector<int> out;
  for (std::size_t at = 0; at < s.size();) {
    const std::size_t end = std::min(s.find(',', at), s.size());
    out.push_back(std::stoi(s.substr(at, end - at)));
    at = end + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as it comes: a crash keeps what was measured
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--layers") o.layers = std::stoull(next());
    else if (a == "--density") o.density = std::stod(next());
    else if (a == "--versions") o.versions = std::stoi(next());
    else if (a == "--trainers") o.trainers = int_list(next());
    else if (a == "--workers") o.workers = std::stoi(next());
    else if (a == "--encoder") o.encoder = next();
    else if (a == "--commit") o.commit = next();
    else if (a == "--json") o.json = next();
    else {
      std::fprintf(stderr, "usage: engine_sharded_bench [--layers N] [--density D] [--versions V] [--trainers 1,2] [--workers W] "
                           "[--encoder varint|rice] [--commit atomic|streamed] [--json FILE]\n");
      return 2;
    }
  }
  int gpus = 0;
  int most = 0;
  for (int t : o.trainers) most = std::max(most, t);
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < most + o.workers) {
    std::printf("fewer than %d CUDA devices (trainers + workers): skipped\n", most + o.workers);
    return 77;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_card = prop.name;
  if (!o.json.empty()) g_json = std::fopen(o.json.c_str(), "w");
  const auto full = qwen7b_layout(o.layers);
  char line[256];
  std::snprintf(line, sizeof line, "\"row\":\"setup\",\"layers\":%llu,\"tensors\":%zu,\"numel\":%llu,\"gpus\":%d,\"workers\":%d",
                static_cast<unsigned long long>(o.layers), full.size(), static_cast<unsigned long long>(full.numel()), gpus, o.workers);
  emit(line);
  try {
    for (int t : o.trainers) {
      if (o.encoder == "rice") run<rice>(full, o, t, gpus);
      else if (o.encoder == "varint" || o.encoder == "delta_varint") run<delta_varint>(full, o, t, gpus);
      else throw std::runtime_error("unknown encoder " + o.encoder + " (varint, rice)");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_sharded_bench: %s\n", e.what());
    return 1;
  }
  if (g_json) std::fclose(g_json);
  return 0;
}
