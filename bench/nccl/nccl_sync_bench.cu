// Sparse sync against dense broadcast over NCCL, one process, one thread per GPU: GPU 0 is the trainer, every
// other GPU a rollout worker. Per version the trainer's weights move by ~density (one or two BF16 ULPs, as
// after an AdamW step at an RL learning rate); the trainer encodes each bucket on its GPU, broadcasts the
// frames, and every worker verifies and applies them in place (all buckets verified before any is written);
// the trainer updates its snapshot by applying the same frames. Dense: one ncclBroadcast of the weights.
// Every version is checked on every worker: its content checksum must equal the trainer's. The sparse
// channel's communicator may use --sparse-ctas CTAs (default 4: the frames are small, and each CTA NCCL holds
// is an SM taken from the encoder); the dense baseline runs on a second communicator with NCCL's defaults.
//
//   nccl_sync_bench [--params 7e9] [--versions 5] [--density 0.01] [--gpus N] [--encoder rice|varint|raw|bitmap]
//                   [--bucket-bytes 1073741824] [--apply atomic|streamed] [--sparse-ctas 4] [--out results.json]
#include <sparsesync/bucketing/fixed_bytes.hpp>
#include <sparsesync/codec/registry.hpp>
#include <sparsesync/cuda/codec.cuh>
#include <sparsesync/cuda/sync/nccl_sync.cuh>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace ss = sparsesync;
namespace sc = sparsesync::cuda;

#define CK(x) sc::throw_on_cuda_error((x), #x)

namespace {

struct options {
  double params = 7e9;
  int versions = 5;
  double density = 0.01;
  int gpus = 0;
  ss::encoder_id encoder = ss::encoder_id::rice;
  std::uint64_t bucket_bytes = 1ull << 30;
  std::string out = "nccl-sync.json";
  // atomic: a worker verifies every bucket of a version before it writes any (the library's guarantee);
  // streamed: it verifies and writes bucket by bucket as they arrive (each bucket verified before written,
  // but a reader could see a mix of versions in between: for engines paused during the update).
  bool streamed = false;
  // CTAs the sparse channel's communicator may use (0: NCCL's default); the dense baseline always gets its
  // own communicator with NCCL's defaults.
  int sparse_ctas = 4;
};

// A Llama-7B-like layout cut to about `params` elements: embeddings, per layer q/k/v/o, gate/up/down, norms.
ss::model_layout make_layout(double params) {
  const std::uint64_t hidden = 4096, mlp = 11008, vocab = 32000;
  const std::uint64_t per_layer = 4 * hidden * hidden + 3 * hidden * mlp + 2 * hidden;
  const auto layers = static_cast<std::uint64_t>(std::max(1.0, (params - 2.0 * vocab * hidden) / static_cast<double>(per_layer)));
  std::vector<ss::tensor_info> t;
  t.push_back({"embed_tokens.weight", ss::dtype::bf16, {vocab, hidden}});
  for (std::uint64_t l = 0; l < layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    for (const char* n : {"q_proj", "k_proj", "v_proj", "o_proj"}) t.push_back({p + "self_attn." + n + ".weight", ss::dtype::bf16, {hidden, hidden}});
    t.push_back({p + "mlp.gate_proj.weight", ss::dtype::bf16, {mlp, hidden}});
    t.push_back({p + "mlp.up_proj.weight", ss::dtype::bf16, {mlp, hidden}});
    t.push_back({p + "mlp.down_proj.weight", ss::dtype::bf16, {hidden, mlp}});
    t.push_back({p + "input_layernorm.weight", ss::dtype::bf16, {hidden}});
    t.push_back({p + "post_attention_layernorm.weight", ss::dtype::bf16, {hidden}});
  }
  t.push_back({"norm.weight", ss::dtype::bf16, {hidden}});
  t.push_back({"lm_head.weight", ss::dtype::bf16, {vocab, hidden}});
  return ss::model_layout(std::move(t));
}

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// Initial weights: BF16 of N(0, ~0.02)-like magnitudes (sign, exponent 2^-9..2^-4, random mantissa).
__global__ void init_kernel(std::uint16_t* w, std::uint64_t n, std::uint64_t seed) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t h = mix64(seed ^ (i * 0x9E3779B97F4A7C15ULL));
    const std::uint16_t exponent = static_cast<std::uint16_t>(118 + (h >> 8) % 6);
    w[i] = static_cast<std::uint16_t>(((h & 1) << 15) | (exponent << 7) | ((h >> 16) & 0x7F));
  }
}

