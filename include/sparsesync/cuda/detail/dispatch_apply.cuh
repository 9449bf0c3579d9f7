// Dispatch of the GPU decode + apply (as CUB's device/dispatch): carves the temporary storage (two-phase) and
// launches the passes of one phase (verify, commit, undo) on a stream, kernels templated on the tuning policy.
// The public entry points (apply.cuh) forward here at once.
#pragma once

#include <sparsesync/cuda/detail/apply_kernels.cuh>
#include <sparsesync/cuda/detail/scan.cuh>
#include <sparsesync/cuda/types.cuh>

#include <algorithm>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

struct apply_layout {
  bucket_info* info = nullptr;
  resolved_segment* segs = nullptr;
  std::uint64_t* chunk_off = nullptr;
  std::uint64_t* change_off = nullptr;
  std::uint32_t* stage_pos = nullptr;
  std::uint32_t* stage_val = nullptr;
  std::uint32_t* stage_old = nullptr;
  std::uint32_t* entropy_state = nullptr;
  std::uint64_t* scan_partials = nullptr;
  std::uint32_t seg_cap = 0;
  std::uint64_t chunk_cap = 0;
  std::uint64_t stage_cap = 0;
  std::size_t bytes = 0;
};

inline apply_layout carve_apply(void* d_temp, const device_layout& layout, std::size_t frame_bytes, const apply_config& cfg) {
  apply_layout l;
  const std::uint64_t body = frame_bytes > bucket_header_bytes ? frame_bytes - bucket_header_bytes : 0;
  const std::uint64_t max_seg = cfg.max_segments ? cfg.max_segments : std::uint64_t{layout.tensor_count} + 4096;
  l.seg_cap = static_cast<std::uint32_t>(std::min<std::uint64_t>(body / segment_entry_bytes, max_seg));
  const std::uint64_t after_seg = body > segment_entry_bytes ? body - segment_entry_bytes : 0;
  l.chunk_cap = std::min<std::uint64_t>(after_seg / chunk_entry_bytes, (layout.total_numel >> min_log2_chunk) + 1);
  if (cfg.max_chunks) l.chunk_cap = std::min<std::uint64_t>(l.chunk_cap, cfg.max_chunks);
  // Changes: at most one per element; staged runs are padded to 4 per chunk.
  const std::uint64_t max_changes = cfg.max_changes ? cfg.max_changes : (std::uint64_t{1} << 20);
  l.stage_cap = std::min<std::uint64_t>(max_changes, layout.total_numel) + 4 * l.chunk_cap;
  temp_carver t(d_temp);
  l.info = t.take<bucket_info>(1);
  l.segs = t.take<resolved_segment>(l.seg_cap);
  l.chunk_off = t.take<std::uint64_t>(l.chunk_cap);
  l.change_off = t.take<std::uint64_t>(l.chunk_cap);
  l.stage_pos = t.take<std::uint32_t>(l.stage_cap);
  l.stage_val = t.take<std::uint32_t>(l.stage_cap);
  if (cfg.keep_old) l.stage_old = t.take<std::uint32_t>(l.stage_cap);
  l.entropy_state = t.take<std::uint32_t>(l.chunk_cap);
  l.scan_partials = t.take<std::uint64_t>(scan_partials_words);
  l.bytes = t.bytes();
  return l;
}

// A one-warp-block kernel's grid: as many blocks as fit at once (its blocks loop over the chunks in equal
// shares, so a block that must wait for a slot would double the pass).
inline int resident_warp_blocks(const void* kernel) {
  int b = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, entropy_warp_threads, 0) != cudaSuccess || b < 1) b = 1;
  return persistent_blocks(2048) * b;  // (one block per SM, times b)
}
template <class P>
int entropy_alone_blocks() {
  static const int blocks = resident_warp_blocks(reinterpret_cast<const void*>(apply_entropy_alone_kernel<P>));
  return blocks;
}
template <class P>
int entropy_warp_blocks() {
  static const int blocks = resident_warp_blocks(reinterpret_cast<const void*>(apply_entropy_warp_kernel<P>));
  return blocks;
}
template <class P>
int entropy_place_blocks() {
  static const int blocks = resident_warp_blocks(reinterpret_cast<const void*>(apply_entropy_place_kernel<P>));
  return blocks;
}

// verify_unordered + join: a verify split in two, the first part reading nothing of the patch-wide state (any
// stream), the second only its finish (in bucket order, on the stream that owns the state).
enum class apply_phase { verify, commit, commit_after_verify, undo, undo_by_redecode, verify_unordered, join };

