// A timeline of what ran on the GPUs (kernels, copies, memsets: start, end, device, stream), recorded by CUPTI's
// activity API, for benches on machines without Nsight Systems. Records go to a JSON-lines file as CUPTI hands
// its buffers back; `mark` adds host-side events on the same clock (cuptiGetTimestamp), e.g. the start and end
// of each version. bench/gpu/trace_summary.py reads the file. Kernel tracing keeps kernels concurrent
// (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) and costs a few microseconds per launch. A bench built without CUPTI
// (SPARSESYNC_BENCH_CUPTI unset: bench/gpu/CMakeLists.txt links it where the toolkit has it) gets a kernel_trace
// that refuses to start.
#pragma once

#include <stdexcept>
#include <string>

#if !SPARSESYNC_BENCH_CUPTI
namespace bench_gpu {
struct kernel_trace {
  explicit kernel_trace(const std::string&) { throw std::runtime_error("--trace: this build has no CUPTI (CUDA::cupti)"); }
  void mark(const std::string&) {}
};
}  // namespace bench_gpu
#else
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

namespace bench_gpu {

class kernel_trace {
 public:
  explicit kernel_trace(const std::string& path) {
    file() = std::fopen(path.c_str(), "w");
    if (!file()) throw std::runtime_error("kernel_trace: cannot write " + path);
    check(cuptiActivityRegisterCallbacks(&kernel_trace::buffer_requested, &kernel_trace::buffer_completed), "register callbacks");
    for (const auto kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET})
      check(cuptiActivityEnable(kind), "enable an activity kind");
  }
  kernel_trace(const kernel_trace&) = delete;
  kernel_trace& operator=(const kernel_trace&) = delete;
  ~kernel_trace() {
    cuptiActivityFlushAll(1);
    for (const auto kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET})
      cuptiActivityDisable(kind);
    std::lock_guard g(mutex());
    std::fclose(file());
    file() = nullptr;
  }

  // A host-side event on the records' clock.
  void mark(const std::string& what) {
    std::uint64_t t = 0;
    check(cuptiGetTimestamp(&t), "timestamp");
    std::lock_guard g(mutex());
    std::fprintf(file(), "{\"k\":\"mark\",\"what\":\"%s\",\"t\":%llu}\n", what.c_str(), static_cast<unsigned long long>(t));
  }

  // Hands every completed buffer to the file (call before reading it while the trace is on).
  void flush() { cuptiActivityFlushAll(1); }

 private:
  static void check(CUptiResult r, const char* what) {
    if (r != CUPTI_SUCCESS) {
      const char* s = nullptr;
      cuptiGetResultString(r, &s);
      throw std::runtime_error(std::string("kernel_trace: ") + what + ": " + (s ? s : "CUPTI error"));
    }
  }
  static std::FILE*& file() {
    static std::FILE* f = nullptr;
    return f;
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    constexpr std::size_t bytes = 8u << 20;
    *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, bytes));
    *size = *buffer ? bytes : 0;
    *max_records = 0;
  }
  static void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
    std::lock_guard g(mutex());
    CUpti_Activity* rec = nullptr;
    while (file() && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        std::fprintf(file(), "{\"k\":\"kernel\",\"name\":\"%s\",\"dev\":%u,\"stream\":%u,\"start\":%llu,\"end\":%llu,\"grid\":%d,\"block\":%d}\n",
                     k->name ? k->name : "?", k->deviceId, k->streamId, static_cast<unsigned long long>(k->start),
                     static_cast<unsigned long long>(k->end), k->gridX * k->gridY * k->gridZ, k->blockX * k->blockY * k->blockZ);
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        std::fprintf(file(), "{\"k\":\"memcpy\",\"copy\":%u,\"bytes\":%llu,\"dev\":%u,\"stream\":%u,\"start\":%llu,\"end\":%llu}\n",
                     static_cast<unsigned>(m->copyKind), static_cast<unsigned long long>(m->bytes), m->deviceId, m->streamId,
                     static_cast<unsigned long long>(m->start), static_cast<unsigned long long>(m->end));
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        std::fprintf(file(), "{\"k\":\"memset\",\"bytes\":%llu,\"dev\":%u,\"stream\":%u,\"start\":%llu,\"end\":%llu}\n",
                     static_cast<unsigned long long>(m->bytes), m->deviceId, m->streamId, static_cast<unsigned long long>(m->start),
                     static_cast<unsigned long long>(m->end));
      }
    }
    std::free(buffer);
  }
};

}  // namespace bench_gpu
#endif  // SPARSESYNC_BENCH_CUPTI
