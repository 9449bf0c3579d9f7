// Types shared by the CUDA encode and apply paths: device views of buckets and model layouts, temporary
// storage carving, small device helpers.
#pragma once

#include <sparsesync/bucketing/bucket_plan.hpp>
#include <sparsesync/core/dtype.hpp>
#include <sparsesync/core/layout.hpp>
#include <sparsesync/cuda/config.cuh>

#include <cstddef>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace cuda {

// One segment of a bucket as the kernels see it (40 bytes, device memory): elements
// [tensor_offset, tensor_offset + count) of layout tensor `tensor`, which are bucket elements
// [bucket_first, bucket_first + count) and flat model elements [flat_first, flat_first + count).
struct device_segment {
  std::uint32_t tensor = 0;
  std::uint32_t reserved = 0;
  std::uint64_t tensor_offset = 0;
  std::uint64_t count = 0;
  std::uint64_t bucket_first = 0;
  std::uint64_t flat_first = 0;
};
static_assert(sizeof(device_segment) == 40);

// A bucket on the device: its dtype and segments. Tensor data is passed separately, per call, as a device
// array of device pointers indexed by layout tensor index, so weights may be scattered in memory and the
// same bucket description serves every step.
struct device_bucket {
  sparsesync::dtype dtype = dtype::bf16;
  const device_segment* segments = nullptr;  // device memory, `segment_count` entries
  std::uint32_t segment_count = 0;
  std::uint64_t numel = 0;
};

// Host helper: the device_segment list of a bucket plan (upload it with cudaMemcpy).
inline std::vector<device_segment> make_device_segments(const model_layout& layout, const bucket_plan& plan) {
  std::vector<device_segment> out;
  out.reserve(plan.segments.size());
  std::uint64_t at = 0;
  for (const auto& s : plan.segments) {
    out.push_back({s.tensor, 0, s.offset, s.count, at, layout.first_element(s.tensor) + s.offset});
    at += s.count;
  }
  return out;
}

namespace detail {

inline constexpr std::size_t temp_alignment = 256;

// A segment with its tensor pointers resolved for one call (what the element kernels read: one load per
// tile instead of segment -> tensor index -> pointer array -> data).
struct resolved_segment {
  std::uint64_t bucket_first;
  std::uint64_t count;
  std::uint64_t flat_first;
  const void* a;  // base (encode) or model (apply) element at bucket_first
  const void* b;  // target element at bucket_first (encode only)
};
static_assert(sizeof(resolved_segment) == 40);

SPARSESYNC_HD constexpr std::size_t align_up(std::size_t n, std::size_t a = temp_alignment) { return (n + a - 1) / a * a; }

// Carves one temporary allocation into typed arrays (CUB's two-phase pattern): with base == nullptr it only
// adds up the bytes needed.
class temp_carver {
 public:
  explicit temp_carver(void* base) : base_(static_cast<unsigned char*>(base)) {}
  template <class T>
  T* take(std::size_t count) {
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += align_up(count * sizeof(T));
    return p;
  }
  [[nodiscard]] std::size_t bytes() const { return used_; }

 private:
  unsigned char* base_;
  std::size_t used_ = 0;
};

// Largest s with segs[s].bucket_first <= e, searching [lo, hi) (segs[lo].bucket_first <= e is given).
template <class Seg>
SPARSESYNC_DEVICE std::uint32_t find_segment(const Seg* segs, std::uint32_t lo, std::uint32_t hi, std::uint64_t e) {
  while (hi - lo > 1) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (segs[mid].bucket_first <= e)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Little-endian stores to a byte address of unknown alignment.
SPARSESYNC_DEVICE void store_le64(unsigned char* p, std::uint64_t v) {
  if ((reinterpret_cast<std::uintptr_t>(p) & 7u) == 0) {
    *reinterpret_cast<std::uint64_t*>(p) = v;
  } else {
    for (unsigned i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
  }
}

SPARSESYNC_DEVICE std::uint64_t load_le64(const unsigned char* p) {
  if ((reinterpret_cast<std::uintptr_t>(p) & 7u) == 0) return *reinterpret_cast<const std::uint64_t*>(p);
  std::uint64_t v = 0;
  for (unsigned i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

SPARSESYNC_DEVICE std::uint64_t warp_sum(std::uint64_t v) {
#pragma unroll
  for (int d = 16; d > 0; d /= 2) v += __shfl_down_sync(0xFFFFFFFFu, v, d);
  return v;
}

template <class F>
decltype(auto) visit_width(unsigned bytes, F&& f) {
  switch (bytes) {
    case 1: return f.template operator()<std::uint8_t>();
    case 2: return f.template operator()<std::uint16_t>();
    default: return f.template operator()<std::uint32_t>();
  }
}

// Grid size for kernels that loop over a device-side count: enough resident blocks to fill the GPU.
inline int persistent_blocks(int threads_per_block) {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) sms = 132;
  return sms * (2048 / threads_per_block);
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
