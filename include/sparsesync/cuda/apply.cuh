// GPU decode + apply in place of bucket frames (FORMAT.md section 6), for payloads of any encoder.
//
// A frame in device memory is applied in two stream-ordered steps; nothing is written to the model before the
// whole frame is proven:
//   verify  parse (one block): header, header checksum, fields, bounds of tables and data within the frame,
//             segment table against the receiver's layout (dtypes, bounds, tiling continuing the previous bucket)
//           scans (3 small launches each): chunk data offsets, staging offsets
//           [base hash (persistent blocks): the receiver's bucket elements, unless apply_config::known_base]
//           decode (a warp per chunk): payload checksum (XXH64 per chunk, 4 lanes) and, for raw_index32, bitmap
//             and delta_varint, warp-parallel canonical decoding into a staging list (u32 chunk-relative
//             position, u32 coded value); Rice (a sequential code) is decoded a thread per chunk
//           verify (a block per chunk, thread j on change j): old values read, no-op changes refused, target
//             checksum delta; the new bit patterns replace the coded values in the staging list
//           finish (one thread): sums, checksums, verdict into the patch-wide apply_state
//   commit  (a block per chunk): only if the apply_state is clean, the staged new bit patterns are written in
//           place (a pure scatter). A commit that does not follow its verify re-parses and re-decodes first.
//   undo    (a block per chunk, optional): a committed bucket's old bit patterns, kept by its verify, written
//           back: a version refused after some of its buckets were written is rolled back (undo_bucket); a
//           ULP-coded bucket can instead be decoded again and stepped back (undo_bucket_by_redecode).
// A malformed payload is refused without any out-of-bounds access: the host checks only the frame length;
// kernels derive every other bound from validated fields and the caller's layout, decoders read only their
// chunk's bytes, and staging writes are bounded by the scratch capacity.
// Host synchronization: none (read the apply_state when the verdict is needed; apply_plan does it in result()).
// Memory: 8 bytes per staged change (apply_config::max_changes) + O(segments + chunks).
// Contract: the frame bytes and the model must not change between verify and commit.
#pragma once

#include <sparsesync/cuda/detail/dispatch_apply.cuh>
#include <sparsesync/cuda/types.cuh>
#include <sparsesync/format/wire.hpp>