// One version: each element moves one BF16 ULP (10% of them two) with probability `density`.
__global__ void step_kernel(std::uint16_t* w, std::uint64_t n, std::uint64_t seed, std::uint32_t threshold) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t h = mix64(seed ^ (i * 0xD1B54A32D192ED03ULL));
    if (static_cast<std::uint32_t>(h) >= threshold) continue;
    const std::uint16_t step = ((h >> 40) % 10 == 0) ? 2 : 1;
    const std::uint16_t delta = (h >> 32) & 1 ? step : static_cast<std::uint16_t>(-step);
    w[i] = ss::apply_ulp_delta<std::uint16_t>(w[i], delta);
  }
}

// Content checksum (FORMAT.md section 5) of a flat BF16 model: one partial sum per block, added on the host.
__global__ void checksum_kernel(const std::uint16_t* w, std::uint64_t n, unsigned long long* out) {
  std::uint64_t s = 0;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    s += ss::element_hash(i, w[i]);
  s = sc::detail::warp_sum(s);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, static_cast<unsigned long long>(s));
}

std::uint64_t device_checksum(const std::uint16_t* w, std::uint64_t n, cudaStream_t s) {
  unsigned long long* d = nullptr;
  CK(cudaMallocAsync(&d, sizeof *d, s));
  CK(cudaMemsetAsync(d, 0, sizeof *d, s));
  checksum_kernel<<<4096, 256, 0, s>>>(w, n, d);
  unsigned long long h = 0;
  CK(cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, s));
  CK(cudaFreeAsync(d, s));
  CK(cudaStreamSynchronize(s));
  return h;
}

// Device array of per-tensor pointers into one flat buffer (the kernels take scattered pointers).
void** tensor_pointers(const ss::model_layout& layout, std::uint16_t* flat) {
  std::vector<void*> host(layout.size());
  for (std::size_t t = 0; t < layout.size(); ++t) host[t] = flat + layout.first_element(t);
  void** d = nullptr;
  CK(cudaMalloc(&d, host.size() * sizeof(void*)));
  CK(cudaMemcpy(d, host.data(), host.size() * sizeof(void*), cudaMemcpyHostToDevice));
  return d;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct version_record {
  double sparse_ms = 0, encode_ms = 0, dense_ms = 0, snapshot_ms = 0;
  std::uint64_t payload_bytes = 0, changed = 0;
  bool verified = false;
};

}  // namespace

