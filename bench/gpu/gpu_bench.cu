// GPU encode / apply benchmark with its baselines, all measured in the same run on the same card:
//   memcpy    device-to-device copy of one BF16 copy (the ceiling: bytes read + written per second)
//   compare   a read-both-copies-and-count kernel (16-byte loads): the floor of any encoder
//   cub       cub::DeviceSelect::If of the change predicate (int64 positions) + a gather of the new values
//   encode    sparsesync::cuda::encode_bucket, per encoder / value mode, base checksum computed or known
//   apply     sparsesync::cuda verify + commit in place, base checksum computed or known (incremental)
//   atomic commit (--commit-buckets B) an atomic version's commit alone, after all B buckets verified: one bucket
//             after another, and apply_plan::commit of the frame list (time_atomic_commit)
// Updates come from an Adam/BF16-like generator on the GPU (mirroring include/sparsesync/gen/adam_bf16.hpp's
// idea, statelessly): FP32 master weights w ~ N(0, s^2) with s = 0.02 * 2^N(0, 0.25) per 16M-element block,
// base = bf16_rne(w), target = bf16_rne(w - lr * clamp(N(0,1), 3)); lr is calibrated to hit each density.
// Timing: CUDA events, median of --reps runs after a warm-up. JSON lines to --json; a markdown table to stdout.
#include <sparsesync/codec/registry.hpp>
#include <sparsesync/cuda/codec.cuh>
#include <sparsesync/gen/float_cast.hpp>
#include <sparsesync/gen/normal.hpp>
#include <sparsesync/gen/philox.hpp>

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "kernel_trace.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

using namespace sparsesync;
namespace sc = sparsesync::cuda;

#define CK(x)                                                                                       \
  do {                                                                                              \
    cudaError_t e_ = (x);                                                                           \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

namespace {

// ------------------------------------------------------------------ generator

__device__ __forceinline__ double normal_of(std::uint32_t u) { return gen::normal_from_u32(u); }

__global__ void generate_kernel(std::uint16_t* base, std::uint16_t* target, std::uint64_t n, std::uint64_t seed, float lr) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  const gen::philox_key key{{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; 2 * i < n; i += stride) {
    const std::uint64_t block = (2 * i) >> 24;
    const auto bs = gen::philox4x32_10({{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0xB10C, 0}}, key);
    const double scale = 0.02 * gen::detail::exp2_det(0.5 * normal_of(bs.v[0]));
    const auto r = gen::philox4x32_10({{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i >> 32), 0, 0}}, key);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const std::uint64_t j = 2 * i + k;
      if (j >= n) break;
      const float w = static_cast<float>(scale * normal_of(r.v[2 * k]));
      double z = normal_of(r.v[2 * k + 1]);
      z = z > 3 ? 3 : (z < -3 ? -3 : z);
      const float w2 = w - lr * static_cast<float>(z);
      base[j] = gen::bf16_from_f32_bits(__float_as_uint(w));
      if (target) target[j] = gen::bf16_from_f32_bits(__float_as_uint(w2));
    }
  }
}

__global__ void compare_kernel(const uint4* a, const uint4* b, std::uint64_t vecs, unsigned long long* count) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  unsigned long long c = 0;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < vecs; i += stride) {
    const uint4 x = __ldcs(a + i), y = __ldcs(b + i);
    const std::uint32_t d[4] = {x.x ^ y.x, x.y ^ y.y, x.z ^ y.z, x.w ^ y.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) c += ((d[k] & 0xFFFFu) != 0) + ((d[k] >> 16) != 0);
  }
  for (int o = 16; o > 0; o /= 2) c += __shfl_down_sync(0xFFFFFFFFu, c, o);
  if ((threadIdx.x & 31) == 0 && c) atomicAdd(count, c);
}

struct differs {
  const std::uint16_t* a;
  const std::uint16_t* b;
  __device__ bool operator()(std::int64_t i) const { return a[i] != b[i]; }
};

__global__ void gather_kernel(const std::int64_t* idx, const unsigned long long* n, const std::uint16_t* src, std::uint16_t* out) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < *n; i += stride) out[i] = src[idx[i]];
}

// ------------------------------------------------------------------ helpers

struct args {
  std::vector<double> sizes{1e8, 1e9, 3e9, 7e9};
  std::vector<double> densities{0.003, 0.01, 0.03, 0.1};
  int reps = 7;
  std::string json;
  bool quick = false;
  std::string only_encoder;  // e.g. "varint/ulp" or "rice/ulp,entropy/ulp": only these encoders
  bool sweep = true;         // detect-policy sweep
  bool baselines = true;     // compare / cub rows
  unsigned log2_chunk = 16;  // --log2-chunk: the encoders' chunk size (above 16, entropy's chunks are decoded by one lane)
  std::string trace;         // --trace FILE: a CUPTI timeline (kernel_trace.hpp), each timed run of encode/apply marked
  unsigned commit_buckets = 0;  // --commit-buckets B: also an atomic version's commit over B buckets, one by one and as a list
};

