// Asynchronous global-to-shared copies (cp.async, sm_80 and later): a thread's copies land in shared memory
// without passing through its registers, so loads for later work can be in flight while the thread computes.
// Before sm_80 each copy is an ordinary load and store (complete at once; the waits are then no-ops).
// A thread may read what it copied after its own wait; other threads only after a barrier that follows it.
#pragma once

#include <sparsesync/cuda/types.cuh>

#include <cstdint>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

// 16 bytes from global `src` (16-byte aligned) to shared `dst`, cached in L2 only (the weights are streamed).
SPARSESYNC_DEVICE void cp_async16(uint4* dst, const uint4* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
#else
  *dst = *src;
#endif
}

// 8 bytes from global `src` (8-byte aligned) to shared `dst`, cached in L1 too (small reads near each other).
SPARSESYNC_DEVICE void cp_async8_ca(std::uint64_t* dst, const std::uint64_t* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d), "l"(src) : "memory");
#else
  *dst = *src;
#endif
}

// Closes the thread's copies issued since the last commit into one group (possibly empty).
SPARSESYNC_DEVICE void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `Pending` of the thread's committed groups are still in flight.
template <int Pending>
SPARSESYNC_DEVICE void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

// Waits for all of the thread's copies, committed or not.
SPARSESYNC_DEVICE void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
