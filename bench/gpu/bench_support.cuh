// What the GPU engine benchmarks share: a synthetic 7B-shaped model on the GPU and RL-like steps of it (elements
// and changes from a stateless hash of (index, step), so every run and every GPU sees the same stream), a
// bit-for-bit comparison of two models, and the JSON-lines output (one object per row, with the card's name).
#pragma once

#include <sparsesync/core/layout.hpp>
#include <sparsesync/cuda/cuda_error.hpp>
#include <sparsesync/gen/layouts.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace bench_gpu {

using namespace sparsesync;
namespace sc = sparsesync::cuda;

#define CK(x) ::sparsesync::cuda::throw_on_cuda_error((x), #x)

// Splitmix64: a stateless hash, so that every element's value and every step's changes come from (index, step).
__device__ __forceinline__ std::uint64_t mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Initial weights: BF16 of magnitude ~0.002 to 0.03, random sign (the exponent range of trained LLM weights).
// Element k of `w` is element `first + k` of the flattened model (a shard of it: engine_sharded_bench.cu).
template <int = 0>
__global__ void fill_kernel(std::uint16_t* w, std::uint64_t n, std::uint64_t seed, std::uint64_t first = 0) {
  for (std::uint64_t k = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < n; k += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t h = mix((k + first) ^ seed);
    const std::uint16_t exp = static_cast<std::uint16_t>(118 + (h >> 60) % 6);  // 2^-9 .. 2^-4
    w[k] = static_cast<std::uint16_t>(((h >> 32) & 0x8000u) | (exp << 7) | (h & 0x7Fu));
  }
}

// An RL-like step: each element moves by one or two ULPs with probability `density`, else keeps its bits.
template <int = 0>
__global__ void step_kernel(std::uint16_t* w, std::uint64_t n, std::uint64_t step, std::uint64_t threshold, std::uint64_t first = 0) {
  for (std::uint64_t k = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < n; k += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t h = mix((k + first) * 0x100000001B3ull ^ (step << 48) ^ 0xA5A5);
    if ((h >> 11) < threshold) {
      const bool up = h & 1;
      const std::uint16_t d = static_cast<std::uint16_t>(1 + ((h >> 1) & 1));
      w[k] = static_cast<std::uint16_t>(up ? w[k] + d : w[k] - d);
    }
  }
}

template <int = 0>
__global__ void differ_kernel(const std::uint16_t* a, const std::uint16_t* b, std::uint64_t n, unsigned long long* count) {
  unsigned long long c = 0;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) c += a[i] != b[i];
  atomicAdd(count, c);
}

inline double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct gpu_model {
  std::uint16_t* data = nullptr;
  std::uint64_t n = 0;
  std::vector<tensor_view> views;
  gpu_model(const model_layout& layout) : n(layout.numel()) {
    CK(cudaMalloc(&data, n * 2));
    for (std::size_t t = 0; t < layout.size(); ++t) views.push_back({data + layout.first_element(t), layout[t].numel(), layout[t].dtype});
  }
  ~gpu_model() { cudaFree(data); }
  std::vector<const_tensor_view> const_views() const { return {views.begin(), views.end()}; }
};

inline std::uint64_t count_differences(const std::uint16_t* a, const std::uint16_t* b, std::uint64_t n) {
  unsigned long long* d = nullptr;
  CK(cudaMalloc(&d, 8));
  CK(cudaMemset(d, 0, 8));
  differ_kernel<<<1024, 256>>>(a, b, n, d);
  unsigned long long h = 0;
  CK(cudaMemcpy(&h, d, 8, cudaMemcpyDeviceToHost));
  cudaFree(d);
  return h;
}

inline std::uint64_t count_differences(const gpu_model& a, const gpu_model& b) { return count_differences(a.data, b.data, a.n); }

inline std::FILE* g_json = nullptr;
inline std::string g_card;

inline void emit(const char* fmt_fields) {
  std::printf("%s\n", fmt_fields);
  if (g_json) std::fprintf(g_json, "{\"card\":\"%s\",%s}\n", g_card.c_str(), fmt_fields);
}

// Qwen2.5-7B's layout (hidden 3584, vocab 152064, GQA 512, MLP 18944, q/k/v biases, untied), `layers` deep.
inline model_layout qwen7b_layout(std::uint64_t layers) {
  gen::gpt_like_options go;
  go.style = gen::layout_style::llama;
  go.mlp_hidden = 18944;
  go.kv_hidden = 512;
  go.tie_embeddings = false;
  go.qkv_bias = true;
  return gen::make_gpt_like_layout(3584, layers, 152064, go);
}

}  // namespace bench_gpu
