// What any sparse version with an atomic commit must pay on this card, pass by pass, measured with the simplest
// kernels that do each pass's memory traffic and nothing else (no decoding, no checksums, no framing): the floor
// under engine_nccl_bench's version time. One GPU, the 7B layout's element count as one flat BF16 array, an
// RL-like step (bench_support.cuh: ~1% of the elements move by one or two ULPs, uniformly placed).
//
//   memcpy           one copy of the model, device to device (the card's copy rate: read + write)
//   read both        read the weights and the snapshot once, count the differences (the encoder's detect floor)
//   read + advance   the same, and write the changed 16-byte vectors (paired to whole 32-byte sectors) into the
//                    snapshot in the same pass (a simple kernel: the engine's detect pass, which stages its tile
//                    first, does better, so this is a reference, not a floor)
//   scatter 2 B      the changes (positions and values already decoded, sorted) written in place, a thread per
//                    change, one 2-byte store each: the atomic commit's pass (each store a read-modify-write of
//                    its 32-byte sector in the memory system)
//   scatter sector   the same, a thread per touched 32-byte sector: read it, merge its changes, write it whole
//   write prepared   whole new 32-byte sectors, prepared earlier (e.g. by a verify pass that reads those sectors
//                    anyway, at the cost of 32 bytes of staging per touched sector), only written: the least
//                    traffic a commit after the last verify can have
//
// An atomic commit cannot write before the whole version is verified, so after the trainer's encode of the last
// bucket comes at least one commit pass over every change of the version: an atomic version takes at least
// read both + the fastest of the three commit passes, before any advance, decode, checksum, transfer or verify. The dense NCCL broadcast of the same model is engine_nccl_bench's baseline (two GPUs): run both in one
// call on one machine to compare.
#include "bench_support.cuh"

#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <cstdlib>
#include <cstring>

namespace bench_gpu {
namespace {

template <int = 0>
__global__ void read_both_kernel(const uint4* a, const uint4* b, std::uint64_t vecs, unsigned long long* count) {
  unsigned long long c = 0;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < vecs; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const uint4 x = __ldcs(a + i), y = __ldcs(b + i);
    c += (x.x != y.x) + (x.y != y.y) + (x.z != y.z) + (x.w != y.w);
  }
  for (int o = 16; o > 0; o /= 2) c += __shfl_down_sync(0xFFFFFFFFu, c, o);
  if ((threadIdx.x & 31u) == 0 && c) atomicAdd(count, c);
}

// Thread i reads vector i of both copies; where the pair of vectors that makes its 32-byte sector differs
// anywhere, it writes its target vector over the snapshot's (whole sectors written, none read back).
template <int = 0>
__global__ void read_advance_kernel(const uint4* target, uint4* snap, std::uint64_t vecs) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < vecs; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const uint4 x = __ldcs(target + i), y = __ldcs(snap + i);
    const bool here = x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w;
    const bool sector = __shfl_xor_sync(0xFFFFFFFFu, here, 1) || here;  // (vecs is even: every lane has a partner)
    if (sector) snap[i] = x;
  }
}

struct differs {
  const std::uint16_t* a;
  const std::uint16_t* b;
  __device__ bool operator()(std::int64_t i) const { return a[i] != b[i]; }
};

template <int = 0>
__global__ void gather_kernel(const std::int64_t* pos, const unsigned long long* n, const std::uint16_t* src, std::uint16_t* val) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < *n; i += std::uint64_t{gridDim.x} * blockDim.x)
    val[i] = src[pos[i]];
}

template <int = 0>
__global__ void scatter_2b_kernel(const std::int64_t* pos, const std::uint16_t* val, std::uint64_t n, std::uint16_t* w) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    w[pos[i]] = val[i];
}

