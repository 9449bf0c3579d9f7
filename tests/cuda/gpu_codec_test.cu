// GPU codec tests: the host codec is the oracle. GPU frames must be byte-identical to the host writer's; GPU
// apply must accept what the host reader accepts, refuse what it refuses, and leave the model untouched when
// it refuses. Exits 77 (CTest: skipped) where no CUDA device exists.
//
// Environment: SPARSESYNC_GPU_TEST_QUICK=1 shrinks the randomized cases (for compute-sanitizer runs);
// SPARSESYNC_DATA_DIR overrides the location of the real update stream.
#include <sparsesync/cuda/codec.cuh>
#include <sparsesync/gen/float_cast.hpp>
#include <sparsesync/sparsesync.hpp>

#include <doctest/doctest.h>

#include "require_gpu.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace sparsesync;
namespace sc = sparsesync::cuda;

namespace {

const int gpu_present = [] {
  const int n = sparsesync_test::require_gpu_or_skip();
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("GPU tests on %s (sm_%d%d, %d SMs, %.1f GiB)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              static_cast<double>(prop.totalGlobalMem) / (1ull << 30));
  return n;
}();

bool quick() {
  const char* q = std::getenv("SPARSESYNC_GPU_TEST_QUICK");
  return q && *q && *q != '0';
}

#define CUDA_OK(expr) REQUIRE_EQ(cudaSuccess, (expr))

// ---------------------------------------------------------------- host model data

struct host_model {
  model_layout layout;
  std::vector<std::vector<unsigned char>> bytes;  // per tensor

  explicit host_model(model_layout l) : layout(std::move(l)) {
    for (std::size_t i = 0; i < layout.size(); ++i) bytes.emplace_back(layout[i].bytes());
  }
  [[nodiscard]] std::vector<const_tensor_view> views() const {
    std::vector<const_tensor_view> v;
    for (std::size_t i = 0; i < layout.size(); ++i) v.push_back({bytes[i].data(), layout[i].numel(), layout[i].dtype});
    return v;
  }
  template <class W>
  W get(std::size_t t, std::uint64_t i) const {
    W w;
    std::memcpy(&w, bytes[t].data() + i * sizeof(W), sizeof(W));
    return w;
  }
  template <class W>
  void set(std::size_t t, std::uint64_t i, W w) {
    std::memcpy(bytes[t].data() + i * sizeof(W), &w, sizeof(W));
  }
};

// Weight-like bit patterns with special values sprinkled in.
std::uint32_t random_pattern(std::mt19937_64& rng, unsigned width) {
  std::normal_distribution<float> nd(0.0f, 0.02f);
  const unsigned kind = rng() % 100;
  std::uint32_t f32 = 0;
  float x = nd(rng);
  std::memcpy(&f32, &x, 4);
  if (kind == 0) f32 = 0x7FC00000u | static_cast<std::uint32_t>(rng() & 0x3FFFFF);  // NaN with payload
  if (kind == 1) f32 = (rng() & 1 ? 0x80000000u : 0) | 0x7F800000u;                 // +-Inf
  if (kind == 2) f32 = 0x80000000u;                                                  // -0
  if (kind == 3) f32 = 0;                                                            // +0
  if (kind == 4) f32 = static_cast<std::uint32_t>(rng() & 0x807FFFFFu);              // f32 subnormal / tiny
  switch (width) {
    case 1: return kind == 5 ? static_cast<std::uint32_t>(rng() & 0x87) : gen::f8_e4m3_from_f32_bits(f32);  // f8 subnormals
    case 2: return kind == 5 ? static_cast<std::uint32_t>(rng() & 0x807F) : gen::bf16_from_f32_bits(f32);   // bf16 subnormals
    default: return f32;
  }
}

// A new pattern != old: mostly +-1/2 ULP moves, sometimes huge jumps or special values.
std::uint32_t changed_pattern(std::mt19937_64& rng, std::uint32_t old, unsigned width) {
  const std::uint32_t mask = width == 4 ? 0xFFFFFFFFu : (1u << (8 * width)) - 1;
  std::uint32_t v = old;
  const unsigned kind = rng() % 20;
  if (kind < 14) {
    const int step = (kind % 2 ? 1 : -1) * (kind < 12 ? 1 : 2);
    v = (old + static_cast<std::uint32_t>(step)) & mask;  // a raw step in bit space: +-1 ULP for most patterns
  } else if (kind < 17) {
    v = random_pattern(rng, width) & mask;
  } else if (kind == 17) {
    v = old ^ (1u << (8 * width - 1));  // sign flip (also +0 <-> -0)
  } else {
    v = static_cast<std::uint32_t>(rng()) & mask;  // arbitrary jump
  }
  if (v == old) v = (old + 1) & mask;
  return v;
}

template <class W>
void fill_pair(host_model& base, host_model& target, std::mt19937_64& rng, double density, bool all_changed = false) {
  const unsigned w = sizeof(W);
  std::bernoulli_distribution change(density);
  for (std::size_t t = 0; t < base.layout.size(); ++t) {
    for (std::uint64_t i = 0; i < base.layout[t].numel(); ++i) {
      const auto b = static_cast<W>(random_pattern(rng, w));
      base.set<W>(t, i, b);
      target.set<W>(t, i, (all_changed || change(rng)) ? static_cast<W>(changed_pattern(rng, b, w)) : b);
    }
  }
}

void fill_pair_any(dtype dt, host_model& base, host_model& target, std::mt19937_64& rng, double density, bool all = false) {
  switch (size_of(dt)) {
    case 1: fill_pair<std::uint8_t>(base, target, rng, density, all); break;
    case 2: fill_pair<std::uint16_t>(base, target, rng, density, all); break;
    default: fill_pair<std::uint32_t>(base, target, rng, density, all); break;
  }
}

// ---------------------------------------------------------------- device model (tensors scattered)

struct device_model {
  std::vector<void*> allocations;
  std::vector<void*> ptrs;  // tensor data (possibly offset from the allocation to misalign it)
  void** d_ptrs = nullptr;

  device_model(const host_model& h, unsigned misalign_elems = 0) {
    for (std::size_t i = 0; i < h.layout.size(); ++i) {
      const std::size_t w = size_of(h.layout[i].dtype);
      const std::size_t off = misalign_elems * w;
      void* a = nullptr;
      REQUIRE(cudaMalloc(&a, h.bytes[i].size() + off + 16) == cudaSuccess);
      allocations.push_back(a);
      void* p = static_cast<unsigned char*>(a) + off;
      ptrs.push_back(p);
      if (!h.bytes[i].empty()) REQUIRE(cudaMemcpy(p, h.bytes[i].data(), h.bytes[i].size(), cudaMemcpyHostToDevice) == cudaSuccess);
    }
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&d_ptrs), std::max<std::size_t>(1, ptrs.size()) * sizeof(void*)) == cudaSuccess);
    REQUIRE(cudaMemcpy(d_ptrs, ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  device_model(const device_model&) = delete;
  ~device_model() {
    for (void* a : allocations) cudaFree(a);
    cudaFree(d_ptrs);
  }
  void download(host_model& h) const {
    for (std::size_t i = 0; i < ptrs.size(); ++i)
      if (!h.bytes[i].empty()) REQUIRE(cudaMemcpy(h.bytes[i].data(), ptrs[i], h.bytes[i].size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  }
  [[nodiscard]] const void* const* cptrs() const { return d_ptrs; }
};

struct device_bytes {
  unsigned char* p = nullptr;
  std::size_t n = 0;
  explicit device_bytes(const std::vector<unsigned char>& v, std::size_t extra = 0) : n(v.size()) {
    REQUIRE(cudaMalloc(&p, std::max<std::size_t>(1, n + extra)) == cudaSuccess);
    if (n) REQUIRE(cudaMemcpy(p, v.data(), n, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  device_bytes(const device_bytes&) = delete;
  ~device_bytes() { cudaFree(p); }
};

// ---------------------------------------------------------------- host reference and GPU frames

std::vector<unsigned char> host_frame(const host_model& base, const host_model& target, const bucket_plan& plan, std::uint32_t index,
                                      encoder_id enc, value_mode mode, unsigned log2_chunk) {
  std::vector<unsigned char> out;
  encode_options opt{mode, log2_chunk};
  const auto bv = base.views();
  const auto tv = target.views();
  visit_encoder(enc, [&]<class E>(E) { encode_bucket<E>(base.layout, plan, index, bv, tv, opt, out); });
  return out;
}

std::vector<unsigned char> download_frame(const sc::encode_plan& p) {
  std::vector<unsigned char> v(p.frame_bytes());
  if (!v.empty()) REQUIRE(cudaMemcpy(v.data(), p.frame(), v.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  return v;
}

std::string describe_diff(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  std::string s = "host " + std::to_string(a.size()) + " bytes, gpu " + std::to_string(b.size()) + " bytes";
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  if (i == n && a.size() == b.size()) return s + ", identical";
  s += ", first difference at byte " + std::to_string(i);
  if (a.size() >= 80) {
    const auto S = detail::load_le<std::uint32_t>(a.data() + 12);
    const auto C = detail::load_le<std::uint32_t>(a.data() + 32);
    const std::size_t table = 80 + 24ull * S, data = table + 8ull * C;
    if (i < 80) s += " (header field at offset " + std::to_string(i) + ")";
    else if (i < table) s += " (segment table)";
    else if (i < data) s += " (chunk table, chunk " + std::to_string((i - table) / 8) + ")";
    else s += " (chunk data, " + std::to_string(i - data) + " bytes into the data)";
    char buf[128];
    for (std::size_t k = i < 80 ? 0 : (i & ~std::size_t{7}); k < std::min<std::size_t>(n, (i & ~std::size_t{7}) + 16); ++k) {
      std::snprintf(buf, sizeof buf, " [%zu] %02x/%02x", k, a[k], b[k]);
      s += buf;
      if (i < 80 && k >= 79) break;
    }
  }
  return s;
}

void expect_identical(const std::vector<unsigned char>& host, const std::vector<unsigned char>& gpu, const std::string& what) {
  INFO(what << ": " << describe_diff(host, gpu));
  CHECK(host == gpu);
}

struct encode_case {
  encoder_id enc;
  value_mode mode;
};

// Every encoder with a device twin (encoder_table's gpu column), in both value modes.
std::vector<encode_case> all_cases() {
  std::vector<encode_case> v;
  for (const auto& row : encoder_table)
    if (row.gpu)
      for (auto m : {value_mode::absolute, value_mode::ulp}) v.push_back({row.id, m});
  return v;
}

std::string name_of(encode_case c, unsigned log2_chunk = 16) {
  return std::string(encoder_name(c.enc)) + "/" + std::string(to_string(c.mode)) + "/L" + std::to_string(log2_chunk);
}

// Host-side verdict on one bucket frame applied to `base` (a fresh patch: bucket index 0, tiling from tensor 0
// unless `first` says otherwise).
status host_verdict(const host_model& base, const std::vector<unsigned char>& frame, bool known_base) {
  apply_options opt;
  if (known_base) opt.known_base_checksum = 0;  // only its presence matters for add_bucket
  const auto cur = base.views();
  staged_patch sp(base.layout, cur, opt);
  std::size_t used = 0;
  return sp.add_bucket(frame, used);
}

// Recomputes the payload and header checksums of a (possibly mutated) bucket frame, as far as its fields allow.
void fix_checksums(std::vector<unsigned char>& f) {
  if (f.size() < 80) return;
  const auto S = detail::load_le<std::uint32_t>(f.data() + 12);
  const auto C = detail::load_le<std::uint32_t>(f.data() + 32);
  const std::uint64_t table = 80 + 24ull * S, data = table + 8ull * C;
  if (data > f.size()) return;
  std::uint64_t payload = stream_hash(f.data() + 80, 24ull * S, 0);
  std::uint64_t off = 0;
  for (std::uint32_t c = 0; c < C; ++c) {
    const unsigned char* e = f.data() + table + 8ull * c;
    const auto len = detail::load_le<std::uint32_t>(e + 4);
    if (data + off + len > f.size()) return;
    stream_hasher h(c);
    h.update(e, 8);
    h.update(f.data() + data + off, len);
    payload += h.digest();
    off += len;
  }
  detail::store_le<std::uint64_t>(f.data() + 64, payload);
  detail::store_le<std::uint64_t>(f.data() + 72, stream_hash(f.data(), 72, 0));
}

// GPU verdict of one frame against a device model, bucket-atomic apply. Returns the status; the model is
// written only when it is ok.
status gpu_apply_one(sc::apply_plan& ap, const device_model& dm, const std::vector<unsigned char>& frame, std::size_t pass_bytes) {
  device_bytes df(frame);
  ap.begin();
  ap.apply(df.p, pass_bytes, dm.d_ptrs);
  return ap.result().status;
}

}  // namespace

// ================================================================ tests

// A detect tuning's ring is optional (a policy written before it keeps compiling, without the ring) and, when
// given, 0 or 2-4 tiles: a ring of one tile would have nothing in flight beside the tile being read.
namespace tuning_checks {  // (not anonymous: nvcc warns of a local type's members read only by the concept)
struct tuning_without_ring {
  static constexpr int detect_threads = 128;
  static constexpr int detect_iters = 4;
  static constexpr int detect_min_blocks = 4;
};
static_assert(sc::detect_tuning<tuning_without_ring> && sc::detect_stages_v<tuning_without_ring> == 0);
static_assert(sc::detect_tuning<sc::detect_config<128, 4, 4, 2>> && sc::detect_stages_v<sc::detect_config<128, 4, 4, 2>> == 2);
static_assert(!sc::detect_tuning<sc::detect_config<128, 4, 4, 1>> && !sc::detect_tuning<sc::detect_config<128, 4, 4, 5>>);
static_assert(sc::detect_stages_v<sc::default_policy::detect_known> == 2);
}  // namespace tuning_checks

namespace {
struct xxh_job {
  std::uint64_t off, len, seed;
};

// Two device paths: the byte-wise one-shot hash, and hash_chunk (bit_reader, first 8 bytes as the entry word).
__global__ void xxh_test_kernel(const unsigned char* base, const xxh_job* jobs, std::uint64_t* out, std::size_t n) {
  const std::size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const xxh_job j = jobs[i];
  out[2 * i] = sc::detail::xxh64_bytes(base + j.off, j.len, j.seed);
  out[2 * i + 1] = 0;
  if (j.len >= 8) {
    std::uint64_t entry = 0;
    for (int k = 0; k < 8; ++k) entry |= static_cast<std::uint64_t>(base[j.off + k]) << (8 * k);
    out[2 * i + 1] = sc::detail::hash_chunk(j.seed, entry, base + j.off + 8, j.len - 8);
  }
}
}  // namespace

TEST_CASE("device XXH64 equals libxxhash on every length and alignment") {
  std::mt19937_64 rng(42);
  std::vector<unsigned char> buf(4096 + 64);
  for (auto& c : buf) c = static_cast<unsigned char>(rng());
  device_bytes d(buf);
  std::vector<xxh_job> jobs;
  for (std::uint64_t len = 0; len <= 300; ++len) jobs.push_back({len % 13, len, len * 7919});
  for (std::uint64_t off = 0; off < 16; ++off) jobs.push_back({off, 4096 + (off % 5), off});
  std::vector<std::uint64_t> got(2 * jobs.size());
  xxh_job* dj = nullptr;
  std::uint64_t* dg = nullptr;
  CUDA_OK(cudaMalloc(&dj, jobs.size() * sizeof(xxh_job)));
  CUDA_OK(cudaMalloc(&dg, got.size() * 8));
  CUDA_OK(cudaMemcpy(dj, jobs.data(), jobs.size() * sizeof(xxh_job), cudaMemcpyHostToDevice));
  xxh_test_kernel<<<static_cast<unsigned>((jobs.size() + 127) / 128), 128>>>(d.p, dj, dg, jobs.size());
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(got.data(), dg, got.size() * 8, cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    CHECK_EQ(got[2 * i], XXH64(buf.data() + j.off, j.len, j.seed));
    if (j.len >= 8) CHECK_EQ(got[2 * i + 1], XXH64(buf.data() + j.off, j.len, j.seed));
  }
  cudaFree(dj);
  cudaFree(dg);
}

namespace {
// One stream of a random buffer read by bit_reader (global memory, 16-byte blocks) and word_bit_reader (words,
// funnel shifts; what the warp entropy decoder's lane 0 reads its staged copy with) through the same operations:
// every value, failure flag and position must agree after each. Op: kind | param << 8 | param2 << 16; kind 0
// get(param), 1 get_unary(param), 2 entropy_rice_get(k = param, raw bits = param2).
struct reader_job {
  std::uint32_t begin, end, first_op, ops;
};

__global__ void reader_twin_kernel(const unsigned char* buf, std::uint32_t bytes, const reader_job* jobs, std::size_t n_jobs,
                                   const std::uint32_t* ops, std::uint32_t* bad_op) {
  const std::size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_jobs) return;
  const reader_job j = jobs[i];
  sc::detail::bit_reader a(buf + j.begin, buf + j.end, buf, buf + bytes);
  sc::detail::word_bit_reader b(reinterpret_cast<const std::uint32_t*>(buf), bytes / 4, 8 * j.begin, 8 * j.end);
  bad_op[i] = ~0u;
  for (std::uint32_t o = 0; o < j.ops; ++o) {
    const std::uint32_t op = ops[j.first_op + o], kind = op & 0xFFu, p1 = (op >> 8) & 0xFFu, p2 = op >> 16;
    bool same = true;
    if (kind == 0) {
      same = a.get(p1) == b.get(p1);
    } else if (kind == 1) {
      same = a.get_unary(p1) == b.get_unary(p1);
    } else {
      std::uint64_t va = 0, vb = 0;
      const auto ea = sc::detail::entropy_rice_get(a, p1, p2, va), eb = sc::detail::entropy_rice_get(b, p1, p2, vb);
      same = ea == eb && (ea != sparsesync::errc::ok || va == vb);
    }
    if (!same || a.failed() != b.failed() || a.position_bits() != b.position_bits()) {
      bad_op[i] = o;
      return;
    }
  }
}
}  // namespace

TEST_CASE("the word reader of staged bitstreams reads exactly as bit_reader: values, failures, positions") {
  std::mt19937_64 rng(7);
  // Runs of ones and zeros of random lengths, so that unary parts and escapes of every length occur.
  std::vector<unsigned char> buf(4096);
  for (std::size_t bit = 0; bit < 8 * buf.size();) {
    const bool one = rng() % 2;
    const std::size_t run = 1 + rng() % (rng() % 4 == 0 ? 40 : 6);
    for (std::size_t r = 0; r < run && bit < 8 * buf.size(); ++r, ++bit)
      if (one) buf[bit / 8] |= static_cast<unsigned char>(1u << (bit % 8));
  }
  device_bytes d(buf);
  std::vector<reader_job> jobs;
  std::vector<std::uint32_t> ops;
  for (std::uint32_t len = 0; len <= 48; ++len)
    for (std::uint32_t begin = 0; begin < 16; ++begin)
      for (int rep = 0; rep < 4; ++rep) {
        const std::uint32_t start = begin + 64 * static_cast<std::uint32_t>(rng() % 60);
        reader_job j{start, start + len, static_cast<std::uint32_t>(ops.size()), 0};
        for (int o = 0; o < 40; ++o) {
          const unsigned kind = static_cast<unsigned>(rng() % 3);
          std::uint32_t op = kind;
          if (kind == 0) op |= static_cast<std::uint32_t>(rng() % 33) << 8;
          else if (kind == 1) op |= static_cast<std::uint32_t>(1 + rng() % 32) << 8;
          else op |= static_cast<std::uint32_t>(rng() % 25) << 8 | static_cast<std::uint32_t>(1 + rng() % 32) << 16;
          ops.push_back(op);
          ++j.ops;
        }
        jobs.push_back(j);
      }
  reader_job* dj = nullptr;
  std::uint32_t *dops = nullptr, *dbad = nullptr;
  CUDA_OK(cudaMalloc(&dj, jobs.size() * sizeof(reader_job)));
  CUDA_OK(cudaMalloc(&dops, ops.size() * 4));
  CUDA_OK(cudaMalloc(&dbad, jobs.size() * 4));
  CUDA_OK(cudaMemcpy(dj, jobs.data(), jobs.size() * sizeof(reader_job), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dops, ops.data(), ops.size() * 4, cudaMemcpyHostToDevice));
  reader_twin_kernel<<<static_cast<unsigned>((jobs.size() + 127) / 128), 128>>>(d.p, static_cast<std::uint32_t>(buf.size()), dj, jobs.size(), dops,
                                                                                   dbad);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> bad(jobs.size());
  CUDA_OK(cudaMemcpy(bad.data(), dbad, bad.size() * 4, cudaMemcpyDeviceToHost));
  std::size_t failed = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (bad[i] == ~0u) continue;
    if (failed++ < 5) MESSAGE("job " << i << " (bytes " << jobs[i].begin << ".." << jobs[i].end << "): readers differ at op " << bad[i]);
  }
  CHECK_EQ(failed, 0u);
  cudaFree(dj);
  cudaFree(dops);
  cudaFree(dbad);
}

TEST_CASE("GPU frames are byte-identical to the host writer: sizes around warp, tile and chunk boundaries") {
  std::mt19937_64 rng(7);
  struct shape {
    dtype dt;
    std::uint64_t n;
    unsigned L;
  };
  std::vector<shape> shapes;
  for (std::uint64_t n : {1ull, 7ull, 31ull, 32ull, 33ull, 255ull, 256ull, 257ull, 1000ull}) shapes.push_back({dtype::bf16, n, 8});
  for (std::uint64_t n : {2047ull, 2048ull, 2049ull, 8191ull, 8192ull, 8193ull, 65535ull, 65536ull, 65537ull, 200003ull})
    shapes.push_back({dtype::bf16, n, 16});
  shapes.push_back({dtype::bf16, 70001, 12});
  shapes.push_back({dtype::f16, 40000, 9});
  for (std::uint64_t n : {1ull, 4095ull, 4096ull, 4097ull, 70000ull}) shapes.push_back({dtype::f32, n, 16});
  for (std::uint64_t n : {1ull, 16383ull, 16384ull, 16385ull, 70000ull}) shapes.push_back({dtype::f8_e4m3, n, 16});
  shapes.push_back({dtype::f8_e5m2, 3000, 8});
  if (!quick()) {
    shapes.push_back({dtype::bf16, 300000, 24});
    shapes.push_back({dtype::f32, 150000, 13});
  }
  const std::vector<double> densities = quick() ? std::vector<double>{0.01} : std::vector<double>{0.0, 0.01, 0.3};
  for (const auto& sh : shapes) {
    for (double density : densities) {
      model_layout layout({{"w", sh.dt, {sh.n}}});
      host_model base(layout), target(layout);
      fill_pair_any(sh.dt, base, target, rng, density);
      device_model db(base, sh.n % 3 == 0 ? 1 : 0), dt(target);  // some runs misaligned: the element path
      const bucket_plan plan{sh.dt, {{0, 0, sh.n}}};
      for (const auto& c : all_cases()) {
        const auto want = host_frame(base, target, plan, 0, c.enc, c.mode, sh.L);
        sc::encode_config cfg{c.enc, c.mode, sh.L};
        sc::encode_plan p(layout, plan, cfg);
        p.encode(db.cptrs(), dt.cptrs());
        expect_identical(want, download_frame(p),
                         std::string(to_string(sh.dt)) + " n=" + std::to_string(sh.n) + " density=" + std::to_string(density) + " " +
                             name_of(c, sh.L));
        CHECK(p.frame_bytes() <= sc::max_frame_bytes(p.bucket(), p.config()));
      }
    }
  }
}

TEST_CASE("GPU frames: no change, all changed, special values, known base, scratch and output growth") {
  std::mt19937_64 rng(11);
  model_layout layout({{"w", dtype::bf16, {100000}}});
  const bucket_plan plan{dtype::bf16, {{0, 0, 100000}}};
  for (int variant = 0; variant < 3; ++variant) {
    host_model base(layout), target(layout);
    fill_pair<std::uint16_t>(base, target, rng, variant == 0 ? 0.0 : 0.05, variant == 1);
    if (variant == 2) {  // every special pattern moves to every other
      const std::uint16_t specials[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x0001, 0x8001, 0x007F, 0x7F7F, 0xFF7F};
      std::uint64_t i = 0;
      for (auto a : specials)
        for (auto b : specials)
          if (a != b) {
            base.set<std::uint16_t>(0, i, a);
            target.set<std::uint16_t>(0, i, b);
            ++i;
          }
    }
    device_model db(base), dt(target);
    for (const auto& c : all_cases()) {
      const auto want = host_frame(base, target, plan, 3, c.enc, c.mode, 16);
      sc::encode_config cfg{c.enc, c.mode, 16, 3};
      cfg.max_changes = 8;  // far too small: the plan must grow its scratch and re-encode
      sc::encode_plan p(layout, plan, cfg);
      const auto r = p.encode(db.cptrs(), dt.cptrs());
      expect_identical(want, download_frame(p), "variant " + std::to_string(variant) + " " + name_of(c));
      cfg.max_changes = 200000;  // enough scratch, but a 100-byte output: the frame is rewritten from scratch
      sc::encode_plan q(layout, plan, cfg, nullptr, 100);
      q.encode(db.cptrs(), dt.cptrs());
      expect_identical(want, download_frame(q), "output growth, variant " + std::to_string(variant) + " " + name_of(c));
      // Incremental path: the base checksum supplied instead of computed gives the same frame.
      p.set_known_base(r.base_checksum);
      p.encode(db.cptrs(), dt.cptrs());
      expect_identical(want, download_frame(p), "known base, variant " + std::to_string(variant) + " " + name_of(c));
    }
  }
}

TEST_CASE("GPU frames: hundreds of tiny tensors, scattered and misaligned, several buckets and dtypes") {
  std::mt19937_64 rng(5);
  std::vector<tensor_info> tensors;
  const int count = quick() ? 60 : 400;
  for (int i = 0; i < count; ++i) {
    const dtype dt = i % 50 == 49 ? dtype::f32 : (i % 70 == 69 ? dtype::f8_e5m2 : dtype::bf16);
    std::uint64_t n = 1 + rng() % 300;
    if (i % 97 == 3) n = 0;                       // empty tensors are skipped by the tiling
    if (i % 40 == 7) n = 20000 + rng() % 50000;   // a few larger ones
    tensors.push_back({"t" + std::to_string(i), dt, {n}});
  }
  model_layout layout(tensors);
  host_model base(layout), target(layout);
  for (std::size_t t = 0; t < layout.size(); ++t) {
    host_model one(model_layout({layout[t]}));
    host_model two(model_layout({layout[t]}));
    fill_pair_any(layout[t].dtype, one, two, rng, 0.05);
    base.bytes[t] = one.bytes[0];
    target.bytes[t] = two.bytes[0];
  }
  for (unsigned misalign : {0u, 3u}) {
    device_model db(base, misalign), dt(target, misalign + 1);
    for (std::uint64_t bucket_bytes : {std::uint64_t{1} << 20, std::uint64_t{60000}}) {
      const auto plans = fixed_bytes{bucket_bytes}.plan(layout, 12);
      for (const auto& c : all_cases()) {
        for (std::size_t b = 0; b < plans.size(); ++b) {
          const auto want = host_frame(base, target, plans[b], static_cast<std::uint32_t>(b), c.enc, c.mode, 12);
          sc::encode_config cfg{c.enc, c.mode, 12, static_cast<std::uint32_t>(b)};
          sc::encode_plan p(layout, plans[b], cfg);
          p.encode(db.cptrs(), dt.cptrs());
          expect_identical(want, download_frame(p),
                           "bucket " + std::to_string(b) + " of " + std::to_string(plans.size()) + " (" +
                               std::to_string(plans[b].segments.size()) + " segments) misalign " + std::to_string(misalign) + " " +
                               name_of(c, 12));
        }
      }
    }
  }
}

// encode_config::advance_base: the detect pass writes the target over the base. Same frames and results as the
// separate advance; the base ends at the target, bit for bit; a scratch overflow puts the old bits back before
// the retry (the retry must see the same base, or its frame would lose the changes of the advanced tiles).
TEST_CASE("GPU encode with the snapshot advance fused into detect: same frames, base at the target, overflow undone") {
  std::mt19937_64 rng(23);
  std::vector<tensor_info> tensors;
  for (int i = 0; i < (quick() ? 20 : 80); ++i) {
    std::uint64_t n = 1 + rng() % 500;
    if (i % 10 == 4) n = 70000 + rng() % 140000;  // whole aligned tiles (the vector path) beside element-wise ones
    tensors.push_back({"t" + std::to_string(i), i % 17 == 16 ? dtype::f32 : dtype::bf16, {n}});
  }
  model_layout layout(tensors);
  host_model base(layout), target(layout);
  for (std::size_t t = 0; t < layout.size(); ++t) {
    host_model one(model_layout({layout[t]})), two(model_layout({layout[t]}));
    fill_pair_any(layout[t].dtype, one, two, rng, t % 5 == 0 ? 0.3 : 0.01);
    base.bytes[t] = one.bytes[0];
    target.bytes[t] = two.bytes[0];
  }
  const auto plans = fixed_bytes{std::uint64_t{1} << 20}.plan(layout, 16);
  for (unsigned misalign : {0u, 1u}) {
    device_model dt(target, misalign);
    for (const auto& c : all_cases()) {
      if (c.enc == encoder_id::entropy) continue;  // refused: its later passes read the base again (checked below)
      for (int variant = 0; variant < 2; ++variant) {  // 0: scratch enough; 1: far too small (undo, grow, retry)
        device_model db(base, misalign);
        for (std::size_t b = 0; b < plans.size(); ++b) {
          const auto want = host_frame(base, target, plans[b], static_cast<std::uint32_t>(b), c.enc, c.mode, 16);
          sc::encode_config cfg{c.enc, c.mode, 16, static_cast<std::uint32_t>(b)};
          if (variant == 1) cfg.max_changes = 8;
          sc::encode_plan p(layout, plans[b], cfg);
          p.fuse_advance(true);
          const auto r = p.encode(db.cptrs(), dt.cptrs());
          p.advance_base_async();  // nothing left to do
          const std::string what = "bucket " + std::to_string(b) + " misalign " + std::to_string(misalign) + " variant " +
                                   std::to_string(variant) + " " + name_of(c);
          expect_identical(want, download_frame(p), what);
          CHECK_MESSAGE(r.changed == detail::load_le<std::uint64_t>(want.data() + 24), what);
        }
        CUDA_OK(cudaDeviceSynchronize());
        host_model after(layout);
        db.download(after);
        for (std::size_t t = 0; t < layout.size(); ++t) CHECK_MESSAGE(after.bytes[t] == target.bytes[t], "tensor " << t << " " << name_of(c));
      }
    }
  }
  // Entropy with the fused advance is refused at the low level (the configuration check, before any device access).
  sc::encode_config cfg{encoder_id::entropy, value_mode::ulp, 16};
  cfg.advance_base = true;
  cfg.max_changes = 1000;
  std::size_t bytes = 0;
  sc::device_segment seg{};
  const sc::device_bucket one{dtype::bf16, &seg, 1, 1000};
  CHECK(sc::encode_bucket(nullptr, bytes, one, nullptr, nullptr, nullptr, 0, nullptr, cfg) == cudaErrorInvalidValue);
  cfg.advance_base = false;
  CHECK(sc::encode_bucket(nullptr, bytes, one, nullptr, nullptr, nullptr, 0, nullptr, cfg) == cudaSuccess);
}

TEST_CASE("GPU apply in place: frames of every encoder, mode and dtype; bucket by bucket and whole patch") {
  std::mt19937_64 rng(99);
  std::vector<tensor_info> tensors = {{"emb", dtype::bf16, {3000, 7}},  {"ln", dtype::bf16, {300}},     {"empty", dtype::bf16, {0}},
                                      {"w", dtype::f32, {50001}},       {"q", dtype::f8_e4m3, {70001}}, {"b", dtype::bf16, {17}},
                                      {"h", dtype::f16, {9999}},        {"big", dtype::bf16, {140000}}};
  model_layout layout(tensors);
  host_model base(layout), target(layout);
  for (std::size_t t = 0; t < layout.size(); ++t) {
    host_model one(model_layout({layout[t]})), two(model_layout({layout[t]}));
    fill_pair_any(layout[t].dtype, one, two, rng, t == 5 ? 1.0 : 0.02, t == 5);
    base.bytes[t] = one.bytes[0];
    target.bytes[t] = two.bytes[0];
  }
  for (const auto& c : all_cases()) {
    for (bool known : {false, true}) {
      patch_options po;
      po.encode = {c.mode, 12};
      std::vector<unsigned char> patch;
      visit_encoder(c.enc, [&]<class E>(E) { patch = encode_patch<E>(layout, base.views(), target.views(), po, fixed_bytes{100000}); });
      patch_prologue pro;
      REQUIRE(parse_patch_prologue(patch, pro).ok());
      std::vector<std::pair<std::size_t, std::size_t>> frames;  // offset, length
      std::size_t at = pro.bytes;
      for (std::uint32_t b = 0; b < pro.header.bucket_count; ++b) {
        bucket_header h;
        REQUIRE(detail::read_bucket_header(std::span(patch).subspan(at), h).ok());
        frames.push_back({at, static_cast<std::size_t>(h.total_bytes())});
        at += h.total_bytes();
      }
      device_bytes dpatch(patch);
      sc::apply_config acfg;
      acfg.known_base = known;
      // Bucket by bucket.
      {
        device_model dm(base);
        sc::apply_plan ap(layout, acfg);
        for (auto [off, len] : frames) ap.apply(dpatch.p + off, len, dm.d_ptrs);
        ap.check_patch(pro.header);
        const auto r = ap.result();
        INFO(name_of(c, 12) << " known_base=" << known << ": " << r.status.message() << " code " << static_cast<int>(r.status.code()));
        CHECK(r.status.ok());
        CHECK_EQ(r.committed, frames.size());
        host_model got(layout);
        dm.download(got);
        CHECK(got.bytes == target.bytes);
      }
      // Whole patch, atomically: verify all, check totals, commit all.
      {
        device_model dm(base);
        sc::apply_plan ap(layout, acfg);
        for (auto [off, len] : frames) ap.verify(dpatch.p + off, len, dm.d_ptrs);
        ap.check_patch(pro.header);
        for (auto [off, len] : frames) ap.commit(dpatch.p + off, len, dm.d_ptrs);
        const auto r = ap.result();
        INFO(name_of(c, 12) << " atomic: " << r.status.message());
        CHECK(r.status.ok());
        CHECK_EQ(r.target_checksum, pro.header.target_checksum);
        host_model got(layout);
        dm.download(got);
        CHECK(got.bytes == target.bytes);
      }
      // The same on three lanes (apply_plan::set_lanes: buckets verify side by side, joined in bucket order):
      // atomic; streamed with a refused closing header, rolled back; and buckets given out of order, refused.
      {
        std::vector<cudaStream_t> lanes(3);
        for (auto& l : lanes) REQUIRE(cudaStreamCreateWithFlags(&l, cudaStreamNonBlocking) == cudaSuccess);
        {
          device_model dm(base);
          sc::apply_plan ap(layout, acfg);
          ap.set_lanes(lanes);
          for (auto [off, len] : frames) ap.verify(dpatch.p + off, len, dm.d_ptrs);
          ap.check_patch(pro.header);
          for (auto [off, len] : frames) ap.commit(dpatch.p + off, len, dm.d_ptrs);
          const auto r = ap.result();
          INFO(name_of(c, 12) << " lanes, atomic: " << r.status.message());
          CHECK(r.status.ok());
          CHECK_EQ(r.committed, frames.size());
          host_model got(layout);
          dm.download(got);
          CHECK(got.bytes == target.bytes);
        }
        // The whole patch's commit in one call (the kept buckets commit side by side on the lanes), twice with the
        // same plan (the second patch goes back: the lanes of one patch's commit before the next one's verifies);
        // then on the wrong base (the last bucket refused): nothing written.
        {
          std::vector<std::pair<const unsigned char*, std::size_t>> fr;
          for (auto [off, len] : frames) fr.push_back({dpatch.p + off, len});
          device_model dm(base);
          sc::apply_plan ap(layout, acfg);
          ap.set_lanes(lanes);
          for (auto [f, len] : fr) ap.verify(f, len, dm.d_ptrs);
          ap.check_patch(pro.header);
          ap.commit(fr, dm.d_ptrs);
          const auto r = ap.result();
          INFO(name_of(c, 12) << " lanes, atomic, one commit call: " << r.status.message());
          CHECK(r.status.ok());
          CHECK_EQ(r.committed, frames.size());
          host_model got(layout);
          dm.download(got);
          CHECK(got.bytes == target.bytes);
          ap.begin();
          for (auto [f, len] : fr) ap.verify(f, len, dm.d_ptrs);  // the same frames on the new weights: refused
          ap.check_patch(pro.header, known ? std::optional<std::uint64_t>(pro.header.base_checksum ^ 1) : std::nullopt);
          ap.commit(fr, dm.d_ptrs);
          const auto again = ap.result();
          CHECK_FALSE(again.status.ok());
          CHECK_EQ(again.committed, 0);
          dm.download(got);
          CHECK(got.bytes == target.bytes);
        }
        {
          device_model dm(base);
          sc::apply_plan ap(layout, acfg);
          ap.set_lanes(lanes);
          for (auto [off, len] : frames) ap.apply_undoable(dpatch.p + off, len, dm.d_ptrs);
          patch_header bad = pro.header;
          bad.target_checksum ^= 1;
          ap.check_patch(bad);
          const auto r = ap.result();
          INFO(name_of(c, 12) << " lanes, streamed: " << r.status.message());
          CHECK_FALSE(r.status.ok());
          CHECK_EQ(r.committed, frames.size());
          ap.rollback(dm.d_ptrs);
          host_model got(layout);
          dm.download(got);
          CHECK(got.bytes == base.bytes);
        }
        if (frames.size() > 1) {
          device_model dm(base);
          sc::apply_plan ap(layout, acfg);
          ap.set_lanes(lanes);
          std::vector<std::pair<std::size_t, std::size_t>> swapped = frames;
          std::swap(swapped[0], swapped[1]);
          for (auto [off, len] : swapped) ap.apply_undoable(dpatch.p + off, len, dm.d_ptrs);
          ap.check_patch(pro.header);
          const auto r = ap.result();
          CHECK_FALSE(r.status.ok());
          CHECK_EQ(r.committed, 0);
          ap.rollback(dm.d_ptrs);
          host_model got(layout);
          dm.download(got);
          CHECK(got.bytes == base.bytes);
        }
        for (auto l : lanes) cudaStreamDestroy(l);
      }
      // A patch applied to the wrong base is refused and nothing is written (the last bucket is the bad one).
      {
        host_model wrong = base;
        const std::size_t t = layout.size() - 1;
        wrong.set<std::uint16_t>(t, 5, static_cast<std::uint16_t>(wrong.get<std::uint16_t>(t, 5) ^ 1));
        device_model dm(wrong);
        sc::apply_plan ap(layout, acfg);
        for (auto [off, len] : frames) ap.verify(dpatch.p + off, len, dm.d_ptrs);
        ap.check_patch(pro.header, known ? std::optional<std::uint64_t>(pro.header.base_checksum ^ 1) : std::nullopt);
        for (auto [off, len] : frames) ap.commit(dpatch.p + off, len, dm.d_ptrs);
        const auto r = ap.result();
        CHECK_FALSE(r.status.ok());
        CHECK_EQ(r.committed, 0);
        host_model got(layout);
        dm.download(got);
        CHECK(got.bytes == wrong.bytes);
        // The same, written bucket by bucket with undo: the buckets before the refused one were written, the
        // rollback restores them (with a vouched base, every bucket was written before check_patch refused).
        device_model du(wrong);
        sc::apply_plan au(layout, acfg);
        for (auto [off, len] : frames) au.apply_undoable(dpatch.p + off, len, du.d_ptrs);
        au.check_patch(pro.header, known ? std::optional<std::uint64_t>(pro.header.base_checksum ^ 1) : std::nullopt);
        CHECK_FALSE(au.result().status.ok());
        au.rollback(du.d_ptrs);
        host_model undone(layout);
        du.download(undone);
        CHECK(undone.bytes == wrong.bytes);
      }
      // Written bucket by bucket with undo, then a closing header that does not match: every bucket was
      // written, and the rollback restores every dtype's old bits (4-byte ones from their own array).
      {
        device_model dm(base);
        sc::apply_plan ap(layout, acfg);
        for (auto [off, len] : frames) ap.apply_undoable(dpatch.p + off, len, dm.d_ptrs);
        host_model mid(layout);
        dm.download(mid);
        CHECK(mid.bytes == target.bytes);
        patch_header bad = pro.header;
        bad.target_checksum ^= 1;
        ap.check_patch(bad);
        CHECK_FALSE(ap.result().status.ok());
        ap.rollback(dm.d_ptrs);
        host_model got(layout);
        dm.download(got);
        CHECK(got.bytes == base.bytes);
      }
    }
  }
}

// The chunk bodies of a one-bucket entropy frame of `segments` segments: how many of each tag (0: rice's body,
// 1: the class body) and the (offset, length) of those of at least 2 bytes (class bodies only, or every body).
struct entropy_frame_bodies {
  std::size_t tags[2] = {0, 0};
  std::vector<std::pair<std::size_t, std::size_t>> bodies;
};
entropy_frame_bodies entropy_bodies_of(const std::vector<unsigned char>& frame, std::size_t segments, bool class_bodies_only) {
  entropy_frame_bodies out;
  const auto C = detail::load_le<std::uint32_t>(frame.data() + 32);
  const std::size_t table = 80 + 24 * segments, data = table + 8ull * C;
  std::size_t off = 0;
  for (std::uint32_t k = 0; k < C; ++k) {
    const auto len = detail::load_le<std::uint32_t>(frame.data() + table + 8ull * k + 4);
    if (len > 0 && frame[data + off] <= 1) ++out.tags[frame[data + off]];
    if (len > 1 && (!class_bodies_only || frame[data + off] == 1)) out.bodies.emplace_back(data + off, len);
    off += len;
  }
  return out;
}

// Applies an entropy frame on the GPU (the target must come back), then `mutations` bit flips inside its bodies
// (checksums recomputed), in the header and gaps at a body's start and in the values at its end (read by other
// kernels than the gaps): the GPU refuses exactly when the host does, and a refused frame leaves the weights as
// they were.
void check_entropy_apply_and_flips(const model_layout& layout, const host_model& base, const host_model& target,
                                   const std::vector<unsigned char>& frame, const std::vector<std::pair<std::size_t, std::size_t>>& bodies,
                                   int mutations, std::mt19937_64& rng, const std::string& what) {
  sc::apply_plan ap(layout);
  device_model dm(base);
  CHECK(gpu_apply_one(ap, dm, frame, frame.size()).ok());
  host_model got(layout);
  dm.download(got);
  CHECK(got.bytes == target.bytes);
  device_model dm2(base);
  for (int m = 0; m < mutations && !bodies.empty(); ++m) {
    std::vector<unsigned char> f = frame;
    const auto [body, body_len] = bodies[rng() % bodies.size()];
    const std::size_t back = 1 + rng() % std::min<std::size_t>(8, body_len - 1);
    const std::size_t at = m % 2 == 0 ? body + 1 + rng() % 8 : body + body_len - back;
    if (at >= f.size()) continue;
    f[at] ^= static_cast<unsigned char>(1u << (rng() % 8));
    fix_checksums(f);
    const status host = host_verdict(base, f, false);
    const status gpu = gpu_apply_one(ap, dm2, f, f.size());
    INFO(what << " mutation " << m << " at " << at << ": host '" << host.message() << "', gpu '" << gpu.message() << "'");
    CHECK_EQ(host.ok(), gpu.ok());
    host_model after(layout);
    dm2.download(after);
    if (!gpu.ok()) CHECK(after.bytes == base.bytes);
    for (std::size_t t = 0; t < layout.size(); ++t)
      REQUIRE(cudaMemcpy(dm2.ptrs[t], base.bytes[t].data(), base.bytes[t].size(), cudaMemcpyHostToDevice) == cudaSuccess);
  }
}

TEST_CASE("entropy on the GPU: class bodies and rice bodies, byte-identical, applied, and mutated class bodies refused as the host does") {
  // Chunks of three kinds, so that both tags occur: changes conditioned on the old value's exponent (small
  // weights change often: the class body wins), uniformly random changes (rice's body usually wins), and
  // every element changed.
  // Random bit patterns fill every class, so BF16/FP16/FP32 chunks hold more groups than the warp decoder takes
  // (they go to its one-lane fallback) and than the encoder's bytes pass takes (its deferred pass); a band of 6
  // exponents ("narrow") keeps them in a few classes, as trained weights do, so that the warp path decodes them
  // too, mutations included; a band of 100 gives 65-128 groups, which the bytes pass leaves to the deferred pass
  // since its rank counters became whole words (session 20).
  std::mt19937_64 rng(4242);
  std::size_t class_bodies_seen = 0;  // the host picks the body (the GPU must match it): both kinds must occur
  for (const auto& kind_of_data : {std::pair{dtype::bf16, 0u}, std::pair{dtype::f16, 0u}, std::pair{dtype::f32, 0u},
                                   std::pair{dtype::f8_e5m2, 0u}, std::pair{dtype::bf16, 6u}, std::pair{dtype::f16, 6u},
                                   std::pair{dtype::f32, 6u}, std::pair{dtype::bf16, 100u}}) {
    const dtype dtp = kind_of_data.first;
    const unsigned band = kind_of_data.second;  // exponents drawn from `band` values (0: every bit random)
    const bool narrow = band != 0;
    const std::string band_name = band == 0 ? "" : band == 6 ? " narrow" : " band " + std::to_string(band);
    const unsigned w = size_of(dtp);
    const std::uint64_t n = 3 * 4096 + 333;
    model_layout layout({{"a", dtp, {n}}, {"b", dtp, {999}}});
    host_model base(layout), target(layout);
    for (std::size_t t = 0; t < layout.size(); ++t) {
      const std::uint64_t m = layout[t].numel();
      for (std::uint64_t i = 0; i < m; ++i) {
        std::uint32_t bits = random_pattern(rng, 8 * w);
        if (narrow) {  // exponent fields in a band of `band` values (FP16: 4), the rest of the pattern random
          const std::uint32_t e = static_cast<std::uint32_t>(rng() % band);
          if (dtp == dtype::bf16) bits = (bits & 0x807Fu) | ((118u + e) << 7);
          else if (dtp == dtype::f16) bits = (bits & 0x83FFu) | ((9u + e % 4) << 10);
          else bits = (bits & 0x807FFFFFu) | ((118u + e) << 23);
          // Some zeros: class 0, far below the band.
          if (rng() % 64 == 0) bits &= dtp == dtype::f32 ? 0x80000000u : 0x8000u;
        }
        const std::uint64_t kind = (i / 4096) % 3;
        const unsigned top = w == 1 ? (bits >> 2) & 31u : w == 2 ? (bits >> 7) & 255u : (bits >> 23) & 255u;
        const bool change = kind == 0 ? rng() % 100 < (top < (w == 1 ? 12u : 120u) ? 30u : 1u) : kind == 1 ? rng() % 100 < 3 : true;
        std::uint32_t nb = bits;
        if (change) nb = bits ^ (1u + static_cast<std::uint32_t>(rng() % 3));  // a small step in the low bits
        if (w == 1) {
          base.set<std::uint8_t>(t, i, static_cast<std::uint8_t>(bits));
          target.set<std::uint8_t>(t, i, static_cast<std::uint8_t>(nb));
        } else if (w == 2) {
          base.set<std::uint16_t>(t, i, static_cast<std::uint16_t>(bits));
          target.set<std::uint16_t>(t, i, static_cast<std::uint16_t>(nb));
        } else {
          base.set<std::uint32_t>(t, i, bits);
          target.set<std::uint32_t>(t, i, nb);
        }
      }
    }
    const bucket_plan plan{dtp, {{0, 0, n}, {1, 0, 999}}};
    for (auto mode : {value_mode::ulp, value_mode::absolute}) {
      for (unsigned L : {8u, 12u, 16u}) {
        const encode_case c{encoder_id::entropy, mode};
        const auto want = host_frame(base, target, plan, 0, c.enc, c.mode, L);
        device_model db(base), dt(target);
        sc::encode_plan p(layout, plan, sc::encode_config{c.enc, c.mode, L});
        p.encode(db.cptrs(), dt.cptrs());
        const auto frame = download_frame(p);
        expect_identical(want, frame, std::string(to_string(dtp)) + band_name + " " + name_of(c, L));
        const std::string what = std::string(to_string(dtp)) + band_name + " " + name_of(c, L);
        const auto bodies = entropy_bodies_of(frame, 2, true);
        INFO(what << ": " << bodies.tags[0] << " rice bodies, " << bodies.tags[1] << " class bodies");
        class_bodies_seen += bodies.tags[1];
        if (L != 16) WARN(bodies.tags[1] > 0);  // the wholly changed chunks need no gaps: the class body usually wins
        if (L == 12) WARN(bodies.tags[0] > 0);  // the uniform chunks: rice's body usually wins
        check_entropy_apply_and_flips(layout, base, target, frame, bodies.bodies, quick() ? 8 : 40, rng, what);
      }
    }
  }
  CHECK(class_bodies_seen > 0);
}

TEST_CASE("entropy on the GPU: chunks longer than 2^16 elements, in one tensor and across two, byte-identical, applied, mutations refused as the host does") {
  // Two chunks at 2^17 (131072 and 71932 elements) or one at 2^20: the warp decoder's bitmap covers 2^16 elements,
  // so apply_entropy_alone_kernel decodes these. The first chunk lies in one tensor, its exponents in a band and
  // its changes following them (a class body, placed by the whole warp); the second runs across two tensors (lane
  // 0 walks it), its bit patterns and changes uniform (every class: a rice body, decoded by lane 0 too).
  std::mt19937_64 rng(1717);
  const std::uint64_t n = 200003, n2 = 3001;
  model_layout layout({{"w", dtype::bf16, {n}}, {"v", dtype::bf16, {n2}}});
  host_model base(layout), target(layout);
  for (std::uint64_t k = 0; k < n + n2; ++k) {
    const std::size_t t = k < n ? 0 : 1;
    const std::uint64_t i = k < n ? k : k - n;
    const std::uint32_t e = static_cast<std::uint32_t>(rng() % 6);
    const std::uint32_t pattern = random_pattern(rng, 16);
    const auto bits = static_cast<std::uint16_t>(k < 131072 ? (pattern & 0x807Fu) | ((118u + e) << 7) : pattern);
    const bool change = k < 131072 ? rng() % 100 < (e < 2 ? 20u : 1u) : rng() % 100 < 3;
    base.set<std::uint16_t>(t, i, bits);
    target.set<std::uint16_t>(t, i, change ? static_cast<std::uint16_t>(bits ^ (1u + rng() % 3)) : bits);
  }
  const bucket_plan plan{dtype::bf16, {{0, 0, n}, {1, 0, n2}}};
  std::size_t tags[2] = {0, 0};
  for (auto mode : {value_mode::ulp, value_mode::absolute}) {
    for (unsigned L : {17u, 20u}) {
      const encode_case c{encoder_id::entropy, mode};
      const auto want = host_frame(base, target, plan, 0, c.enc, c.mode, L);
      device_model db(base), dt(target);
      sc::encode_plan p(layout, plan, sc::encode_config{c.enc, c.mode, L});
      p.encode(db.cptrs(), dt.cptrs());
      const auto frame = download_frame(p);
      expect_identical(want, frame, name_of(c, L));
      const auto bodies = entropy_bodies_of(frame, 2, false);
      REQUIRE(!bodies.bodies.empty());
      tags[0] += bodies.tags[0];
      tags[1] += bodies.tags[1];
      check_entropy_apply_and_flips(layout, base, target, frame, bodies.bodies, quick() ? 6 : 24, rng, name_of(c, L));
    }
  }
  INFO(tags[0] << " rice bodies, " << tags[1] << " class bodies");
  CHECK(tags[1] > 0);
  CHECK(tags[0] > 0);
}

TEST_CASE("an encoder without a device twin (encoder_table's gpu column): GPU encode and GPU apply refuse it") {
  if (std::all_of(encoder_table.begin(), encoder_table.end(), [](const encoder_row& r) { return r.gpu; })) {
    MESSAGE("skipped: every encoder has its device twin");
    return;
  }
  std::mt19937_64 rng(5);
  model_layout layout({{"w", dtype::bf16, {70000}}, {"b", dtype::bf16, {300}}});
  host_model base(layout), target(layout);
  fill_pair_any(dtype::bf16, base, target, rng, 0.02, false);
  for (const auto& row : encoder_table) {
    if (row.gpu) continue;
    INFO("encoder " << row.name);
    sc::encode_config cfg;
    cfg.encoder = row.id;
    const auto plans = fixed_bytes{1u << 20}.plan(layout, cfg.log2_chunk);
    CHECK_THROWS_AS(static_cast<void>(sc::encode_plan(layout, plans[0], cfg)), sc::cuda_error);  // cudaErrorInvalidValue: valid_config
    // Frames the host wrote with it: refused as unsupported, the weights left as they were.
    patch_options po;
    po.encode.mode = value_mode::ulp;
    std::vector<unsigned char> patch;
    visit_encoder(row.id, [&]<class E>(E) { patch = encode_patch<E>(layout, base.views(), target.views(), po); });
    patch_prologue pro;
    REQUIRE(parse_patch_prologue(patch, pro).ok());
    bucket_header h;
    REQUIRE(detail::read_bucket_header(std::span(patch).subspan(pro.bytes), h).ok());
    REQUIRE(h.encoder == row.id);
    device_bytes dpatch(patch);
    device_model dm(base);
    sc::apply_plan ap(layout);
    ap.apply(dpatch.p + pro.bytes, static_cast<std::size_t>(h.total_bytes()), dm.d_ptrs);
    const auto r = ap.result();
    CHECK(r.status.code() == errc::unsupported);
    CHECK_EQ(r.committed, 0u);
    host_model got(layout);
    dm.download(got);
    CHECK(got.bytes == base.bytes);
  }
}

TEST_CASE("GPU apply launches only the decoders of the encoder the frame's header names, and refuses a frame that names another") {
  std::mt19937_64 rng(77);
  model_layout layout({{"a", dtype::bf16, {30000}}, {"b", dtype::bf16, {4100}}});
  host_model base(layout), target(layout);
  fill_pair_any(dtype::bf16, base, target, rng, 0.02);
  const bucket_plan plan{dtype::bf16, {{0, 0, 30000}, {1, 0, 4100}}};
  for (const encoder_id enc : {encoder_id::delta_varint, encoder_id::rice, encoder_id::entropy, encoder_id::bitmap}) {
    device_model db(base), dt(target);
    sc::encode_config cfg{enc, value_mode::ulp, 12};
    sc::encode_plan p(layout, plan, cfg);
    p.encode(db.cptrs(), dt.cptrs());
    std::vector<unsigned char> head = download_frame(p);
    head.resize(bucket_header_bytes);
    REQUIRE(head[8] == static_cast<unsigned char>(enc));
    for (const encoder_id named : {encoder_id::delta_varint, encoder_id::rice, encoder_id::entropy, encoder_id::bitmap}) {
      INFO("frame of " << encoder_name(enc) << ", its header copy naming " << encoder_name(named));
      // The plan reads the encoder from the header copy it is given (as a device link's receive brings it): only
      // that encoder's kernels run. A copy that disagrees with the frame is refused on the device, weights untouched.
      std::vector<unsigned char> copy = head;
      copy[8] = static_cast<unsigned char>(named);
      device_model dm(base);
      sc::apply_plan ap(layout);
      ap.begin();
      ap.apply(p.frame(), p.frame_bytes(), dm.d_ptrs, copy);
      const auto r = ap.result();
      host_model got(layout);
      dm.download(got);
      if (named == enc) {
        CHECK(r.status.ok());
        CHECK(got.bytes == target.bytes);
      } else {
        CHECK(r.status.code() == errc::malformed);
        CHECK(got.bytes == base.bytes);
      }
    }
  }
}

TEST_CASE("GPU encode -> GPU apply round trip, and malformed frames are refused exactly when the host refuses") {
  std::mt19937_64 rng(2024);
  for (const dtype dtp : {dtype::bf16, dtype::f32, dtype::f8_e4m3}) {
  model_layout layout({{"a", dtp, {20000}}, {"b", dtp, {777}}, {"c", dtp, {33333}}});
  host_model base(layout), target(layout);
  fill_pair_any(dtp, base, target, rng, 0.03);
  const bucket_plan plan{dtp, {{0, 0, 20000}, {1, 0, 777}, {2, 0, 33333}}};
  const int mutations = quick() ? 12 : (dtp == dtype::bf16 ? 150 : 60);
  for (const auto& c : all_cases()) {
    for (unsigned L : {8u, 12u}) {
      device_model db(base), dt(target);
      sc::encode_config cfg{c.enc, c.mode, L};
      sc::encode_plan p(layout, plan, cfg);
      p.encode(db.cptrs(), dt.cptrs());
      const auto frame = download_frame(p);
      expect_identical(host_frame(base, target, plan, 0, c.enc, c.mode, L), frame, "round trip " + std::string(to_string(dtp)) + " " + name_of(c, L));
      sc::apply_plan ap(layout);
      {
        device_model dm(base);
        ap.begin();
        ap.apply(p.frame(), p.frame_bytes(), dm.d_ptrs);
        REQUIRE(ap.result().status.ok());
        host_model got(layout);
        dm.download(got);
        CHECK(got.bytes == target.bytes);
      }
      // Mutations: a byte anywhere (checksums left stale or recomputed), truncation, trailing garbage.
      device_model dm(base);
      for (int m = 0; m < mutations; ++m) {
        std::vector<unsigned char> f = frame;
        std::size_t pass = f.size();
        const int kind = m % 6;
        const std::size_t S = 3, C = detail::load_le<std::uint32_t>(f.data() + 32);
        const std::size_t data = 80 + 24 * S + 8 * C;
        std::size_t at = 0;
        if (kind == 0) at = rng() % f.size();                                             // anywhere, stale checksums
        if (kind == 1 || kind == 2) at = data + rng() % std::max<std::size_t>(1, f.size() - data);  // chunk data
        if (kind == 3) at = 80 + 24 * S + rng() % (8 * C);                                // chunk table
        if (kind == 4) at = rng() % (80 + 24 * S);                                        // header / segments
        if (kind <= 4 && at < f.size()) f[at] ^= static_cast<unsigned char>(1u << (rng() % 8));
        if (kind == 2 && at + 1 < f.size()) f[at + 1] = static_cast<unsigned char>(rng());
        if (kind >= 1 && kind <= 4) fix_checksums(f);
        if (kind == 5) {
          pass = rng() % f.size();  // truncated
          f.resize(pass);
        }
        const status host = host_verdict(base, f, false);
        const status gpu = gpu_apply_one(ap, dm, f, pass);
        INFO(to_string(dtp) << " " << name_of(c, L) << " mutation " << m << " kind " << kind << " at " << at << ": host '" << host.message() << "' (" <<
             static_cast<int>(host.code()) << "), gpu '" << gpu.message() << "' (" << static_cast<int>(gpu.code()) << ")");
        CHECK_EQ(host.ok(), gpu.ok());
        host_model got(layout);
        dm.download(got);
        if (!gpu.ok()) {
          CHECK(got.bytes == base.bytes);
        } else {  // a mutation the format cannot tell apart (host accepts it too): undo by re-uploading base
          for (std::size_t t = 0; t < layout.size(); ++t)
            REQUIRE(cudaMemcpy(dm.ptrs[t], base.bytes[t].data(), base.bytes[t].size(), cudaMemcpyHostToDevice) == cudaSuccess);
        }
      }
    }
  }
  }
}

TEST_CASE("GPU apply refuses hand-made bad frames: no-op change, bad tiling, wrong dtype, wrong index, overlong varint") {
  std::mt19937_64 rng(3);
  model_layout layout({{"a", dtype::bf16, {5000}}, {"b", dtype::f32, {100}}});
  host_model base(layout), target(layout);
  fill_pair<std::uint16_t>(base, target, rng, 0.02);
  const bucket_plan plan{dtype::bf16, {{0, 0, 5000}}};
  device_model dm(base);
  sc::apply_plan ap(layout);
  auto expect_refused = [&](std::vector<unsigned char> f, const char* what) {
    fix_checksums(f);
    const status host = host_verdict(base, f, false);
    const status gpu = gpu_apply_one(ap, dm, f, f.size());
    INFO(what << ": host '" << host.message() << "', gpu code " << static_cast<int>(gpu.code()));
    CHECK_FALSE(host.ok());
    CHECK_FALSE(gpu.ok());
    host_model got(layout);
    dm.download(got);
    CHECK(got.bytes == base.bytes);
  };
  const auto raw = host_frame(base, target, plan, 0, encoder_id::raw_index32, value_mode::absolute, 16);
  const std::size_t data = 80 + 24 + 8;
  {  // a change whose new value equals the old one
    auto f = raw;
    const auto pos = detail::load_le<std::uint32_t>(f.data() + data);
    const auto n = detail::load_le<std::uint32_t>(f.data() + 80 + 24);
    detail::store_le<std::uint16_t>(f.data() + data + 4 * n, base.get<std::uint16_t>(0, pos));
    expect_refused(f, "no-op change");
  }
  {  // a segment that does not start at tensor 0 offset 0
    auto f = raw;
    detail::store_le<std::uint64_t>(f.data() + 80 + 8, 1);
    expect_refused(f, "tiling");
  }
  {  // a segment of another dtype's tensor
    auto f = raw;
    detail::store_le<std::uint32_t>(f.data() + 80, 1);
    expect_refused(f, "dtype");
  }
  {  // bucket index 1 as the first bucket
    auto f = raw;
    detail::store_le<std::uint32_t>(f.data() + 4, 1);
    expect_refused(f, "index");
  }
  {  // a position past the chunk
    auto f = raw;
    detail::store_le<std::uint32_t>(f.data() + data, 5000);
    expect_refused(f, "position out of range");
  }
  {  // positions not increasing
    auto f = raw;
    const auto p1 = detail::load_le<std::uint32_t>(f.data() + data + 4);
    detail::store_le<std::uint32_t>(f.data() + data, p1);
    expect_refused(f, "positions not increasing");
  }
  {  // varint: a non-canonical (overlong) first gap, lengths adjusted so the structure still adds up
    auto v = host_frame(base, target, plan, 0, encoder_id::delta_varint, value_mode::ulp, 16);
    const std::size_t d = 80 + 24 + 8;
    std::vector<unsigned char> f(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(d));
    const unsigned char first = v[d];
    if (first < 0x80) {
      f.push_back(static_cast<unsigned char>(first | 0x80));
      f.push_back(0);
      f.insert(f.end(), v.begin() + static_cast<std::ptrdiff_t>(d) + 1, v.end());
      detail::store_le<std::uint32_t>(f.data() + 80 + 24 + 4, detail::load_le<std::uint32_t>(v.data() + 80 + 24 + 4) + 1);
      detail::store_le<std::uint64_t>(f.data() + 40, detail::load_le<std::uint64_t>(v.data() + 40) + 1);
      expect_refused(f, "overlong varint");
    }
  }
  {  // rice: trailing non-zero padding bits
    auto r = host_frame(base, target, plan, 0, encoder_id::rice, value_mode::ulp, 16);
    auto f = r;
    f.back() |= 0x80;
    if (f.back() != r.back()) expect_refused(f, "rice padding");
  }
  {  // the target checksum does not match
    auto f = raw;
    detail::store_le<std::uint64_t>(f.data() + 56, detail::load_le<std::uint64_t>(f.data() + 56) + 1);
    expect_refused(f, "target checksum");
  }
}

TEST_CASE("GPU apply refuses rice parameters the encoder would not pick, as the host does (regressions/chunk_decode/rice-suboptimal-k)") {
  // The fuzzer's chunk: 13 f32 elements, ulp mode, 2 changes. `00 01 fa 02` spells the same changes as the
  // encoder's `00 02 da 00` (same length), with k_val 1 where the encoder picks 2.
  const std::vector<unsigned char> canonical_data = {0x00, 0x02, 0xda, 0x00};
  const std::vector<unsigned char> suboptimal_data = {0x00, 0x01, 0xfa, 0x02};
  model_layout layout({{"a", dtype::f32, {13}}});
  host_model base(layout);
  std::mt19937_64 rng(14);
  for (std::uint64_t i = 0; i < 13; ++i) base.set<std::uint32_t>(0, i, random_pattern(rng, 32));
  // The target: the encoder's chunk applied to the base.
  chunk_context<std::uint32_t> ctx;
  ctx.numel = 13;
  ctx.changes = 2;
  ctx.mode = value_mode::ulp;
  std::vector<std::uint32_t> positions, values;
  REQUIRE(rice::decode<std::uint32_t>(canonical_data, ctx, positions, values).ok());
  host_model target = base;
  for (std::size_t j = 0; j < positions.size(); ++j)
    target.set<std::uint32_t>(0, positions[j], decode_value(value_mode::ulp, base.get<std::uint32_t>(0, positions[j]), values[j]));
  const bucket_plan plan{dtype::f32, {{0, 0, 13}}};
  const auto frame = host_frame(base, target, plan, 0, encoder_id::rice, value_mode::ulp, 16);
  const std::size_t data = 80 + 24 + 8;
  REQUIRE(frame.size() == data + canonical_data.size());
  REQUIRE(std::equal(canonical_data.begin(), canonical_data.end(), frame.begin() + data));
  sc::apply_plan ap(layout);
  {  // the encoder's frame applies
    device_model dm(base);
    const status gpu = gpu_apply_one(ap, dm, frame, frame.size());
    INFO("gpu '" << gpu.message() << "'");
    REQUIRE(gpu.ok());
    host_model got(layout);
    dm.download(got);
    CHECK(got.bytes == target.bytes);
  }
  auto f = frame;
  std::copy(suboptimal_data.begin(), suboptimal_data.end(), f.begin() + data);
  fix_checksums(f);
  device_model dm(base);
  const status host = host_verdict(base, f, false);
  const status gpu = gpu_apply_one(ap, dm, f, f.size());
  INFO("host '" << host.message() << "', gpu '" << gpu.message() << "' (" << static_cast<int>(gpu.code()) << ")");
  CHECK(host.code() == errc::non_canonical);
  CHECK(gpu.code() == errc::non_canonical);
  host_model got(layout);
  dm.download(got);
  CHECK(got.bytes == base.bytes);
}

TEST_CASE("several streams at once") {
  std::mt19937_64 rng(77);
  constexpr int streams = 4;
  model_layout layout({{"w", dtype::bf16, {300000}}});
  const bucket_plan plan{dtype::bf16, {{0, 0, 300000}}};
  std::vector<host_model> bases, targets;
  for (int i = 0; i < streams; ++i) {
    bases.emplace_back(layout);
    targets.emplace_back(layout);
    fill_pair<std::uint16_t>(bases.back(), targets.back(), rng, 0.01 * (i + 1));
  }
  std::vector<cudaStream_t> ss(streams);
  for (auto& s : ss) CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  {
    std::vector<std::unique_ptr<device_model>> db, dt, dm;
    std::vector<std::unique_ptr<sc::encode_plan>> eps;
    std::vector<std::unique_ptr<sc::apply_plan>> aps;
    const encode_case cases[streams] = {{encoder_id::raw_index32, value_mode::absolute},
                                        {encoder_id::bitmap, value_mode::ulp},
                                        {encoder_id::delta_varint, value_mode::ulp},
                                        {encoder_id::rice, value_mode::ulp}};
    for (int i = 0; i < streams; ++i) {
      db.push_back(std::make_unique<device_model>(bases[i]));
      dt.push_back(std::make_unique<device_model>(targets[i]));
      dm.push_back(std::make_unique<device_model>(bases[i]));
      sc::encode_config cfg{cases[i].enc, cases[i].mode, 14};
      cfg.max_changes = 300000;
      eps.push_back(std::make_unique<sc::encode_plan>(layout, plan, cfg, ss[i]));
      aps.push_back(std::make_unique<sc::apply_plan>(layout, sc::apply_config{}, ss[i]));
    }
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < streams; ++i) eps[i]->encode_async(db[i]->cptrs(), dt[i]->cptrs());
      for (int i = 0; i < streams; ++i) eps[i]->wait();
    }
    for (int i = 0; i < streams; ++i) {
      aps[i]->begin();
      aps[i]->apply(eps[i]->frame(), eps[i]->frame_bytes(), dm[i]->d_ptrs);
    }
    for (int i = 0; i < streams; ++i) {
      CHECK(aps[i]->result().status.ok());
      expect_identical(host_frame(bases[i], targets[i], plan, 0, cases[i].enc, cases[i].mode, 14), download_frame(*eps[i]),
                       "stream " + std::to_string(i));
      host_model got(layout);
      dm[i]->download(got);
      CHECK(got.bytes == targets[i].bytes);
    }
  }
  for (auto& s : ss) cudaStreamDestroy(s);
}

namespace {
std::string data_dir() {
  if (const char* d = std::getenv("SPARSESYNC_DATA_DIR")) return d;
  return std::string(SPARSESYNC_SHARED_DIR) + "/data/rl-gpt2-small-lr1e-6";
}

// The few manifest fields we need: tensor names and numel, in flat order.
bool read_manifest(const std::string& path, std::vector<tensor_info>& out) {
  std::ifstream in(path);
  if (!in) return false;
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t at = 0;
  while ((at = s.find("\"name\"", at)) != std::string::npos) {
    const std::size_t q1 = s.find('"', s.find(':', at) + 1);
    const std::size_t q2 = s.find('"', q1 + 1);
    const std::string name = s.substr(q1 + 1, q2 - q1 - 1);
    const std::size_t ne = s.find("\"numel\"", q2);
    if (ne == std::string::npos) return false;
    const std::uint64_t numel = std::stoull(s.substr(s.find(':', ne) + 1));
    out.push_back({name, dtype::bf16, {numel}});
    at = ne;
  }
  return !out.empty();
}
}  // namespace

TEST_CASE("real RL update stream: byte identity with the host and GPU apply of the whole chain") {
  const std::string dir = data_dir();
  std::vector<tensor_info> tensors;
  std::ifstream base_file(dir + "/base.bf16", std::ios::binary), patches(dir + "/patches.bin", std::ios::binary);
  if (!read_manifest(dir + "/manifest.json", tensors) || !base_file || !patches) {
    MESSAGE("real stream not found at " << dir << ": skipped");
    return;
  }
  model_layout layout(tensors);
  std::vector<std::uint16_t> flat(layout.numel());
  base_file.read(reinterpret_cast<char*>(flat.data()), static_cast<std::streamsize>(flat.size() * 2));
  REQUIRE(base_file.gcount() == static_cast<std::streamsize>(flat.size() * 2));
  auto to_model = [&](const std::vector<std::uint16_t>& f) {
    host_model m(layout);
    for (std::size_t t = 0; t < layout.size(); ++t)
      std::memcpy(m.bytes[t].data(), f.data() + layout.first_element(t), m.bytes[t].size());
    return m;
  };
  const auto plans = fixed_bytes{1u << 20}.plan(layout, 16);
  device_model dm(to_model(flat));
  sc::apply_plan ap(layout, sc::apply_config{true});
  std::uint64_t known = 0;
  {
    const auto b0 = to_model(flat);
    for (std::size_t t = 0; t < layout.size(); ++t)
      known += content_checksum(reinterpret_cast<const std::uint16_t*>(b0.bytes[t].data()), layout[t].numel(), layout.first_element(t));
  }
  const int steps = quick() ? 2 : 24;
  for (int step = 1; step <= steps; ++step) {
    std::uint32_t count = 0;
    patches.read(reinterpret_cast<char*>(&count), 4);
    std::vector<std::uint32_t> pos(count);
    std::vector<std::uint16_t> val(count);
    patches.read(reinterpret_cast<char*>(pos.data()), 4ll * count);
    patches.read(reinterpret_cast<char*>(val.data()), 2ll * count);
    REQUIRE(patches.good());
    std::vector<std::uint16_t> next = flat;
    for (std::uint32_t i = 0; i < count; ++i) next[pos[i]] = val[i];
    const auto base = to_model(flat), target = to_model(next);
    device_model db(base), dt(target);
    const encode_case c = step % 5 == 0 ? encode_case{encoder_id::raw_index32, value_mode::absolute}
                          : step % 5 == 1 ? encode_case{encoder_id::rice, value_mode::ulp}
                          : step % 5 == 2 ? encode_case{encoder_id::delta_varint, value_mode::ulp}
                          : step % 5 == 3 ? encode_case{encoder_id::bitmap, value_mode::absolute}
                                          : encode_case{encoder_id::entropy, value_mode::ulp};
    const bool check_all = step == 1 || step == steps;
    ap.begin();
    std::uint64_t payload = 0;
    for (std::size_t b = 0; b < plans.size(); ++b) {
      for (const auto& cc : all_cases()) {
        if (!check_all && (cc.enc != c.enc || cc.mode != c.mode)) continue;
        sc::encode_config cfg{cc.enc, cc.mode, 16, static_cast<std::uint32_t>(b)};
        sc::encode_plan p(layout, plans[b], cfg);
        p.encode(db.cptrs(), dt.cptrs());
        expect_identical(host_frame(base, target, plans[b], static_cast<std::uint32_t>(b), cc.enc, cc.mode, 16), download_frame(p),
                         "step " + std::to_string(step) + " bucket " + std::to_string(b) + " " + name_of(cc));
        if (cc.enc == c.enc && cc.mode == c.mode) {
          payload += p.frame_bytes();
          ap.verify(p.frame(), p.frame_bytes(), dm.d_ptrs);
          ap.commit(p.frame(), p.frame_bytes(), dm.d_ptrs);
          CUDA_OK(cudaStreamSynchronize(nullptr));  // the plan's frame is reused by the next encode
        }
      }
    }
    const auto r = ap.result();
    INFO("step " << step << ": " << r.status.message());
    REQUIRE(r.status.ok());
    CHECK_EQ(r.base_checksum, known);
    known = r.target_checksum;
    CHECK_EQ(r.changed, count);
    MESSAGE("step " << step << ": " << count << " changes, " << name_of(c) << " payload " << payload << " bytes ("
                    << 8.0 * static_cast<double>(payload) / std::max<std::uint32_t>(count, 1) << " bits/change)");
    flat = next;
  }
  host_model got(layout);
  dm.download(got);
  CHECK(got.bytes == to_model(flat).bytes);
}

TEST_CASE("a bucket past 2^31 elements (skipped without ~12 GB free)") {
  std::size_t free_b = 0, total_b = 0;
  CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  const std::uint64_t n = (std::uint64_t{1} << 31) + 3 * 65536 + 5;
  if (quick() || free_b < 3 * n * 2 + (2ull << 30)) {
    MESSAGE("skipped: quick mode or not enough device memory");
    return;
  }
  model_layout layout({{"small", dtype::bf16, {1000}}, {"huge", dtype::bf16, {n}}});
  host_model base(layout), target(layout);
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    s += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (std::size_t t = 0; t < 2; ++t) {
    auto* b = reinterpret_cast<std::uint16_t*>(base.bytes[t].data());
    auto* g = reinterpret_cast<std::uint16_t*>(target.bytes[t].data());
    const std::uint64_t m = layout[t].numel();
    for (std::uint64_t i = 0; i < m; i += 4) {
      const std::uint64_t r = next();
      for (std::uint64_t k = 0; k < 4 && i + k < m; ++k) {
        b[i + k] = static_cast<std::uint16_t>(0x3C00 + ((r >> (16 * k)) & 0x3FF));
        g[i + k] = b[i + k];
      }
      if ((r >> 60) == 0 && (r & 0x3FF) < 64) g[i] = static_cast<std::uint16_t>(b[i] + 1);  // ~0.4% / 4 of elements
    }
    for (std::uint64_t i : {std::uint64_t{0}, m - 1, std::uint64_t{1} << 31, (std::uint64_t{1} << 31) - 1, (std::uint64_t{1} << 31) + 1})
      if (i < m) g[i] = static_cast<std::uint16_t>(b[i] ^ 0x8000);
  }
  const bucket_plan plan{dtype::bf16, {{0, 0, 1000}, {1, 0, n}}};
  const auto want = host_frame(base, target, plan, 0, encoder_id::delta_varint, value_mode::ulp, 16);
  {
    device_model db(base), dt(target);
    sc::encode_plan p(layout, plan, sc::encode_config{encoder_id::delta_varint, value_mode::ulp, 16});
    p.encode(db.cptrs(), dt.cptrs());
    expect_identical(want, download_frame(p), "2^31+ elements");
    sc::apply_plan ap(layout);
    ap.apply(p.frame(), p.frame_bytes(), db.d_ptrs);
    REQUIRE(ap.result().status.ok());
    host_model got(layout);
    db.download(got);
    CHECK(got.bytes == target.bytes);
  }
}
