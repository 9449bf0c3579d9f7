// Dispatch of the GPU encoder (as CUB's device/dispatch): carves the temporary storage (two-phase), checks
// the configuration and launches the pipeline of cuda/encode.cuh on a stream, kernels templated on the
// tuning policy. The public entry points (encode.cuh) forward here at once.
#pragma once

#include <sparsesync/cuda/detail/advance_base.cuh>
#include <sparsesync/cuda/detail/detect.cuh>
#include <sparsesync/cuda/detail/encode_kernels.cuh>
#include <sparsesync/cuda/detail/entropy_plan.cuh>
#include <sparsesync/cuda/detail/scan.cuh>
#include <sparsesync/cuda/types.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

struct encode_layout {
  unsigned w = 2;
  unsigned tile_log2 = 0;
  std::uint64_t num_tiles = 0;
  std::uint64_t chunk_count = 0;
  encode_counters* ctr = nullptr;
  std::uint64_t* tile_off = nullptr;
  std::uint32_t* tile_cnt = nullptr;
  std::uint16_t* pos = nullptr;
  void* val = nullptr;
  chunk_plan* plans = nullptr;
  std::uint64_t* chunk_bytes = nullptr;
  std::uint64_t* chunk_off = nullptr;
  std::uint64_t* scan_partials = nullptr;
  resolved_segment* resolved = nullptr;
  std::uint32_t* aux = nullptr;  // entropy only: a word per change slot
  entropy_plan_scratch ent;      // entropy only: group headers, sorted gaps and value codes per chunk
  void* old = nullptr;           // advance_base only: the old bits of each change slot
  std::size_t bytes = 0;
};

template <class D>
encode_layout carve_encode(void* d_temp, const device_bucket& b, const encode_config& cfg) {
  encode_layout l;
  l.w = size_of(b.dtype);
  const unsigned max_tile_log2 = visit_width(l.w, [&]<class W>() {
    return tile_traits<W, D::detect_threads, D::detect_iters>::max_tile_log2;
  });
  l.tile_log2 = cfg.log2_chunk < max_tile_log2 ? cfg.log2_chunk : max_tile_log2;
  l.num_tiles = (b.numel + (std::uint64_t{1} << l.tile_log2) - 1) >> l.tile_log2;
  l.chunk_count = (b.numel + (std::uint64_t{1} << cfg.log2_chunk) - 1) >> cfg.log2_chunk;
  temp_carver t(d_temp);
  l.ctr = t.take<encode_counters>(1);
  l.tile_off = t.take<std::uint64_t>(l.num_tiles);
  l.tile_cnt = t.take<std::uint32_t>(l.num_tiles);
  l.pos = t.take<std::uint16_t>(cfg.max_changes);
  l.val = t.take<unsigned char>(cfg.max_changes * l.w);
  l.plans = t.take<chunk_plan>(l.chunk_count);
  l.chunk_bytes = t.take<std::uint64_t>(l.chunk_count);
  l.chunk_off = t.take<std::uint64_t>(l.chunk_count);
  l.scan_partials = t.take<std::uint64_t>(scan_partials_words);
  l.resolved = t.take<resolved_segment>(b.segment_count);
  const bool ent = cfg.encoder == encoder_id::entropy;
  l.aux = t.take<std::uint32_t>(ent ? cfg.max_changes : 0);
  const unsigned classes = l.w == 1 ? entropy_params::class_count<std::uint8_t> : entropy_params::class_count<std::uint16_t>;
  l.ent.groups = t.take<std::uint64_t>(ent ? l.chunk_count * classes : 0);
  l.ent.region = t.take<std::uint64_t>(ent ? cfg.max_changes : 0);
  l.ent.region_at = t.take<std::uint64_t>(ent ? l.chunk_count : 0);
  l.ent.group_count = t.take<std::uint32_t>(ent ? l.chunk_count : 0);
  l.ent.region_next = t.take<unsigned long long>(ent ? 1 : 0);
  l.old = t.take<unsigned char>(cfg.advance_base ? cfg.max_changes * l.w : 0);
  l.bytes = t.bytes();
  return l;
}

static_assert(device_encoder_count == 5, "sparsesync: encoder_table (codec/encoder_table.hpp) gained a row: check valid_config and warp_encoder");