template <class P>
cudaError_t dispatch_apply(void* d_temp, std::size_t& temp_bytes, const device_layout& layout, void* const* d_model,
                           const unsigned char* d_frame, std::size_t frame_bytes, apply_state* d_state, const apply_config& cfg,
                           cudaStream_t stream, apply_phase phase) {
  static_assert(tuning_policy<P>, "sparsesync: the CUDA tuning policy must satisfy sparsesync::cuda::tuning_policy");
  const apply_layout l = carve_apply(d_temp, layout, frame_bytes, cfg);
  if (d_temp == nullptr) {
    temp_bytes = l.bytes;
    return cudaSuccess;
  }
  if (temp_bytes < l.bytes || d_frame == nullptr || d_model == nullptr) return cudaErrorInvalidValue;
  if (d_state == nullptr && phase != apply_phase::undo) return cudaErrorInvalidValue;  // (the undo pass reads no verdict)
  // A re-decode parses like a commit (its own tiling, no bucket-index check) against a clean state.
  const bool unordered = phase == apply_phase::verify_unordered || phase == apply_phase::join;
  const bool commit = phase != apply_phase::verify && !unordered;
  const apply_params p{d_frame,      frame_bytes, layout,      d_model,     d_state,     l.info,      l.segs,      l.seg_cap,
                       l.chunk_off,  l.chunk_cap, l.change_off, l.stage_pos, l.stage_val, l.stage_old, l.stage_cap, commit,
                       !cfg.known_base, unordered, l.entropy_state, cfg.encoder, phase == apply_phase::commit_after_verify};
  // Which sequential decoders to launch: all (each exits at once for another encoder's frame) or the one cfg
  // names. The warp decoder always runs: it also takes every chunk's payload checksum share.
  const auto decodes = [&](encoder_id e) { return cfg.encoder == 0 || cfg.encoder == static_cast<std::uint8_t>(e); };
  const int decode_blocks = persistent_blocks(decode_threads);
  const int process_blocks = persistent_blocks(process_threads);
  const int hash_blocks = persistent_blocks(P::detect_hashed::detect_threads);
  if (phase == apply_phase::undo) {  // the staging of this frame's verify, nothing else: no parse, no verdict
    apply_process_kernel<process_pass::undo><<<process_blocks, process_threads, 0, stream>>>(p);
    SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    return cudaSuccess;
  }
  if (phase == apply_phase::join) {  // the unordered verify's tables are in d_temp: only its verdict joins the patch
    apply_finish_kernel<P><<<1, 1, 0, stream>>>(p);
    SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    return cudaSuccess;
  }
  if (phase != apply_phase::commit_after_verify) {
    apply_parse_kernel<P><<<1, 256, 0, stream>>>(p);
    SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    SPARSESYNC_CUDA_TRY(exclusive_scan(chunk_offsets_loader{d_frame, l.info}, &l.info->C, 0, l.scan_partials,
                                       chunk_offsets_out{l.chunk_off, l.change_off}, chunk_totals_out{l.info}, stream));
    if (!commit && !cfg.known_base) {
      apply_base_hash_kernel<typename P::detect_hashed><<<hash_blocks, P::detect_hashed::detect_threads, 0, stream>>>(p);
      SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    }
    if (commit)
      apply_decode_kernel<false><<<decode_blocks, decode_threads, 0, stream>>>(p);
    else
      apply_decode_kernel<true><<<decode_blocks, decode_threads, 0, stream>>>(p);
    SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    if (decodes(encoder_id::rice)) {
      apply_rice_kernel<P><<<decode_blocks, decode_threads, 0, stream>>>(p);
      SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    }
    if (decodes(encoder_id::entropy)) {
      apply_entropy_alone_kernel<P><<<entropy_alone_blocks<P>(), entropy_warp_threads, 0, stream>>>(p);
      SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
      apply_entropy_warp_kernel<P><<<entropy_warp_blocks<P>(), entropy_warp_threads, 0, stream>>>(p);
      SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
      apply_entropy_parse_kernel<P><<<decode_blocks, decode_threads, 0, stream>>>(p);
      SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
      apply_entropy_place_kernel<P><<<entropy_place_blocks<P>(), entropy_warp_threads, 0, stream>>>(p);
      SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
      apply_entropy_values_kernel<P><<<decode_blocks, decode_threads, 0, stream>>>(p);
      SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
      apply_entropy_check_kernel<P><<<persistent_blocks(32 * entropy_check_warps), 32 * entropy_check_warps, 0, stream>>>(p);
      SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    }
    if (phase == apply_phase::undo_by_redecode) {  // the coded deltas, stepped back; no verdict
      apply_process_kernel<process_pass::undo_ulp><<<process_blocks, process_threads, 0, stream>>>(p);
      SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
      return cudaSuccess;
    }
    // Verify pass (for a commit that re-parsed, it turns the re-decoded coded values into new bit patterns).
    apply_process_kernel<process_pass::verify><<<process_blocks, process_threads, 0, stream>>>(p);
    SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    if (phase == apply_phase::verify_unordered) return cudaSuccess;  // its finish is the join
  }
  if (commit) {
    apply_process_kernel<process_pass::commit><<<process_blocks, process_threads, 0, stream>>>(p);
    SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
    if (p.commit_counts) return cudaSuccess;  // (it counted itself: see apply_params::commit_counts)
  }
  apply_finish_kernel<P><<<1, 1, 0, stream>>>(p);
  SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
  return cudaSuccess;
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