int main(int argc, char** argv) try {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--params") o.params = std::stod(v);
    else if (a == "--versions") o.versions = std::stoi(v);
    else if (a == "--density") o.density = std::stod(v);
    else if (a == "--gpus") o.gpus = std::stoi(v);
    else if (a == "--bucket-bytes") o.bucket_bytes = std::stoull(v);
    else if (a == "--out") o.out = v;
    else if (a == "--sparse-ctas") o.sparse_ctas = std::stoi(v);
    else if (a == "--apply") {
      if (v != "atomic" && v != "streamed") throw std::invalid_argument("--apply takes atomic or streamed");
      o.streamed = v == "streamed";
    }
    else if (a == "--encoder") {
      const auto e = ss::parse_encoder_name(v);
      if (!e) throw std::invalid_argument("unknown encoder " + v);
      o.encoder = *e;
    } else throw std::invalid_argument("unknown option " + a);
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;  // no driver: reported as no GPU below
  const int n_gpus = o.gpus ? o.gpus : devices;
  if (n_gpus < 2 || n_gpus > devices) {
    std::fprintf(stderr, "nccl_sync_bench: needs at least 2 GPUs (%d visible)\n", devices);
    return 77;
  }
  const auto layout = make_layout(o.params);
  const std::uint64_t n = layout.numel();
  const auto plans = ss::fixed_bytes{o.bucket_bytes}.plan(layout, ss::default_log2_chunk);
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%d x %s; model %zu tensors, %.2f G BF16 elements (%.1f GB), %zu buckets, encoder %s/ulp, density %.2f%%\n", n_gpus,
              prop.name, layout.size(), static_cast<double>(n) / 1e9, 2.0 * static_cast<double>(n) / 1e9, plans.size(),
              std::string(ss::encoder_name(o.encoder)).c_str(), 100 * o.density);

  ss::nccl_bootstrap boot, dense_boot;
  ss::detail::check_nccl(ncclGetUniqueId(&boot.id), "ncclGetUniqueId");
  ss::detail::check_nccl(ncclGetUniqueId(&dense_boot.id), "ncclGetUniqueId");
  boot.nranks = dense_boot.nranks = n_gpus;
  std::barrier sync_point(n_gpus);
  std::vector<version_record> records(o.versions);
  std::vector<std::vector<std::uint64_t>> worker_checksums(n_gpus, std::vector<std::uint64_t>(o.versions));
  std::vector<std::uint64_t> trainer_checksums(o.versions);
  std::vector<std::string> errors(n_gpus);
  std::vector<double> worker_done_ms(n_gpus);
  double encode_alone_ms = 0;  // rank 0 writes it before the first barrier of version 2
  const auto threshold = static_cast<std::uint32_t>(o.density * 4294967296.0);
  using clock = std::chrono::steady_clock;

  auto run_rank = [&](int rank) {
    try {
      CK(cudaSetDevice(rank));
      // Three streams so that encoding (trainer) or verifying (worker) bucket i overlaps the broadcast of
      // bucket i + 1: `stream` computes, `comm_stream` carries NCCL, events order the two.
      cudaStream_t stream, comm_stream;
      CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      CK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
      ss::nccl_bootstrap b = boot, db = dense_boot;
      b.rank = db.rank = rank;
      ss::nccl_communicator comm(b, rank, ss::nccl_comm_options{o.sparse_ctas, 0});
      ss::nccl_communicator dense_comm(db, rank);
      ss::nccl_broadcast_channel channel(comm.get(), 0, comm_stream);
      std::uint16_t* weights = nullptr;  // trainer: current weights; worker: its copy
      CK(cudaMalloc(&weights, n * 2));
      void** d_weights = tensor_pointers(layout, weights);
      std::uint16_t* snapshot = nullptr;  // trainer only: the last published version
      void** d_snapshot = nullptr;
      std::unique_ptr<sc::nccl_publisher> publisher;
      std::vector<std::unique_ptr<sc::encode_plan>> alone;
      std::unique_ptr<sc::nccl_subscriber> subscriber;
      if (rank == 0) {
        CK(cudaMalloc(&snapshot, n * 2));
        d_snapshot = tensor_pointers(layout, snapshot);
        init_kernel<<<8192, 256, 0, stream>>>(weights, n, 1234);
        CK(cudaMemcpyAsync(snapshot, weights, n * 2, cudaMemcpyDeviceToDevice, stream));
        sc::encode_config cfg;
        cfg.encoder = o.encoder;
        cfg.mode = ss::value_mode::ulp;
        publisher = std::make_unique<sc::nccl_publisher>(layout, plans, cfg, channel, stream, comm_stream, 1.5 * o.density);
        for (std::size_t i = 0; i < plans.size(); ++i) {  // the same encodes without NCCL beside them (reference)
          sc::encode_config c = cfg;
          c.bucket_index = static_cast<std::uint32_t>(i);
          c.max_changes = static_cast<std::uint64_t>(static_cast<double>(plans[i].numel()) * 1.5 * o.density) + 65536;
          c.known_base = true;
          alone.push_back(std::make_unique<sc::encode_plan>(layout, plans[i], c, stream));
        }
      }
      // Version 0 reaches every worker as a dense broadcast (not timed).
      CK(cudaStreamSynchronize(stream));
      ss::detail::check_nccl(ncclBroadcast(weights, weights, n * 2, ncclUint8, 0, dense_comm.get(), comm_stream), "ncclBroadcast", dense_comm.get());
      CK(cudaStreamSynchronize(comm_stream));
      if (rank != 0)
        subscriber = std::make_unique<sc::nccl_subscriber>(layout, channel, stream, comm_stream,
                                                           o.streamed ? sc::nccl_subscriber::commit_mode::streamed
                                                                      : sc::nccl_subscriber::commit_mode::atomic);
      for (int v = 0; v < o.versions; ++v) {
        if (rank == 0) {
          step_kernel<<<8192, 256, 0, stream>>>(weights, n, 0xABCDEF00ull + static_cast<std::uint64_t>(v), threshold);
          CK(cudaStreamSynchronize(stream));
          if (v == 1) {  // every bucket encoded back to back on this GPU alone, no NCCL: what the encode costs by itself
            std::vector<double> t;
            for (int rep = 0; rep < 4; ++rep) {
              const auto ta = clock::now();
              for (auto& e : alone) e->encode_async(d_snapshot, d_weights);
              for (auto& e : alone) e->wait();
              if (rep) t.push_back(std::chrono::duration<double, std::milli>(clock::now() - ta).count());
            }
            std::sort(t.begin(), t.end());
            encode_alone_ms = t[t.size() / 2];
          }
        }
        sync_point.arrive_and_wait();
        const auto t0 = clock::now();
        sc::nccl_publish_stats sent;
        double snapshot_ms = 0;
        if (rank == 0) {
          sent = publisher->publish(static_cast<std::uint64_t>(v + 1), d_snapshot, d_weights);
          // The trainer's snapshot follows; needed before the next encode, not before the workers have the
          // version: timed apart, off the workers' path.
          const auto ts = clock::now();
          publisher->update_snapshot(d_snapshot);
          snapshot_ms = std::chrono::duration<double, std::milli>(clock::now() - ts).count();
        } else {
          const auto got = subscriber->next(d_weights);
          if (!got) throw std::runtime_error("the trainer closed the channel early");
        }
        CK(cudaStreamSynchronize(stream));
        CK(cudaStreamSynchronize(comm_stream));
        // A version's latency: from the trainer's start until the last worker verified and wrote it.
        worker_done_ms[rank] = rank == 0 ? 0 : std::chrono::duration<double, std::milli>(clock::now() - t0).count();
        sync_point.arrive_and_wait();
        const double sparse_ms = *std::max_element(worker_done_ms.begin(), worker_done_ms.end());
        const double encode_ms = sent.encode_ms;
        const std::uint64_t payload = sent.payload_bytes, changed = sent.changed;

        // Dense: the same weights by one broadcast.
        sync_point.arrive_and_wait();
        const auto t1 = clock::now();
        ss::detail::check_nccl(ncclBroadcast(weights, weights, n * 2, ncclUint8, 0, dense_comm.get(), comm_stream), "ncclBroadcast", dense_comm.get());
        CK(cudaStreamSynchronize(comm_stream));
        sync_point.arrive_and_wait();
        const double dense_ms = std::chrono::duration<double, std::milli>(clock::now() - t1).count();

        const std::uint64_t sum = device_checksum(weights, n, stream);
        if (rank == 0) {
          records[v] = {sparse_ms, encode_ms, dense_ms, snapshot_ms, payload, changed, false};
          trainer_checksums[v] = sum;
          if (device_checksum(snapshot, n, stream) != sum) throw std::runtime_error("trainer snapshot differs from its weights");
        } else {
          worker_checksums[rank][v] = sum;
        }
      }
      if (rank == 0) publisher->close();
      CK(cudaStreamSynchronize(stream));
      CK(cudaStreamSynchronize(comm_stream));
      publisher.reset();
      subscriber.reset();
      CK(cudaFree(weights));
      if (snapshot) CK(cudaFree(snapshot));
    } catch (const std::exception& e) {
      errors[rank] = e.what();
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      std::fflush(stderr);
      std::_Exit(1);  // a collective would hang the other ranks
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n_gpus; ++r) threads.emplace_back(run_rank, r);
  for (auto& t : threads) t.join();

  std::vector<double> sparse, dense, enc;
  std::string rows;
  bool all_ok = true;
  for (int v = 0; v < o.versions; ++v) {
    auto& r = records[v];
    r.verified = true;
    for (int w = 1; w < n_gpus; ++w) r.verified = r.verified && worker_checksums[w][v] == trainer_checksums[v];
    all_ok = all_ok && r.verified;
    if (v > 0) {  // version 1 pays the first full hash of every bucket on the trainer
      sparse.push_back(r.sparse_ms);
      dense.push_back(r.dense_ms);
      enc.push_back(r.encode_ms);
    }
    std::printf("version %d: %llu changed, payload %.1f MB (%.2f bits/change): sparse %.2f ms (encode %.2f) | dense %.2f ms | %.1fx | "
                "trainer snapshot update %.2f ms | workers %s\n",
                v + 1, static_cast<unsigned long long>(r.changed), static_cast<double>(r.payload_bytes) / 1e6,
                8.0 * static_cast<double>(r.payload_bytes) / static_cast<double>(r.changed), r.sparse_ms, r.encode_ms, r.dense_ms,
                r.dense_ms / r.sparse_ms, r.snapshot_ms, r.verified ? "bit-identical" : "DIFFER");
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s{\"version\": %d, \"changed\": %llu, \"payload_bytes\": %llu, \"sparse_ms\": %.3f, \"encode_ms\": %.3f, "
                  "\"dense_ms\": %.3f, \"trainer_snapshot_update_ms\": %.3f, \"workers_bit_identical\": %s}",
                  v ? ",\n  " : "", v + 1, static_cast<unsigned long long>(r.changed), static_cast<unsigned long long>(r.payload_bytes),
                  r.sparse_ms, r.encode_ms, r.dense_ms, r.snapshot_ms, r.verified ? "true" : "false");
    rows += buf;
  }
  const double ms = median(sparse), md = median(dense);
  std::printf("median over versions 2..%d: sparse %.2f ms (encode %.2f; alone, without NCCL: %.2f), dense %.2f ms: sparse is %.2fx faster; every worker %s\n",
              o.versions, ms, median(enc), encode_alone_ms, md, md / ms, all_ok ? "bit-identical after every version" : "NOT identical");
  std::ofstream(o.out) << "{\"benchmark\": \"nccl-sparse-vs-dense\", \"gpus\": " << n_gpus << ", \"card\": \"" << prop.name
                       << "\", \"numel\": " << n << ", \"density\": " << o.density << ", \"encoder\": \""
                       << ss::encoder_name(o.encoder) << "\", \"values\": \"ulp\", \"apply\": \"" << (o.streamed ? "streamed" : "atomic") << "\", \"bucket_bytes\": " << o.bucket_bytes << ", \"sparse_ctas\": " << o.sparse_ctas
                       << ", \"median_sparse_ms\": " << ms << ", \"median_encode_ms\": " << median(enc) << ", \"encode_alone_ms\": " << encode_alone_ms << ", \"median_dense_ms\": " << md
                       << ", \"speedup\": " << md / ms << ", \"all_bit_identical\": " << (all_ok ? "true" : "false")
                       << ",\n \"versions\": [\n  " << rows << "]}\n";
  return all_ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "nccl_sync_bench: %s\n", e.what());
  return 1;
}