// The first change of each touched sector reads the sector, merges every change that falls in it, writes it.
template <int = 0>
__global__ void scatter_sector_kernel(const std::int64_t* pos, const std::uint16_t* val, std::uint64_t n, std::uint16_t* w) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::int64_t sector = pos[i] >> 4;
    if (i > 0 && (pos[i - 1] >> 4) == sector) continue;
    uint4* s = reinterpret_cast<uint4*>(w + (sector << 4));
    uint4 v[2] = {s[0], s[1]};
    auto* e = reinterpret_cast<std::uint16_t*>(v);
    for (std::uint64_t j = i; j < n && (pos[j] >> 4) == sector; ++j) e[pos[j] & 15] = val[j];
    s[0] = v[0];
    s[1] = v[1];
  }
}

template <int = 0>
__global__ void first_of_sector_kernel(const std::int64_t* pos, std::uint64_t n, std::uint32_t* flag) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    flag[i] = i == 0 || (pos[i - 1] >> 4) != (pos[i] >> 4);
}

// Sector images from the target (a touched sector's new contents are the target's), at their compacted slots.
template <int = 0>
__global__ void prepare_sectors_kernel(const std::int64_t* pos, const std::uint32_t* flag, const std::uint32_t* slot, std::uint64_t n,
                                       const std::uint16_t* target, std::int64_t* spos, uint4* image) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) {
    if (!flag[i]) continue;
    const std::int64_t sector = pos[i] >> 4;
    const uint4* src = reinterpret_cast<const uint4*>(target + (sector << 4));
    spos[slot[i]] = sector;
    image[2 * std::uint64_t{slot[i]}] = src[0];
    image[2 * std::uint64_t{slot[i]} + 1] = src[1];
  }
}

template <int = 0>
__global__ void write_prepared_kernel(const std::int64_t* spos, const uint4* image, std::uint64_t sectors, std::uint16_t* w) {
  for (std::uint64_t j = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < sectors; j += std::uint64_t{gridDim.x} * blockDim.x) {
    uint4* s = reinterpret_cast<uint4*>(w + (spos[j] << 4));
    const uint4 a = __ldcs(image + 2 * j), b = __ldcs(image + 2 * j + 1);
    s[0] = a;
    s[1] = b;
  }
}

struct args {
  std::uint64_t numel = 0;  // 0: the 7B layout's
  double density = 0.01;
  int reps = 5;
  std::string json;
};

args parse(int argc, char** argv) {
  args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool more = i + 1 < argc;
    if (s == "--numel" && more) a.numel = static_cast<std::uint64_t>(std::atof(argv[++i]));
    else if (s == "--density" && more) a.density = std::atof(argv[++i]);
    else if (s == "--reps" && more) a.reps = std::atoi(argv[++i]);
    else if (s == "--json" && more) a.json = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: atomic_floor_bench [--numel N (default: the 7B layout's)] [--density 0.01] [--reps 5] [--json FILE]\n");
      std::exit(s == "--help" ? 0 : 2);
    }
  }
  return a;
}

struct timer {
  cudaEvent_t a{}, b{};
  timer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  ~timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  template <class F>
  double ms(F&& f) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaGetLastError());
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b));
    return t;
  }
};