inline bool valid_config(const device_bucket& b, const encode_config& cfg) {
  if (!is_valid(b.dtype) || b.numel == 0 || b.segment_count == 0 || b.segments == nullptr) return false;
  if (cfg.log2_chunk < min_log2_chunk || cfg.log2_chunk > max_log2_chunk) return false;
  if (static_cast<unsigned>(cfg.encoder) < 1 || static_cast<unsigned>(cfg.encoder) > device_encoder_count) return false;
  if (cfg.mode != value_mode::absolute && cfg.mode != value_mode::ulp) return false;
  if (cfg.advance_base && cfg.encoder == encoder_id::entropy) return false;  // its later passes read the base again
  const std::uint64_t chunks = ((b.numel - 1) >> cfg.log2_chunk) + 1;
  return chunks <= 0xFFFFFFFFull;
}

// raw_index32, delta_varint and bitmap are written a warp per chunk; rice and entropy (sequential bit codes) a
// thread per chunk (entropy's size pass is a warp per chunk: entropy_plan.cuh).
inline bool warp_encoder(encoder_id e) { return e != encoder_id::rice && e != encoder_id::entropy; }

struct sum_loader {
  const std::uint64_t* v;
  SPARSESYNC_DEVICE std::uint64_t operator()(std::uint64_t i) const { return v[i]; }
};

// The chunk passes' parameters (size: no output yet) and grids: a warp per chunk or a thread per chunk.
inline chunk_pass_params chunk_params_of(const encode_layout& l, const device_bucket& b, const encode_config& cfg,
                                         unsigned char* d_out = nullptr, std::size_t out_capacity = 0) {
  return {b.numel,       static_cast<std::uint32_t>(l.chunk_count), cfg.log2_chunk, l.tile_log2, l.num_tiles, cfg.encoder,
          cfg.mode,      l.pos, l.val, l.tile_off, l.tile_cnt, cfg.max_changes, l.plans, l.chunk_bytes, l.chunk_off,
          l.ctr,         d_out, out_capacity, b.segment_count, l.resolved, l.aux};
}
template <class P>
unsigned thread_per_chunk_grid(const encode_layout& l) {
  return static_cast<unsigned>((l.chunk_count + P::chunk_threads - 1) / P::chunk_threads);
}
template <class P>
unsigned warp_per_chunk_grid(const encode_layout& l) {
  return static_cast<unsigned>((l.chunk_count * 32 + P::chunk_threads - 1) / P::chunk_threads);
}

// The finalize pass's parameters: after the size pass (`written` false: the frame size only) or the write pass.
inline finalize_params finalize_params_of(const encode_layout& l, const device_bucket& b, const encode_config& cfg, bool written,
                                          unsigned char* d_out, std::size_t out_capacity, encode_result* d_result) {
  return {b.segments, b.segment_count, cfg.bucket_index, cfg.encoder, cfg.mode, b.dtype, cfg.log2_chunk, b.numel,
          static_cast<std::uint32_t>(l.chunk_count), cfg.max_changes, l.ctr, cfg.known_base, cfg.base_checksum, written,
          d_out, out_capacity, d_result};
}

// The pass that reads the weights: counters reset, segments resolved, detect.
template <class P>
cudaError_t encode_find(const encode_layout& l, const device_bucket& b, const void* const* d_base, const void* const* d_target,
                        const encode_config& cfg, cudaStream_t stream) {
  SPARSESYNC_CUDA_TRY(cudaMemsetAsync(l.ctr, 0, sizeof(encode_counters), stream));
  if (l.num_tiles > 0x7FFFFFFFull) return cudaErrorInvalidValue;
  resolve_segments_kernel<P><<<(b.segment_count + 127) / 128, 128, 0, stream>>>(b.segments, b.segment_count, d_base, d_target, l.w,
                                                                             l.resolved);
  SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
  detect_params dp{l.resolved, b.segment_count, b.numel, l.tile_log2, cfg.mode, l.pos, l.val, cfg.max_changes,
                   l.tile_off, l.tile_cnt, &l.ctr->allocated, l.ctr->base, l.ctr->delta, cfg.advance_base ? l.old : nullptr};
  if (cfg.encoder == encoder_id::entropy) {
    if (l.chunk_count > 0x7FFFFFFFull) return cudaErrorInvalidValue;
    SPARSESYNC_CUDA_TRY(cudaMemsetAsync(l.ent.region_next, 0, sizeof(unsigned long long), stream));
  }
  using DK = typename P::detect_known;
  using DH = typename P::detect_hashed;
  return visit_width(l.w, [&]<class W>() -> cudaError_t {
    if (cfg.known_base)
      detect_kernel<W, DK, false><<<detect_grid(l.num_tiles), DK::detect_threads, 0, stream>>>(dp);
    else
      detect_kernel<W, DH, true><<<detect_grid(l.num_tiles), DH::detect_threads, 0, stream>>>(dp);
    SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    return cudaSuccess;
  });
}