// --trace: the timeline, and the row whose timed runs median_ms marks ("<row> v<rep> start" / "end", the windows
// bench/gpu/trace_summary.py splits the timeline by).
bench_gpu::kernel_trace* g_trace = nullptr;
std::string g_window;

std::vector<double> parse_list(const char* s) {
  std::vector<double> v;
  std::string str(s);
  std::size_t at = 0;
  while (at < str.size()) {
    std::size_t c = str.find(',', at);
    if (c == std::string::npos) c = str.size();
    v.push_back(std::stod(str.substr(at, c - at)));
    at = c + 1;
  }
  return v;
}

int grid_for(int threads) {
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms * (2048 / threads);
}

template <class F>
double median_ms(int reps, F&& f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  f();  // warm-up
  CK(cudaDeviceSynchronize());
  std::vector<float> t;
  const bool marked = g_trace != nullptr && !g_window.empty();
  for (int r = 0; r < reps; ++r) {
    if (marked) g_trace->mark(g_window + " v" + std::to_string(r) + " start");
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    if (marked) g_trace->mark(g_window + " v" + std::to_string(r) + " end");
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::uint64_t count_diff(const std::uint16_t* a, const std::uint16_t* b, std::uint64_t n, unsigned long long* d_count) {
  CK(cudaMemset(d_count, 0, 8));
  compare_kernel<<<grid_for(256), 256>>>(reinterpret_cast<const uint4*>(a), reinterpret_cast<const uint4*>(b), n / 8, d_count);
  CK(cudaGetLastError());
  unsigned long long c = 0;
  CK(cudaMemcpy(&c, d_count, 8, cudaMemcpyDeviceToHost));
  return c;
}

void generate(std::uint16_t* base, std::uint16_t* target, std::uint64_t n, float lr) {
  generate_kernel<<<grid_for(256), 256>>>(base, target, n, 0x5EED5EEDull, lr);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
}

// lr that gives `density` on the first 64M elements (the density is close to linear in lr when small).
float calibrate(std::uint16_t* base, std::uint16_t* target, std::uint64_t n, double density, unsigned long long* d_count) {
  const std::uint64_t m = std::min<std::uint64_t>(n, 64ull << 20) & ~std::uint64_t{7};
  double lr = 1e-6;
  for (int it = 0; it < 6; ++it) {
    generate(base, target, m, static_cast<float>(lr));
    const double d = static_cast<double>(count_diff(base, target, m, d_count)) / static_cast<double>(m);
    if (d <= 0) {
      lr *= 10;
      continue;
    }
    const double ratio = density / d;
    lr *= ratio;
    if (ratio > 0.98 && ratio < 1.02) break;
  }
  return static_cast<float>(lr);
}

std::FILE* g_json = nullptr;
std::string g_card;

void emit(const std::string& fields) {
  if (g_json) std::fprintf(g_json, "{\"card\":\"%s\",%s}\n", g_card.c_str(), fields.c_str());
}

std::string f(const char* k, double v) {
  char b[96];
  std::snprintf(b, sizeof b, "\"%s\":%.6g", k, v);
  return b;
}
std::string s(const char* k, const std::string& v) { return std::string("\"") + k + "\":\"" + v + "\""; }

struct enc_cfg {
  encoder_id enc;
  value_mode mode;
};

// An atomic version's commit, the pass after its last verify: the model split into `buckets` equal buckets, each
// encoded (base -> target and back) as the sync engine encodes a bucket; per rep, every bucket of one direction
// verified on four lanes (as device_sink does), then only the commit timed: one commit_bucket after another on
// the plan's stream ("one by one", as before session 25), or apply_plan::commit of the frame list (the kept
// buckets side by side on the lanes). Directions alternate, so the model returns to `base`. Returns the two
// medians (ms) and whether every version left the model bit-identical to its target.
struct commit_times {
  double one_by_one = 0, list = 0;
  bool ok = true;
};
commit_times time_atomic_commit(std::uint16_t* base, const std::uint16_t* target, std::uint64_t n, void** d_base_ptr, void** d_target_ptr,
                                const model_layout& layout, const sc::encode_config& cfg0, unsigned buckets, int reps,
                                unsigned long long* d_count, std::uint64_t changed) {
  using frame = std::pair<const unsigned char*, std::size_t>;
  std::vector<unsigned char*> owned;
  std::vector<frame> fwd, bwd;
  for (unsigned j = 0; j < buckets; ++j) {
    const std::uint64_t lo = n * j / buckets / 8 * 8, hi = j + 1 == buckets ? n : n * (j + 1) / buckets / 8 * 8;
    sc::encode_config cfg = cfg0;
    cfg.bucket_index = j;
    cfg.max_changes = (hi - lo) / 50 + 65536;
    for (int dir = 0; dir < 2; ++dir) {
      sc::encode_plan p(layout, bucket_plan{dtype::bf16, {{0, lo, hi - lo}}}, cfg);
      const auto r = dir == 0 ? p.encode(reinterpret_cast<const void* const*>(d_base_ptr), reinterpret_cast<const void* const*>(d_target_ptr))
                              : p.encode(reinterpret_cast<const void* const*>(d_target_ptr), reinterpret_cast<const void* const*>(d_base_ptr));
      if (r.status != 0) {
        std::printf("!! commit bench: bucket %u encode status %d\n", j, r.status);
        return {0, 0, false};
      }
      unsigned char* copy = nullptr;
      CK(cudaMalloc(&copy, r.frame_bytes));
      CK(cudaMemcpy(copy, p.frame(), r.frame_bytes, cudaMemcpyDeviceToDevice));
      owned.push_back(copy);
      (dir == 0 ? fwd : bwd).push_back({copy, r.frame_bytes});
    }
  }
  std::vector<cudaStream_t> lanes(4);
  for (auto& l : lanes) CK(cudaStreamCreateWithFlags(&l, cudaStreamNonBlocking));
  cudaStream_t stream = nullptr;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  commit_times out;
  {
    sc::apply_config ac;
    ac.known_base = true;
    sc::apply_plan ap(layout, ac, stream);
    ap.set_lanes(lanes);
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> t[2];
    for (int r = 0; r < 2 * (reps + 1); ++r) {  // (the first of each mode: warm-up, not kept)
      const int mode = (r / 2) % 2;                // one by one / list, alternating every version pair
      const auto& frames = r % 2 == 0 ? fwd : bwd;
      ap.begin();
      for (const auto& [f, len] : frames) ap.verify(f, len, d_base_ptr);
      CK(cudaEventRecord(a, stream));
      if (mode == 0)
        for (const auto& [f, len] : frames) ap.commit(f, len, d_base_ptr);
      else
        ap.commit(std::span<const frame>(frames), d_base_ptr);
      CK(cudaEventRecord(b, stream));
      const auto res = ap.result();
      out.ok &= res.status.ok() && res.committed == buckets;
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      if (r >= 4) t[mode].push_back(ms);
      if (r % 2 == 0) out.ok &= count_diff(base, target, n, d_count) == 0;  // forward: the model is the target
    }
    out.ok &= count_diff(base, target, n, d_count) == changed;  // back at the base
    for (auto& v : t) std::sort(v.begin(), v.end());
    out.one_by_one = t[0][t[0].size() / 2];
    out.list = t[1][t[1].size() / 2];
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
  }
  for (auto l : lanes) CK(cudaStreamDestroy(l));
  CK(cudaStreamDestroy(stream));
  for (auto* p : owned) CK(cudaFree(p));
  return out;
}

}  // namespace

// Detect-kernel tunings compared in the same run (kernels templated on a policy get hidden visibility, which
// needs external linkage: not in the anonymous namespace).
namespace bench_policies {
template <int T, int I, int B, int S = 0>
struct pol {
  static constexpr int detect_threads = T;
  static constexpr int detect_iters = I;
  static constexpr int detect_min_blocks = B;
  static constexpr int detect_stages = S;
  static constexpr int chunk_threads = 128;
};

// The first variant's findings, which the others must match (reset per size and density).
bool g_ref_set = false;
std::uint64_t g_ref_changes = 0, g_ref_delta = 0;

// Times only resolve + detect (the pass that reads the weights) for BF16 with policy P.
// TilesPerBlock 0: the library's grid (detect_grid); n: ceil(tiles / n) blocks, each taking tiles grid-stride.
template <class P, unsigned TilesPerBlock = 0>
double time_detect(const sc::device_bucket& b, const void* const* d_base, const void* const* d_target, const sc::encode_config& cfg,
                   int reps, bool hash_base) {
  namespace d = sc::detail;
  const d::encode_layout l0 = d::carve_encode<P>(nullptr, b, cfg);
  void* tmp = nullptr;
  CK(cudaMalloc(&tmp, l0.bytes));
  const d::encode_layout l = d::carve_encode<P>(tmp, b, cfg);
  d::resolve_segments_kernel<sc::default_policy><<<1, 128>>>(b.segments, b.segment_count, d_base, d_target, 2, l.resolved);
  d::detect_params dp{l.resolved, b.segment_count, b.numel, l.tile_log2, cfg.mode, l.pos, l.val, cfg.max_changes,
                      l.tile_off, l.tile_cnt, &l.ctr->allocated, l.ctr->base, l.ctr->delta};
  const unsigned grid = TilesPerBlock ? static_cast<unsigned>((l.num_tiles + TilesPerBlock - 1) / TilesPerBlock) : d::detect_grid(l.num_tiles);
  const double t = median_ms(reps, [&] {
    CK(cudaMemsetAsync(l.ctr, 0, sizeof(d::encode_counters)));
    if (hash_base)
      d::detect_kernel<std::uint16_t, P, true><<<grid, P::detect_threads>>>(dp);
    else
      d::detect_kernel<std::uint16_t, P, false><<<grid, P::detect_threads>>>(dp);
  });
  CK(cudaGetLastError());
  std::uint64_t allocated = 0;
  CK(cudaMemcpy(&allocated, &l.ctr->allocated, 8, cudaMemcpyDeviceToHost));
  // What every tuning must find alike: the changes counted per tile and the sum of their checksum deltas (which
  // reads each change's position, old and new bits). The first variant's are the reference.
  std::vector<std::uint32_t> cnt(l.num_tiles);
  std::uint64_t delta[sc::detail::hash_slots];
  CK(cudaMemcpy(cnt.data(), l.tile_cnt, 4 * l.num_tiles, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(delta, l.ctr->delta, sizeof delta, cudaMemcpyDeviceToHost));
  std::uint64_t changes = 0, dsum = 0;
  for (auto c : cnt) changes += c;
  for (auto v : delta) dsum += v;
  CK(cudaFree(tmp));
  if (!g_ref_set) g_ref_set = true, g_ref_changes = changes, g_ref_delta = dsum;
  if (changes != g_ref_changes || dsum != g_ref_delta) {
    std::printf("!! detect variant found %llu changes (reference %llu) or other checksum deltas: FAILED\n",
                static_cast<unsigned long long>(changes), static_cast<unsigned long long>(g_ref_changes));
    return std::numeric_limits<double>::quiet_NaN();
  }
  return allocated > cfg.max_changes ? -t : t;  // negative: the scratch was too small (the timing is void)
}
}  // namespace bench_policies

int main(int argc, char** argv) {
  args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--sizes" && i + 1 < argc) a.sizes = parse_list(argv[++i]);
    else if (k == "--densities" && i + 1 < argc) a.densities = parse_list(argv[++i]);
    else if (k == "--reps" && i + 1 < argc) a.reps = std::atoi(argv[++i]);
    else if (k == "--json" && i + 1 < argc) a.json = argv[++i];
    else if (k == "--quick") a.quick = true;
    else if (k == "--enc" && i + 1 < argc) a.only_encoder = argv[++i];
    else if (k == "--no-sweep") a.sweep = false;
    else if (k == "--no-baselines") a.baselines = false;
    else if (k == "--trace" && i + 1 < argc) a.trace = argv[++i];
    else if (k == "--log2-chunk" && i + 1 < argc) a.log2_chunk = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (k == "--commit-buckets" && i + 1 < argc) a.commit_buckets = static_cast<unsigned>(std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--sizes 1e8,1e9] [--densities 0.01,0.1] [--reps 7] [--json out.jsonl] [--quick] [--enc rice/ulp,...] [--no-sweep] [--no-baselines] [--trace FILE] [--log2-chunk 16] [--commit-buckets 33]\n",
                   argv[0]);
      return 2;
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_card = prop.name;
  if (!a.json.empty()) g_json = std::fopen(a.json.c_str(), "w");
  std::optional<bench_gpu::kernel_trace> trace;
  if (!a.trace.empty()) {
    trace.emplace(a.trace);
    g_trace = &*trace;
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::printf("# sparsesync GPU bench on %s (%d SMs, %.1f GiB), %s, chunks of 2^%u elements\n", prop.name, prop.multiProcessorCount,
              static_cast<double>(prop.totalGlobalMem) / (1ull << 30), date, a.log2_chunk);
  emit(s("kind", "meta") + "," + s("date", date) + "," + f("sms", prop.multiProcessorCount) + "," +
       f("mem_gib", static_cast<double>(prop.totalGlobalMem) / (1ull << 30)) + "," + f("log2_chunk", a.log2_chunk));

  unsigned long long* d_count = nullptr;
  CK(cudaMalloc(&d_count, 8));
  const std::vector<enc_cfg> encs = {{encoder_id::raw_index32, value_mode::absolute},
                                     {encoder_id::bitmap, value_mode::absolute},
                                     {encoder_id::delta_varint, value_mode::ulp},
                                     {encoder_id::rice, value_mode::ulp},
                                     {encoder_id::entropy, value_mode::ulp}};
  std::printf("\n| elements | density | what | ms | G el/s | GB/s | %% of memcpy | detail |\n|---|---|---|---|---|---|---|---|\n");

  for (double sz : a.sizes) {
    const std::uint64_t n = static_cast<std::uint64_t>(sz) & ~std::uint64_t{7};
    std::size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    if (free_b < 4 * n + (6ull << 30)) {
      std::printf("| %.3g | - | skipped: %.1f GiB free |\n", sz, static_cast<double>(free_b) / (1ull << 30));
      continue;
    }
    std::uint16_t *base = nullptr, *target = nullptr;
    CK(cudaMalloc(&base, 2 * n));
    CK(cudaMalloc(&target, 2 * n));
    model_layout layout({{"w", dtype::bf16, {n}}});
    const bucket_plan plan{dtype::bf16, {{0, 0, n}}};
    const void* ptrs_bt[2] = {base, target};
    void** d_base_ptr = nullptr;
    void** d_target_ptr = nullptr;
    CK(cudaMalloc(&d_base_ptr, sizeof(void*)));
    CK(cudaMalloc(&d_target_ptr, sizeof(void*)));
    CK(cudaMemcpy(d_base_ptr, &ptrs_bt[0], sizeof(void*), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_target_ptr, &ptrs_bt[1], sizeof(void*), cudaMemcpyHostToDevice));
    const int reps = n >= 3000000000ull ? std::max(3, a.reps - 2) : a.reps;

    // Ceilings (independent of density): memcpy of one copy, and the read-compare floor.
    generate(base, target, n, 1e-6f);
    const double t_copy = median_ms(reps, [&] { CK(cudaMemcpyAsync(target, base, 2 * n, cudaMemcpyDeviceToDevice)); });
    const double copy_gbs = 4.0 * n / t_copy / 1e6;  // read + write
    std::printf("| %.3g | - | memcpy %.2f GB | %.3f | %.1f | %.0f | 100 | read+write |\n", sz, 2.0 * n / 1e9, t_copy, n / t_copy / 1e6, copy_gbs);
    emit(s("kind", "memcpy") + "," + f("n", n) + "," + f("ms", t_copy) + "," + f("gbs", copy_gbs));

    for (double density : a.densities) {
      const float lr = calibrate(base, target, n, density, d_count);
      generate(base, target, n, lr);
      const std::uint64_t changed = count_diff(base, target, n, d_count);
      const double dens = static_cast<double>(changed) / static_cast<double>(n);
      auto row = [&](const std::string& what, double ms, double gels, double gbs, const std::string& detail) {
        std::printf("| %.3g | %.2f%% | %s | %.3f | %.1f | %.0f | %.0f | %s |\n", sz, 100 * dens, what.c_str(), ms, gels, gbs,
                    100 * gbs / copy_gbs, detail.c_str());
      };

      if (a.baselines) {
      const double t_cmp = median_ms(reps, [&] {
        CK(cudaMemsetAsync(d_count, 0, 8));
        compare_kernel<<<grid_for(256), 256>>>(reinterpret_cast<const uint4*>(base), reinterpret_cast<const uint4*>(target), n / 8, d_count);
      });
      row("compare (floor)", t_cmp, n / t_cmp / 1e6, 4.0 * n / t_cmp / 1e6, "reads both copies");
      emit(s("kind", "compare") + "," + f("n", n) + "," + f("density", dens) + "," + f("ms", t_cmp) + "," + f("gels", n / t_cmp / 1e6) +
           "," + f("gbs", 4.0 * n / t_cmp / 1e6) + "," + f("share_memcpy", 4.0 * n / t_cmp / 1e6 / copy_gbs));

      {  // cub::DeviceSelect::If + gather
        std::int64_t* idx = nullptr;
        std::uint16_t* vals = nullptr;
        unsigned long long* d_sel = nullptr;
        CK(cudaMalloc(&idx, 8 * (changed + 1)));
        CK(cudaMalloc(&vals, 2 * (changed + 1)));
        CK(cudaMalloc(&d_sel, 8));
        thrust::counting_iterator<std::int64_t> it(0);
        std::size_t tb = 0;
        CK(cub::DeviceSelect::If(nullptr, tb, it, idx, d_sel, static_cast<std::int64_t>(n), differs{base, target}));
        void* tmp = nullptr;
        CK(cudaMalloc(&tmp, tb));
        const double t_sel = median_ms(reps, [&] {
          CK(cub::DeviceSelect::If(tmp, tb, it, idx, d_sel, static_cast<std::int64_t>(n), differs{base, target}));
          gather_kernel<<<grid_for(256), 256>>>(idx, d_sel, target, vals);
        });
        const double extra = static_cast<double>(tb + 10 * changed);
        row("cub::DeviceSelect::If + gather", t_sel, n / t_sel / 1e6, 4.0 * n / t_sel / 1e6,
            "int64 positions; extra " + std::to_string(static_cast<long long>(extra / 1e6)) + " MB");
        emit(s("kind", "cub_select") + "," + f("n", n) + "," + f("density", dens) + "," + f("ms", t_sel) + "," + f("gels", n / t_sel / 1e6) +
             "," + f("gbs", 4.0 * n / t_sel / 1e6) + "," + f("share_memcpy", 4.0 * n / t_sel / 1e6 / copy_gbs) + "," +
             f("extra_bytes", extra));
        CK(cudaFree(tmp));
        CK(cudaFree(idx));
        CK(cudaFree(vals));
        CK(cudaFree(d_sel));
      }
      }  // baselines

      if (a.sweep) {  // detect-only: policy sweep (varint/ulp config; the detect pass does not depend on the encoder)
        namespace bp = bench_policies;
        sc::encode_config cfg{encoder_id::delta_varint, value_mode::ulp, 16};
        cfg.max_changes = changed + (n >> 10) * 8 + 65536;  // room for per-tile padding at the smallest tile
        sc::encode_plan tmp_plan(layout, plan, cfg);  // for its device bucket (segments on the device)
        struct variant {
          const char* name;
          double (*fn)(const sc::device_bucket&, const void* const*, const void* const*, const sc::encode_config&, int, bool);
        };
        bp::g_ref_set = false;
        const variant vs[] = {{"128x4 min4, no ring (reference)", &bp::time_detect<bp::pol<128, 4, 4>>},
                              {"default, known base", &bp::time_detect<sc::default_policy::detect_known>},
                              {"128x4 min4, 1 tile per block (before session 12)", &bp::time_detect<bp::pol<128, 4, 4>, 1>},
                              {"128x4 min4, 2 tiles per block", &bp::time_detect<bp::pol<128, 4, 4>, 2>},
                              {"128x4 min4, 4 tiles per block", &bp::time_detect<bp::pol<128, 4, 4>, 4>},
                              {"128x4 min4, 16 tiles per block", &bp::time_detect<bp::pol<128, 4, 4>, 16>},
                              {"256x2 min4 (default, base hashed)", &bp::time_detect<sc::default_policy::detect_hashed>},
                              {"128x2 min8", &bp::time_detect<bp::pol<128, 2, 8>>},
                              {"128x4 min8", &bp::time_detect<bp::pol<128, 4, 8>>},
                              {"64x4 min12", &bp::time_detect<bp::pol<64, 4, 12>>},
                              {"128x4 min4, ring of 2, 16 tiles per block", &bp::time_detect<bp::pol<128, 4, 4, 2>, 16>},
                              {"128x4 min4, ring of 2, 4 tiles per block", &bp::time_detect<bp::pol<128, 4, 4, 2>, 4>},
                              {"128x2 min4, ring of 3", &bp::time_detect<bp::pol<128, 2, 4, 3>>},
                              {"128x2 min4, ring of 4", &bp::time_detect<bp::pol<128, 2, 4, 4>>},
                              {"128x2 min8, ring of 2", &bp::time_detect<bp::pol<128, 2, 8, 2>>},
                              {"256x2 min4, ring of 2", &bp::time_detect<bp::pol<256, 2, 4, 2>>},
                              {"256x1 min4, ring of 4", &bp::time_detect<bp::pol<256, 1, 4, 4>>}};
        for (const auto& v : vs) {
          for (int hash = 0; hash < 2; ++hash) {
            const double t = v.fn(tmp_plan.bucket(), reinterpret_cast<const void* const*>(d_base_ptr),
                                  reinterpret_cast<const void* const*>(d_target_ptr), cfg, reps, hash);
            if (t != t) {  // the variant's findings differ from the first's
              emit(s("kind", "detect") + "," + s("policy", v.name) + "," + f("hash_base", hash) + "," + f("n", n) + "," + f("failed", 1));
              continue;
            }
            row(std::string("detect only ") + v.name, t, n / t / 1e6, 4.0 * n / t / 1e6, hash ? "base hashed" : "known base");
            emit(s("kind", "detect") + "," + s("policy", v.name) + "," + f("hash_base", hash) + "," + f("n", n) + "," +
                 f("density", dens) + "," + f("ms", t) + "," + f("gels", n / t / 1e6) + "," + f("share_memcpy", 4.0 * n / t / 1e6 / copy_gbs));
          }
        }
      }

      for (const auto& e : encs) {
        const std::string name = std::string(encoder_name(e.enc)) + "/" + std::string(to_string(e.mode));
        if (!a.only_encoder.empty() && ("," + a.only_encoder + ",").find("," + name + ",") == std::string::npos) continue;
        sc::encode_config cfg{e.enc, e.mode, a.log2_chunk};
        cfg.max_changes = changed + changed / 8 + 65536;
        sc::encode_result r;
        {
          sc::encode_plan p(layout, plan, cfg);
          r = p.encode(reinterpret_cast<const void* const*>(d_base_ptr), reinterpret_cast<const void* const*>(d_target_ptr));
        }
        const std::uint64_t base_sum = r.base_checksum;
        // Tight scratch (what a steady-state trainer keeps), output exactly the frame: the memory figure.
        sc::encode_config tight = cfg;
        tight.max_changes = r.entries_needed;
        sc::encode_plan q(layout, plan, tight, nullptr, r.frame_bytes);
        q.encode(reinterpret_cast<const void* const*>(d_base_ptr), reinterpret_cast<const void* const*>(d_target_ptr));
        // The known-base detect may cut smaller tiles (a policy's detect_known and detect_hashed differ), with more
        // padding: one known-base encode first, so that the scratch fits both and no timed encode overflows it.
        q.set_known_base(r.base_checksum);
        q.encode(reinterpret_cast<const void* const*>(d_base_ptr), reinterpret_cast<const void* const*>(d_target_ptr));
        const double scratch = static_cast<double>(q.scratch_bytes());
        {  // phase: detect + size + scan only (encode_bucket_detect), known base
          sc::encode_config kc = tight;
          kc.known_base = true;
          kc.base_checksum = r.base_checksum;
          std::size_t tb = 0;
          CK(sc::encode_bucket_detect(nullptr, tb, q.bucket(), nullptr, nullptr, nullptr, kc));
          void* tmp = nullptr;
          sc::encode_result* dres = nullptr;
          CK(cudaMalloc(&tmp, tb));
          CK(cudaMalloc(&dres, sizeof(sc::encode_result)));
          const double t = median_ms(reps, [&] {
            CK(sc::encode_bucket_detect(tmp, tb, q.bucket(), reinterpret_cast<const void* const*>(d_base_ptr),
                                        reinterpret_cast<const void* const*>(d_target_ptr), dres, kc));
          });
          sc::encode_result pr;
          CK(cudaMemcpy(&pr, dres, sizeof pr, cudaMemcpyDeviceToHost));
          row("  phase detect+size+scan " + name, t, n / t / 1e6, 4.0 * n / t / 1e6,
              pr.status == 0 ? "known base" : "known base; VOID: the scratch was too small (the chunk passes stopped early)");
          emit(s("kind", "encode_phase_detect") + "," + s("encoder", name) + "," + f("n", n) + "," + f("density", dens) + "," + f("ms", t));
          CK(cudaFree(tmp));
          CK(cudaFree(dres));
        }
        for (int known = 0; known < 2; ++known) {
          q.set_known_base(known ? std::optional<std::uint64_t>(base_sum) : std::nullopt);
          g_window = "encode " + name + (known ? " known" : " hashed");
          const double t = median_ms(reps, [&] {
            q.encode_async(reinterpret_cast<const void* const*>(d_base_ptr), reinterpret_cast<const void* const*>(d_target_ptr));
          });
          g_window.clear();
          // wait() encodes again, with more scratch, after an encode that did not fit it: then the timed encodes
          // (whose chunk passes stop early) timed nothing worth a row.
          const std::size_t scratch_before = q.scratch_bytes();
          const auto rr = q.wait();
          const bool overflowed = q.scratch_bytes() != scratch_before;
          if (rr.status != 0 || rr.changed != changed || overflowed)
            std::printf("!! encode result status %d changed %llu%s\n", rr.status, (unsigned long long)rr.changed,
                        overflowed ? "; the timed encodes overflowed the scratch: their time is void" : "");
          const double bits = 8.0 * static_cast<double>(rr.frame_bytes) / static_cast<double>(std::max<std::uint64_t>(changed, 1));
          char det[200];
          std::snprintf(det, sizeof det, "%s%s; %.2f bits/change; frame %.1f MB; scratch %.1f MB (%.2fx frame)",
                        known ? "known base" : "base hashed", overflowed ? "; VOID (scratch overflow)" : "", bits, rr.frame_bytes / 1e6,
                        scratch / 1e6, scratch / rr.frame_bytes);
          row("encode " + name, t, n / t / 1e6, 4.0 * n / t / 1e6, det);
          emit(s("kind", "encode") + "," + s("encoder", name) + "," + f("known_base", known) + "," + f("n", n) + "," + f("density", dens) +
               "," + f("changed", changed) + "," + f("ms", t) + "," + f("gels", n / t / 1e6) + "," + f("gbs", 4.0 * n / t / 1e6) + "," +
               f("share_memcpy", 4.0 * n / t / 1e6 / copy_gbs) + "," + f("frame_bytes", rr.frame_bytes) + "," + f("bits_per_change", bits) +
               "," + f("scratch_bytes", scratch) + "," + f("scratch_over_frame", scratch / rr.frame_bytes) + "," + f("void", overflowed));
        }
        // Apply: forward (base -> target) and backward frames applied alternately to `base` in place.
        sc::encode_plan back(layout, plan, tight);
        back.encode(reinterpret_cast<const void* const*>(d_target_ptr), reinterpret_cast<const void* const*>(d_base_ptr));
        unsigned char *fwd = nullptr, *bwd = nullptr;
        const std::size_t fwd_bytes = q.frame_bytes(), bwd_bytes = back.frame_bytes();
        CK(cudaMalloc(&fwd, fwd_bytes));
        CK(cudaMalloc(&bwd, bwd_bytes));
        CK(cudaMemcpy(fwd, q.frame(), fwd_bytes, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(bwd, back.frame(), bwd_bytes, cudaMemcpyDeviceToDevice));
        for (int known = 0; known < 2; ++known) {
          sc::apply_config ac;
          ac.known_base = known;
          sc::apply_plan ap(layout, ac);
          int parity = 0;
          bool ok = true;
          g_window = "apply " + name + (known ? " known" : " hashed");
          const double t = median_ms(reps, [&] {
            ap.begin();
            if (parity++ % 2 == 0)
              ap.apply(fwd, fwd_bytes, d_base_ptr);
            else
              ap.apply(bwd, bwd_bytes, d_base_ptr);
          });
          g_window.clear();
          if (parity % 2) {  // leave `base` as it was: one more backward apply
            ap.begin();
            ap.apply(bwd, bwd_bytes, d_base_ptr);
            ++parity;
          }
          const auto res = ap.result();
          ok = res.status.ok() && count_diff(base, target, n, d_count) == changed;
          char det[160];
          std::snprintf(det, sizeof det, "%s; %.1f G changes/s; %s; scratch %.1f MB", known ? "known base" : "base hashed",
                        changed / t / 1e6, ok ? "verified" : "FAILED", ap.scratch_bytes() / 1e6);
          row("apply " + name, t, n / t / 1e6, 0, det);
          emit(s("kind", "apply") + "," + s("encoder", name) + "," + f("known_base", known) + "," + f("n", n) + "," + f("density", dens) +
               "," + f("changed", changed) + "," + f("ms", t) + "," + f("g_changes_per_s", changed / t / 1e6) + "," + f("ok", ok) + "," +
               f("scratch_bytes", static_cast<double>(ap.scratch_bytes())));
        }
        CK(cudaFree(fwd));
        CK(cudaFree(bwd));
        if (a.commit_buckets > 0) {
          const auto ct = time_atomic_commit(base, target, n, d_base_ptr, d_target_ptr, layout, cfg, a.commit_buckets, reps, d_count, changed);
          char d1[160], d2[160];
          std::snprintf(d1, sizeof d1, "%u buckets verified on 4 lanes, then committed one by one; %s", a.commit_buckets, ct.ok ? "verified" : "FAILED");
          std::snprintf(d2, sizeof d2, "%u buckets verified on 4 lanes, then committed as one list; %s", a.commit_buckets, ct.ok ? "verified" : "FAILED");
          row("atomic commit " + name, ct.one_by_one, n / ct.one_by_one / 1e6, 0, d1);
          row("atomic commit " + name, ct.list, n / ct.list / 1e6, 0, d2);
          emit(s("kind", "atomic_commit") + "," + s("encoder", name) + "," + f("n", n) + "," + f("density", dens) + "," + f("buckets", a.commit_buckets) +
               "," + f("changed", changed) + "," + f("one_by_one_ms", ct.one_by_one) + "," + f("list_ms", ct.list) + "," + f("ok", ct.ok));
        }
      }
      std::fflush(stdout);
      if (g_json) std::fflush(g_json);
    }
    CK(cudaFree(base));
    CK(cudaFree(target));
    CK(cudaFree(d_base_ptr));
    CK(cudaFree(d_target_ptr));
  }
  if (g_json) std::fclose(g_json);
  return 0;
}