SPARSESYNC_NS_BEGIN
namespace cuda {

// (device_layout, apply_state and apply_config are in types.cuh.)

// ---- public entry points ----

// Resets a patch-wide apply_state (device memory) before the first bucket of a patch.
inline cudaError_t reset_apply_state(apply_state* d_state, const device_layout& layout, cudaStream_t stream = nullptr) {
  detail::apply_reset_kernel<><<<1, 1, 0, stream>>>(d_state, layout.first_nonempty);
  SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
  return cudaSuccess;
}

// Validates a bucket frame (device memory, frame_bytes long or longer) and verifies it against the current
// model (device array of tensor pointers, layout order) without writing to the model. The verdict goes into
// *d_state. Two-phase temporary storage: d_temp == nullptr sets temp_bytes (it depends on frame_bytes).
template <class Policy = default_policy>
cudaError_t verify_bucket(void* d_temp, std::size_t& temp_bytes, const device_layout& layout, void* const* d_model,
                          const unsigned char* d_frame, std::size_t frame_bytes, apply_state* d_state, const apply_config& cfg = {},
                          cudaStream_t stream = nullptr) {
  return detail::dispatch_apply<Policy>(d_temp, temp_bytes, layout, d_model, d_frame, frame_bytes, d_state, cfg, stream,
                                        detail::apply_phase::verify);
}

// verify_bucket in two parts, so that the buckets of one patch verify side by side (the sequential decoders, a
// thread per chunk, leave most of the GPU idle for one bucket): verify_bucket_unordered reads nothing of
// *d_state (any stream, beside other buckets' verifies); join_verified_bucket (same d_temp, frame and cfg; in
// bucket order, on one stream) checks that the bucket is the patch's next one, index and tiling, and adds its
// verdict, as verify_bucket's last step does. A commit_bucket with right_after_verify may follow the join.
template <class Policy = default_policy>
cudaError_t verify_bucket_unordered(void* d_temp, std::size_t& temp_bytes, const device_layout& layout, void* const* d_model,
                                    const unsigned char* d_frame, std::size_t frame_bytes, apply_state* d_state,
                                    const apply_config& cfg = {}, cudaStream_t stream = nullptr) {
  return detail::dispatch_apply<Policy>(d_temp, temp_bytes, layout, d_model, d_frame, frame_bytes, d_state, cfg, stream,
                                        detail::apply_phase::verify_unordered);
}
template <class Policy = default_policy>
cudaError_t join_verified_bucket(void* d_temp, std::size_t temp_bytes, const device_layout& layout, void* const* d_model,
                                 const unsigned char* d_frame, std::size_t frame_bytes, apply_state* d_state, const apply_config& cfg = {},
                                 cudaStream_t stream = nullptr) {
  if (d_temp == nullptr) return cudaErrorInvalidValue;
  return detail::dispatch_apply<Policy>(d_temp, temp_bytes, layout, d_model, d_frame, frame_bytes, d_state, cfg, stream, detail::apply_phase::join);
}

// Writes a verified bucket's changes into the model, in place, if *d_state holds no failure (of this bucket
// or any other verified so far). `right_after_verify`: the previous call on this d_temp was verify_bucket of
// the same frame, so its parsed tables are reused; otherwise they are rebuilt (and re-validated).
template <class Policy = default_policy>
cudaError_t commit_bucket(void* d_temp, std::size_t temp_bytes, const device_layout& layout, void* const* d_model,
                          const unsigned char* d_frame, std::size_t frame_bytes, apply_state* d_state, const apply_config& cfg = {},
                          bool right_after_verify = false, cudaStream_t stream = nullptr) {
  if (d_temp == nullptr) return cudaErrorInvalidValue;
  return detail::dispatch_apply<Policy>(d_temp, temp_bytes, layout, d_model, d_frame, frame_bytes, d_state, cfg, stream,
                                        right_after_verify ? detail::apply_phase::commit_after_verify : detail::apply_phase::commit);
}

// Restores the old bits of the elements that commit_bucket wrote for this frame (nothing if that commit did
// not write): for a version refused after some of its buckets were written. d_temp must hold that bucket's
// verify and commit (apply_config::keep_old for 4-byte dtypes, the same cfg), and the frame and the model
// must be unchanged since, apart from that commit.
template <class Policy = default_policy>
cudaError_t undo_bucket(void* d_temp, std::size_t temp_bytes, const device_layout& layout, void* const* d_model,
                        const unsigned char* d_frame, std::size_t frame_bytes, const apply_config& cfg = {}, cudaStream_t stream = nullptr) {
  if (d_temp == nullptr || d_frame == nullptr || d_model == nullptr) return cudaErrorInvalidValue;
  std::size_t bytes = temp_bytes;
  return detail::dispatch_apply<Policy>(d_temp, bytes, layout, d_model, d_frame, frame_bytes, nullptr, cfg, stream, detail::apply_phase::undo);
}

// Restores the old bits of a committed ULP-coded frame without any kept staging: decodes the frame again into
// d_temp and steps every changed element back by its delta (exact: ULP deltas wrap in a bijective key space).
// d_clean_state: a scratch apply_state just reset by reset_apply_state (not the patch's, which holds its
// refusal). The frame must have been committed to d_model and nothing written over its elements since. The
// bucket's parse and decode verdicts land at the start of d_temp (detail::bucket_info: status, decode_status);
// nonzero ones mean nothing was restored.
template <class Policy = default_policy>
cudaError_t undo_bucket_by_redecode(void* d_temp, std::size_t temp_bytes, const device_layout& layout, void* const* d_model,
                                    const unsigned char* d_frame, std::size_t frame_bytes, apply_state* d_clean_state,
                                    const apply_config& cfg = {}, cudaStream_t stream = nullptr) {
  if (d_temp == nullptr || d_clean_state == nullptr) return cudaErrorInvalidValue;
  std::size_t bytes = temp_bytes;
  return detail::dispatch_apply<Policy>(d_temp, bytes, layout, d_model, d_frame, frame_bytes, d_clean_state, cfg, stream,
                                        detail::apply_phase::undo_by_redecode);
}

// After the last bucket's verify_bucket and before any commit: checks that the verified buckets cover the
// whole layout and add up to the patch header's totals (and to a vouched whole-model base checksum).
inline cudaError_t check_patch(apply_state* d_state, const device_layout& layout, const patch_header& h,
                               const std::uint64_t* known_base_checksum = nullptr, cudaStream_t stream = nullptr) {
  detail::patch_totals t{h.bucket_count, h.numel, h.base_checksum, h.target_checksum, known_base_checksum != nullptr,
                         known_base_checksum ? *known_base_checksum : 0};
  detail::apply_check_patch_kernel<><<<1, 1, 0, stream>>>(d_state, t, layout.tensor_count);
  SPARSESYNC_CUDA_LAUNCH_CHECK(stream);
  return cudaSuccess;
}

}  // namespace cuda
SPARSESYNC_NS_END