// From the detected changes: each chunk's size, their offsets, and (with d_result) the frame size in *d_result.
template <class P>
cudaError_t encode_size(const encode_layout& l, const device_bucket& b, encode_result* d_result, const encode_config& cfg, cudaStream_t stream) {
  const chunk_pass_params cp = chunk_params_of(l, b, cfg);
  const unsigned chunk_grid = thread_per_chunk_grid<P>(l), warp_grid = warp_per_chunk_grid<P>(l);
  cudaError_t err = visit_width(l.w, [&]<class W>() -> cudaError_t {
    if (warp_encoder(cfg.encoder))
      warp_size_kernel<W, P><<<warp_grid, P::chunk_threads, 0, stream>>>(cp);
    else if (cfg.encoder == encoder_id::entropy && cfg.log2_chunk <= 16) {  // byte and 16-bit lane counters (entropy_plan.cuh)
      entropy_plan_kernel<W, P, entropy_plan_mode::bytes><<<static_cast<unsigned>(l.chunk_count), 32, 0, stream>>>(cp, l.ent);
      if constexpr (entropy_plan_byte_groups<W> < entropy_params::class_count<W>) {  // (else no chunk is left)
        SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
        entropy_plan_kernel<W, P, entropy_plan_mode::deferred><<<static_cast<unsigned>(l.chunk_count), 32, 0, stream>>>(cp, l.ent);
      }
    } else if (cfg.encoder == encoder_id::entropy)
      entropy_plan_kernel<W, P, entropy_plan_mode::wide><<<static_cast<unsigned>(l.chunk_count), 32, 0, stream>>>(cp, l.ent);
    else
      chunk_size_kernel<W, P><<<chunk_grid, P::chunk_threads, 0, stream>>>(cp);
    SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    return cudaSuccess;
  });
  if (err != cudaSuccess) return err;
  SPARSESYNC_CUDA_TRY(exclusive_scan(sum_loader{l.chunk_bytes}, nullptr, l.chunk_count, l.scan_partials, l.chunk_off,
                                     &l.ctr->data_total, stream));
  if (d_result) {
    encode_finalize_kernel<P><<<1, 32, 0, stream>>>(finalize_params_of(l, b, cfg, false, nullptr, 0, d_result));
    SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
  }
  return cudaSuccess;
}

template <class P>
cudaError_t encode_write(const encode_layout& l, const device_bucket& b, unsigned char* d_out, std::size_t out_capacity,
                         encode_result* d_result, const encode_config& cfg, cudaStream_t stream) {
  SPARSESYNC_CUDA_TRY(cudaMemsetAsync(l.ctr->payload, 0, sizeof(l.ctr->payload) + 2 * sizeof(std::int32_t), stream));
  const chunk_pass_params cp = chunk_params_of(l, b, cfg, d_out, out_capacity);
  const unsigned chunk_grid = thread_per_chunk_grid<P>(l), warp_grid = warp_per_chunk_grid<P>(l);
  const auto hash_grid = static_cast<unsigned>((l.chunk_count * 4 + P::chunk_threads - 1) / P::chunk_threads);  // 4 lanes a chunk
  cudaError_t err = visit_width(l.w, [&]<class W>() -> cudaError_t {
    if (warp_encoder(cfg.encoder)) {
      warp_write_kernel<W, P><<<warp_grid, P::chunk_threads, 0, stream>>>(cp);
      SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
      chunk_hash_kernel<P><<<hash_grid, P::chunk_threads, 0, stream>>>(cp);
    } else if (cfg.encoder == encoder_id::entropy)
      entropy_write_kernel<W, P><<<chunk_grid, P::chunk_threads, 0, stream>>>(cp, l.ent);
    else
      chunk_write_kernel<W, P><<<chunk_grid, P::chunk_threads, 0, stream>>>(cp);
    SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    return cudaSuccess;
  });
  if (err != cudaSuccess) return err;
  encode_finalize_kernel<P><<<1, 256, 0, stream>>>(finalize_params_of(l, b, cfg, true, d_out, out_capacity, d_result));
  SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
  return cudaSuccess;
}

enum class encode_phase { detect, write, both };

