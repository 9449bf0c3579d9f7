// The vocabulary of the CUDA codec's public API (device views of buckets and model layouts, the encode and
// apply configurations, results and verdicts), and the small helpers that the detail/ kernels share:
// temporary storage carving, unaligned little-endian stores, warp sums.
#pragma once

#include <sparsesync/bucketing/bucket_plan.hpp>
#include <sparsesync/codec/encoder.hpp>
#include <sparsesync/codec/value_mode.hpp>
#include <sparsesync/core/dtype.hpp>
#include <sparsesync/core/layout.hpp>
#include <sparsesync/cuda/config.cuh>
#include <sparsesync/format/wire.hpp>

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

// ---- encode: configuration and result (encode.cuh) ----

enum class encode_status : std::int32_t {
  ok = 0,
  scratch_too_small = 1,  // more changes than encode_config::max_changes: see encode_result::entries_needed
  output_too_small = 2,   // the frame needs encode_result::frame_bytes bytes of output
  internal_error = 3,     // the size and write passes disagreed (a bug: please report)
};

// Written by the last kernel of an encode into device memory.
struct encode_result {
  std::int32_t status = 0;  // encode_status
  std::uint32_t reserved = 0;
  std::uint64_t frame_bytes = 0;     // bucket frame length (also when the output was too small)
  std::uint64_t changed = 0;         // changed elements
  std::uint64_t entries_needed = 0;  // scratch entries the detect pass reserved (>= changed; padding per tile)
  std::uint64_t base_checksum = 0;
  std::uint64_t target_checksum = 0;
  std::uint64_t payload_checksum = 0;
};

struct encode_config {
  encoder_id encoder = encoder_id::delta_varint;
  value_mode mode = value_mode::absolute;
  unsigned log2_chunk = default_log2_chunk;
  std::uint32_t bucket_index = 0;
  // Scratch capacity in changes (each costs 2 + element bytes). Exceeding it is reported, not fatal.
  std::uint64_t max_changes = 0;
  // The incremental path: the caller vouches for the bucket's base content checksum (typically the target
  // checksum of the previous step), so only changed elements are hashed.
  bool known_base = false;
  std::uint64_t base_checksum = 0;
  // The sender's snapshot advance fused into the encode: the detect pass, which holds each tile of base and target
  // in registers anyway, writes the target's bits over the base's wherever a tile changed (whole 16-byte vectors,
  // paired to whole 32-byte sectors, so no sector is read again), and keeps the old bits of each change in scratch.
  // Tiles whose changes did not fit the scratch are left alone; after a scratch_too_small result
  // encode_bucket_undo_advance puts the old bits back, so that a retry with more scratch sees the same base.
  // The base must be writable; not with entropy (its size and write passes read the base again).
  bool advance_base = false;
};

// ---- apply: the receiver's layout, the verdict, the configuration (apply.cuh) ----

// The receiver's model layout on the device (per tensor arrays). Build it with device_layout_storage (plan.cuh).
struct device_layout {
  const std::uint64_t* numel = nullptr;
  const std::uint64_t* first_element = nullptr;
  const std::uint8_t* dtype = nullptr;
  const std::uint32_t* next_nonempty = nullptr;  // next tensor index after i with numel > 0, or tensor_count
  std::uint32_t tensor_count = 0;
  std::uint32_t first_nonempty = 0;
  std::uint64_t total_numel = 0;
};

// Patch-wide verdict and running sums, in device memory. Reset it (reset_apply_state) before a patch.
struct apply_state {
  std::int32_t status;         // errc of the first failure, 0 while everything verified so far
  std::uint32_t failed_bucket; // bucket index of that failure
  std::uint32_t buckets;       // buckets verified
  std::uint32_t cursor_tensor; // where the next bucket's first segment must start
  std::uint64_t cursor_offset;
  std::uint64_t numel;         // sums over verified buckets (header values)
  std::uint64_t changed;
  std::uint64_t base_checksum;
  std::uint64_t target_checksum;
  std::uint64_t committed;     // buckets committed
};

struct apply_config {
  // The receiver vouches for its whole-model base checksum: buckets are not re-hashed; check_patch compares
  // the sum of the buckets' base checksums with the vouched value. Only changed elements are read.
  bool known_base = false;
  // Most segments a frame may have (scratch is sized for it). 0: the layout's tensor count + 4096.
  std::uint32_t max_segments = 0;
  // Most changes a frame may carry: decoded changes are staged (8 bytes each) between verify and commit.
  // A frame with more is refused with errc::invalid_argument. apply_plan sets it from the frame's header.
  std::uint64_t max_changes = 0;
  // Most chunks a frame may have (per-chunk tables are sized for it). 0: as many as the frame length allows.
  std::uint64_t max_chunks = 0;
  // Keep the old bits of every staged change so that undo_bucket can restore a committed bucket. For 1- and
  // 2-byte dtypes they always travel in the staging list's upper bits; this adds a 4-byte array per staged
  // change for 4-byte dtypes.
  bool keep_old = false;
  // The encoder (wire id) the frame names in its header, when the caller read it there (apply_plan does); 0:
  // unknown. When set, only that encoder's sequential decoders are launched (7 of a verify's 16 launches are
  // rice's and entropy's, which exit at once for another encoder's frame: a worker hands its frames on with fewer
  // launches), and a frame whose header names another encoder is refused (errc::malformed).
  std::uint8_t encoder = 0;
};

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
