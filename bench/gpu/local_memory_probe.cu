// How much GPU memory the driver sets aside for the local memory (per-thread stack) of the apply's decode kernels:
// each kernel's declared local size per thread (cudaFuncGetAttributes) and the drop in free device memory
// (cudaMemGetInfo) around its first launch. Each launch is one block that returns at once (its bucket is marked
// unparsed), so what changes is only what the driver reserves for the kernel's declared stack, for every thread the
// GPU can hold, and keeps while the context lives. Kernels go from the smallest declared size to the largest: each
// row's drop is what that kernel added to the ones before.
// Build: the bench build (target local_memory_probe).
// Run:   ./local_memory_probe   (one JSON object per line)
#include <sparsesync/cuda/apply.cuh>
#include <sparsesync/cuda/cuda_error.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#define CHECK(x) ::sparsesync::cuda::throw_on_cuda_error((x), #x)

namespace sc = sparsesync::cuda;
namespace sd = sparsesync::cuda::detail;

namespace {

std::size_t free_bytes() {
  std::size_t f = 0, t = 0;
  CHECK(cudaMemGetInfo(&f, &t));
  return f;
}

template <class K>
void probe(const char* name, K kernel, int threads, const sd::apply_params& p, std::size_t start_free) {
  cudaFuncAttributes a{};
  CHECK(cudaFuncGetAttributes(&a, kernel));
  const std::size_t before = free_bytes();
  kernel<<<1, threads>>>(p);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  const std::size_t after = free_bytes();
  std::printf("{\"kernel\": \"%s\", \"local_bytes_per_thread\": %zu, \"registers\": %d, \"free_drop_mb\": %.1f, \"free_drop_since_start_mb\": %.1f}\n",
              name, static_cast<std::size_t>(a.localSizeBytes), a.numRegs, (static_cast<double>(before) - static_cast<double>(after)) / 1e6,
              (static_cast<double>(start_free) - static_cast<double>(after)) / 1e6);
}

}  // namespace

int main() try {
  using P = sc::default_policy;
  CHECK(cudaFree(nullptr));  // the context first, so that its own memory is not counted
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::size_t stack_limit = 0;
  CHECK(cudaDeviceGetLimit(&stack_limit, cudaLimitStackSize));
  sd::bucket_info* info = nullptr;
  CHECK(cudaMalloc(&info, sizeof(sd::bucket_info)));
  sd::bucket_info h{};
  h.status = 1;  // unparsed: every decode kernel returns at once
  CHECK(cudaMemcpy(info, &h, sizeof h, cudaMemcpyHostToDevice));
  sd::apply_params p{};
  p.info = info;
  std::printf("{\"device\": \"%s\", \"sms\": %d, \"max_threads_per_sm\": %d, \"stack_limit_bytes\": %zu}\n", prop.name,
              prop.multiProcessorCount, prop.maxThreadsPerMultiProcessor, stack_limit);
  const std::size_t start = free_bytes();
  probe("apply_rice_kernel", sd::apply_rice_kernel<P>, sd::decode_threads, p, start);
  probe("apply_entropy_values_kernel", sd::apply_entropy_values_kernel<P>, sd::decode_threads, p, start);
  probe("apply_entropy_place_kernel", sd::apply_entropy_place_kernel<P>, sd::entropy_warp_threads, p, start);
  probe("apply_entropy_warp_kernel", sd::apply_entropy_warp_kernel<P>, sd::entropy_warp_threads, p, start);
  probe("apply_entropy_parse_kernel", sd::apply_entropy_parse_kernel<P>, sd::decode_threads, p, start);
  probe("apply_entropy_alone_kernel", sd::apply_entropy_alone_kernel<P>, 1, p, start);
  probe("apply_entropy_check_kernel", sd::apply_entropy_check_kernel<P>, 32 * sd::entropy_check_warps, p, start);
  CHECK(cudaFree(info));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "local_memory_probe: %s\n", e.what());
  return 1;
}