// Where the passes of one encode run: `read` takes the pass that reads the weights, `rest` (when set and not
// `read`) every pass after it, ordered after the read through `handoff` (an event the caller owns). The later
// passes are small kernels; on a stream of greater priority they start as soon as the read is done instead of
// queueing behind other streams' read passes, whose blocks fill every SM (session 12: encode lanes).
struct encode_streams {
  cudaStream_t read = nullptr;
  cudaStream_t rest = nullptr;
  cudaEvent_t handoff = nullptr;
};

template <class P>
cudaError_t dispatch_encode(void* d_temp, std::size_t& temp_bytes, const device_bucket& b, const void* const* d_base,
                            const void* const* d_target, unsigned char* d_out, std::size_t out_capacity, encode_result* d_result,
                            const encode_config& cfg, encode_streams streams, encode_phase phase) {
  static_assert(tuning_policy<P>, "sparsesync: the CUDA tuning policy must satisfy sparsesync::cuda::tuning_policy");
  if (!valid_config(b, cfg)) return cudaErrorInvalidValue;
  const encode_layout l = cfg.known_base ? carve_encode<typename P::detect_known>(d_temp, b, cfg)
                                         : carve_encode<typename P::detect_hashed>(d_temp, b, cfg);
  if (d_temp == nullptr) {
    temp_bytes = l.bytes;
    return cudaSuccess;
  }
  if (temp_bytes < l.bytes) return cudaErrorInvalidValue;
  const bool split = streams.rest != nullptr && streams.rest != streams.read;
  if (split && streams.handoff == nullptr) return cudaErrorInvalidValue;
  cudaStream_t rest = split ? streams.rest : streams.read;
  if (phase != encode_phase::write) {
    if (d_base == nullptr || d_target == nullptr) return cudaErrorInvalidValue;
    SPARSESYNC_CUDA_TRY(encode_find<P>(l, b, d_base, d_target, cfg, streams.read));
    if (split) {
      SPARSESYNC_CUDA_TRY(cudaEventRecord(streams.handoff, streams.read));
      SPARSESYNC_CUDA_TRY(cudaStreamWaitEvent(rest, streams.handoff, 0));
    }
    SPARSESYNC_CUDA_TRY(encode_size<P>(l, b, phase == encode_phase::detect ? d_result : nullptr, cfg, rest));
  }
  if (phase != encode_phase::detect) {
    if (d_out == nullptr || d_result == nullptr) return cudaErrorInvalidValue;
    SPARSESYNC_CUDA_TRY(encode_write<P>(l, b, d_out, out_capacity, d_result, cfg, rest));
  }
  return cudaSuccess;
}

// After a completed encode (status ok) whose scratch is still in d_temp: writes every changed element's target
// bits into the base it was encoded against (the pointers given to that encode). Nothing to do when the encode
// advanced the base itself (cfg.advance_base). With `undo` (after an encode with cfg.advance_base, any status):
// puts back the old bits that encode wrote over, tile by tile where it stored its changes.
template <class P>
cudaError_t dispatch_advance_base(void* d_temp, std::size_t temp_bytes, const device_bucket& b, const encode_config& cfg, cudaStream_t stream,
                                  bool undo = false) {
  static_assert(tuning_policy<P>, "sparsesync: the CUDA tuning policy must satisfy sparsesync::cuda::tuning_policy");
  if (d_temp == nullptr || !valid_config(b, cfg)) return cudaErrorInvalidValue;
  if (undo != cfg.advance_base) return undo ? cudaErrorInvalidValue : cudaSuccess;
  const encode_layout l = cfg.known_base ? carve_encode<typename P::detect_known>(d_temp, b, cfg)
                                         : carve_encode<typename P::detect_hashed>(d_temp, b, cfg);
  if (temp_bytes < l.bytes) return cudaErrorInvalidValue;
  if (l.num_tiles == 0) return cudaSuccess;
  const advance_params ap{l.resolved, b.segment_count, l.tile_log2, l.num_tiles, l.pos, l.tile_off, l.tile_cnt, undo ? l.old : nullptr,
                          cfg.max_changes};
  const unsigned grid = static_cast<unsigned>(l.num_tiles < 65535 ? l.num_tiles : 65535);
  return visit_width(l.w, [&]<class W>() -> cudaError_t {
    advance_base_kernel<W, 128><<<grid, 128, 0, stream>>>(ap);
    SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    return cudaSuccess;
  });
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