int run(int argc, char** argv) {
  const args a = parse(argc, argv);
  const std::uint64_t n = ((a.numel ? a.numel : qwen7b_layout(28).numel()) + 255) & ~std::uint64_t{255};  // whole warps of 16-byte vectors
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_card = prop.name;
  if (!a.json.empty()) g_json = std::fopen(a.json.c_str(), "a");
  int grid = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&grid, read_both_kernel<>, 256, 0));
  grid *= prop.multiProcessorCount;

  std::uint16_t *target = nullptr, *snap = nullptr, *pristine = nullptr, *val = nullptr;
  std::int64_t* pos = nullptr;
  unsigned long long* d_count = nullptr;
  CK(cudaMalloc(&target, n * 2));
  CK(cudaMalloc(&snap, n * 2));
  CK(cudaMalloc(&pristine, n * 2));
  CK(cudaMalloc(&d_count, 8));
  fill_kernel<<<grid, 256>>>(pristine, n, 0x5EED);
  CK(cudaMemcpy(target, pristine, n * 2, cudaMemcpyDeviceToDevice));
  const auto threshold = static_cast<std::uint64_t>(a.density * static_cast<double>(std::uint64_t{1} << 53));
  step_kernel<<<grid, 256>>>(target, n, 1, threshold);
  CK(cudaDeviceSynchronize());

  // The changes, decoded and sorted, as a commit has them staged (positions and new values).
  const std::uint64_t cap = static_cast<std::uint64_t>(static_cast<double>(n) * a.density * 1.1) + 1024;
  CK(cudaMalloc(&pos, cap * 8));
  CK(cudaMalloc(&val, cap * 2));
  {
    std::size_t tb = 0;
    void* tmp = nullptr;
    const thrust::counting_iterator<std::int64_t> in(0);
    const differs pred{target, pristine};
    CK(cub::DeviceSelect::If(nullptr, tb, in, pos, d_count, static_cast<std::int64_t>(n), pred));
    CK(cudaMalloc(&tmp, tb));
    CK(cub::DeviceSelect::If(tmp, tb, in, pos, d_count, static_cast<std::int64_t>(n), pred));
    CK(cudaFree(tmp));
  }
  unsigned long long changes = 0;
  CK(cudaMemcpy(&changes, d_count, 8, cudaMemcpyDeviceToHost));
  if (changes > cap) throw std::runtime_error("atomic_floor_bench: more changes than expected");
  gather_kernel<<<grid, 256>>>(pos, d_count, target, val);
  CK(cudaDeviceSynchronize());

  // Touched sectors, prepared as whole new images (what a verify pass could leave for the commit).
  std::uint32_t *flag = nullptr, *slot = nullptr;
  std::int64_t* spos = nullptr;
  uint4* image = nullptr;
  std::uint64_t sectors = 0;
  {
    CK(cudaMalloc(&flag, changes * 4));
    CK(cudaMalloc(&slot, changes * 4));
    first_of_sector_kernel<<<grid, 256>>>(pos, changes, flag);
    std::size_t tb = 0;
    void* tmp = nullptr;
    CK(cub::DeviceScan::ExclusiveSum(nullptr, tb, flag, slot, static_cast<std::int64_t>(changes)));
    CK(cudaMalloc(&tmp, tb));
    CK(cub::DeviceScan::ExclusiveSum(tmp, tb, flag, slot, static_cast<std::int64_t>(changes)));
    CK(cudaFree(tmp));
    std::uint32_t last_slot = 0, last_flag = 0;
    CK(cudaMemcpy(&last_slot, slot + changes - 1, 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&last_flag, flag + changes - 1, 4, cudaMemcpyDeviceToHost));
    sectors = std::uint64_t{last_slot} + last_flag;
    CK(cudaMalloc(&spos, sectors * 8));
    CK(cudaMalloc(&image, sectors * 32));
    prepare_sectors_kernel<<<grid, 256>>>(pos, flag, slot, changes, target, spos, image);
    CK(cudaDeviceSynchronize());
    cudaFree(flag);
    cudaFree(slot);
  }

  const std::uint64_t vecs = n / 8;
  timer t;
  std::vector<double> t_copy, t_read, t_adv, t_s2, t_ss, t_wp;
  bool checked = false;
  for (int r = 0; r < a.reps + 1; ++r) {  // rep 0 warms up
    const auto keep = [&](std::vector<double>& v, double ms) {
      if (r > 0) v.push_back(ms);
    };
    keep(t_copy, t.ms([&] { CK(cudaMemcpyAsync(snap, pristine, n * 2, cudaMemcpyDeviceToDevice)); }));
    CK(cudaMemset(d_count, 0, 8));
    keep(t_read, t.ms([&] { read_both_kernel<<<grid, 256>>>(reinterpret_cast<const uint4*>(target), reinterpret_cast<const uint4*>(snap), vecs, d_count); }));
    keep(t_adv, t.ms([&] { read_advance_kernel<<<grid, 256>>>(reinterpret_cast<const uint4*>(target), reinterpret_cast<uint4*>(snap), vecs); }));
    if (r == 1 && count_differences(snap, target, n) != 0) throw std::runtime_error("atomic_floor_bench: read + advance left differences");
    CK(cudaMemcpy(snap, pristine, n * 2, cudaMemcpyDeviceToDevice));
    keep(t_s2, t.ms([&] { scatter_2b_kernel<<<grid, 256>>>(pos, val, changes, snap); }));
    if (r == 1 && count_differences(snap, target, n) != 0) throw std::runtime_error("atomic_floor_bench: scatter 2 B left differences");
    CK(cudaMemcpy(snap, pristine, n * 2, cudaMemcpyDeviceToDevice));
    keep(t_ss, t.ms([&] { scatter_sector_kernel<<<grid, 256>>>(pos, val, changes, snap); }));
    if (r == 1) {
      if (count_differences(snap, target, n) != 0) throw std::runtime_error("atomic_floor_bench: scatter sector left differences");
      checked = true;
    }
    CK(cudaMemcpy(snap, pristine, n * 2, cudaMemcpyDeviceToDevice));
    keep(t_wp, t.ms([&] { write_prepared_kernel<<<grid, 256>>>(spos, image, sectors, snap); }));
    if (r == 1 && count_differences(snap, target, n) != 0) throw std::runtime_error("atomic_floor_bench: write prepared left differences");
  }
  const double copy = median(t_copy), read = median(t_read), adv = median(t_adv), s2 = median(t_s2), ss = median(t_ss), wp = median(t_wp);
  const double scatter = std::min({s2, ss, wp});
  const double gb = static_cast<double>(n) * 2 / 1e9;
  char line[1024];
  std::snprintf(line, sizeof line,
                "\"row\":\"atomic_floor\",\"numel\":%llu,\"changes\":%llu,\"density\":%.5f,\"reps\":%d,\"memcpy_ms\":%.3f,\"memcpy_tbs\":%.3f,"
                "\"read_both_ms\":%.3f,\"read_both_tbs\":%.3f,\"read_advance_ms\":%.3f,\"scatter_2b_ms\":%.3f,\"scatter_sector_ms\":%.3f,"
                "\"scatter_2b_gchanges_s\":%.2f,\"scatter_sector_gchanges_s\":%.2f,\"sectors\":%llu,\"write_prepared_ms\":%.3f,"
                "\"read_both_plus_fastest_commit_ms\":%.3f,\"read_advance_plus_fastest_commit_ms\":%.3f,"
                "\"checked_bit_identical\":%s",
                static_cast<unsigned long long>(n), changes, static_cast<double>(changes) / static_cast<double>(n), a.reps, copy,
                2 * gb / copy, read, 2 * gb / read, adv, s2, ss, static_cast<double>(changes) / s2 / 1e6,
                static_cast<double>(changes) / ss / 1e6, static_cast<unsigned long long>(sectors), wp, read + scatter, adv + scatter,
                checked ? "true" : "false");
  emit(line);
  std::printf("\n%s, %.3g BF16 elements (%.1f GB), %llu changes (%.2f%%), medians of %d:\n", g_card.c_str(), static_cast<double>(n), gb, changes,
              100.0 * static_cast<double>(changes) / static_cast<double>(n), a.reps);
  std::printf("  memcpy %.3f ms (%.2f TB/s) | read both %.3f ms (%.2f TB/s) | read + advance %.3f ms\n", copy, 2 * gb / copy, read, 2 * gb / read, adv);
  std::printf("  scatter: 2-byte stores %.3f ms, whole sectors read and written %.3f ms, %llu prepared sectors written %.3f ms\n", s2, ss,
              static_cast<unsigned long long>(sectors), wp);
  std::printf("  an atomic version takes at least read both + the fastest commit pass: %.3f ms (with the simple advance: %.3f ms)\n",
              read + scatter, adv + scatter);
  if (g_json) std::fclose(g_json);
  cudaFree(target);
  cudaFree(snap);
  cudaFree(pristine);
  cudaFree(pos);
  cudaFree(val);
  cudaFree(spos);
  cudaFree(image);
  cudaFree(d_count);
  return 0;
}

}  // namespace
}  // namespace bench_gpu

int main(int argc, char** argv) {
  try {
    return bench_gpu::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "atomic_floor_bench: %s\n", e.what());
    return 1;
  }
}
