// GPU encoder of one bucket frame, byte-identical to format/bucket_writer.hpp (FORMAT.md section 3).
//
// Pipeline, all stream-ordered, no host synchronization:
//   detect   (one block per tile)   reads base and target once: base checksum (unless known), changes, their
//                                   hash deltas; compacts (position, coded value) into scratch; with
//                                   cfg.advance_base also writes the target over the base where a tile changed
//   size     (a warp per chunk for raw_index32 / delta_varint / bitmap, a thread per chunk for rice)
//            change count, data bytes (and Rice parameters) of each chunk
//   scan     (3 small launches)     chunk data offsets and the bucket's data length
//   write    (same split) chunk table entry and data; warps place bytes by warp scans of per-change byte
//            counts and then hash the chunk, threads stream bits and hash them on the fly (XXH64 of entry || data)
//   finalize (one block)            segment table, payload checksum, bucket header, encode_result
// Memory: scratch of (2 + element bytes) per change plus O(tiles + chunks); the frame is written once.
// Where it synchronizes with the host: never. The frame size and checksums land in a device-side
// encode_result; read it (one cudaMemcpy + sync) when the host needs them. encode_plan (plan.cuh) does that.
#pragma once

#include <sparsesync/cuda/detail/dispatch_encode.cuh>
#include <sparsesync/cuda/types.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {

// (encode_config, encode_result and encode_status are in types.cuh.)

// ---- public entry points (they forward to detail::dispatch_encode) ----

// Encodes one bucket frame of the change from base to target into d_out (device memory).
// Two-phase temporary storage: with d_temp == nullptr only temp_bytes is set. d_base and d_target are device
// arrays of device pointers, indexed by layout tensor index (only the bucket's tensors are read).
// On return the work is enqueued on `stream`; *d_result (device memory) holds the outcome when it completes.
template <class Policy = default_policy>
cudaError_t encode_bucket(void* d_temp, std::size_t& temp_bytes, const device_bucket& bucket, const void* const* d_base,
                          const void* const* d_target, unsigned char* d_out, std::size_t out_capacity, encode_result* d_result,
                          const encode_config& cfg, cudaStream_t stream = nullptr) {
  return detail::dispatch_encode<Policy>(d_temp, temp_bytes, bucket, d_base, d_target, d_out, out_capacity, d_result, cfg, {stream},
                                         detail::encode_phase::both);
}

// As above, the passes after the one that reads the weights on `rest`, ordered after it by `handoff` (an event
// the caller owns; recorded on `stream`, waited for on `rest`). *d_result is written on `rest`: wait for `rest`.
// Give `rest` a greater priority than `stream` when several encodes run side by side on other streams: their
// read passes fill every SM, and a later pass of equal priority would queue behind all of them.
template <class Policy = default_policy>
cudaError_t encode_bucket(void* d_temp, std::size_t& temp_bytes, const device_bucket& bucket, const void* const* d_base,
                          const void* const* d_target, unsigned char* d_out, std::size_t out_capacity, encode_result* d_result,
                          const encode_config& cfg, cudaStream_t stream, cudaStream_t rest, cudaEvent_t handoff) {
  return detail::dispatch_encode<Policy>(d_temp, temp_bytes, bucket, d_base, d_target, d_out, out_capacity, d_result, cfg,
                                         {stream, rest, handoff}, detail::encode_phase::both);
}

// The first half of encode_bucket: reads the weights, and leaves in *d_result the frame size (status ok or
// scratch_too_small) so that a caller may size the output exactly (one sync) before encode_bucket_write.
template <class Policy = default_policy>
cudaError_t encode_bucket_detect(void* d_temp, std::size_t& temp_bytes, const device_bucket& bucket, const void* const* d_base,
                                 const void* const* d_target, encode_result* d_result, const encode_config& cfg,
                                 cudaStream_t stream = nullptr) {
  return detail::dispatch_encode<Policy>(d_temp, temp_bytes, bucket, d_base, d_target, nullptr, 0, d_result, cfg, {stream},
                                         detail::encode_phase::detect);
}

// The second half: writes the frame from the scratch that encode_bucket_detect left in d_temp. May be
// repeated (with a larger output) after output_too_small without reading the weights again, except for
// entropy, which reads the base again (through the pointers given to detect): keep it unchanged until then.
template <class Policy = default_policy>
cudaError_t encode_bucket_write(void* d_temp, std::size_t temp_bytes, const device_bucket& bucket, unsigned char* d_out,
                                std::size_t out_capacity, encode_result* d_result, const encode_config& cfg, cudaStream_t stream = nullptr) {
  if (d_temp == nullptr) return cudaErrorInvalidValue;
  return detail::dispatch_encode<Policy>(d_temp, temp_bytes, bucket, nullptr, nullptr, d_out, out_capacity, d_result, cfg, {stream},
                                         detail::encode_phase::write);
}

// After encode_bucket (or encode_bucket_detect) completed with status ok, and with d_temp untouched since:
// writes every changed element's target bits into the base that encode read (d_base's memory), so that the
// base holds the target without a dense copy: a sender's snapshot advance. Only changed elements are touched.
// With cfg.advance_base the encode already did it (in its one read of the tile): then this does nothing.
template <class Policy = default_policy>
cudaError_t encode_bucket_advance_base(void* d_temp, std::size_t temp_bytes, const device_bucket& bucket, const encode_config& cfg,
                                       cudaStream_t stream = nullptr) {
  return detail::dispatch_advance_base<Policy>(d_temp, temp_bytes, bucket, cfg, stream);
}

// After an encode with cfg.advance_base (any status; d_temp untouched since): puts back the base bits that its
// detect pass wrote over, so that the base is again what that encode read (before a retry with more scratch).
template <class Policy = default_policy>
cudaError_t encode_bucket_undo_advance(void* d_temp, std::size_t temp_bytes, const device_bucket& bucket, const encode_config& cfg,
                                       cudaStream_t stream = nullptr) {
  return detail::dispatch_advance_base<Policy>(d_temp, temp_bytes, bucket, cfg, stream, true);
}

// Largest frame an encode with cfg.max_changes changes can produce (to size d_out without a sync).
inline std::uint64_t max_frame_bytes(const device_bucket& b, const encode_config& cfg) {
  const std::uint64_t w = size_of(b.dtype);
  const std::uint64_t chunk = std::uint64_t{1} << cfg.log2_chunk;
  const std::uint64_t chunks = (b.numel + chunk - 1) / chunk;
  const std::uint64_t n = cfg.max_changes < b.numel ? cfg.max_changes : b.numel;
  const std::uint64_t nonempty = n < chunks ? n : chunks;
  const std::uint64_t vmax = cfg.mode == value_mode::absolute ? w : (8 * w + 6) / 7;
  std::uint64_t data = 0;
  static_assert(detail::device_encoder_count == 5, "sparsesync: encoder_table (codec/encoder_table.hpp) gained a row: add its largest data size to max_frame_bytes");
  switch (cfg.encoder) {
    case encoder_id::raw_index32: data = n * (4 + vmax); break;
    case encoder_id::bitmap: data = nonempty * ((chunk + 7) / 8) + n * vmax; break;
    case encoder_id::delta_varint: data = n * (5 + vmax); break;
    case encoder_id::rice: data = (n * (48 + 16 + 8 * w) + 7) / 8 + 3 * nonempty; break;
    case encoder_id::entropy: data = (n * (48 + 16 + 8 * w) + 7) / 8 + 4 * nonempty; break;  // rice's + a tag byte
  }
  return detail::frame_bytes_of(b.segment_count, static_cast<std::uint32_t>(chunks), data);
}

}  // namespace cuda
SPARSESYNC_NS_END