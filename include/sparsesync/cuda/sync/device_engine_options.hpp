// Options of the one sync engine's GPU backends (device_engine.cuh, device_engine_compiled.hpp): host code, so
// that a C++ file can configure backends that a .cu file (or sparsesync::cuda_engine) builds.
#pragma once

#include <sparsesync/cuda/sync/frame_channel.hpp>
#include <sparsesync/sync/device_weights.hpp>

#include <cuda_runtime_api.h>

SPARSESYNC_NS_BEGIN
namespace cuda {

struct device_source_options {
  cudaStream_t stream = nullptr;  // orders the encode after the caller's last write of the weights
  sync::snapshot_place snapshot = sync::snapshot_place::device;
  double expected_density = 0.02;  // initial scratch per bucket, in changes per element (grows on demand)
  // Keep each version's bucket frames in GPU memory (stream-ordered allocations, freed with the last session and
  // the history entry that hold them) so that receivers on a device link (nccl_link) get them GPU to GPU;
  // receivers on host links get a host copy made once per frame. Off: frames come to the host as they are
  // encoded. A full transfer's frames always come through the host (a model-sized stream is not kept on the GPU).
  bool frames_on_device = false;
  // Streams the buckets are encoded on (`stream` and lanes - 1 of the source's own), as many buckets enqueued
  // ahead of the one the host waits for. Each bucket's encode ends in short kernels bound by latency, not
  // bandwidth (the sequential coders run a thread per chunk): with several buckets in flight those tails
  // overlap the next buckets' passes over the weights instead of adding a fixed time per bucket. 2 is the
  // earlier double buffering.
  unsigned encode_lanes = 4;
  // The snapshot advance inside each bucket's encode (encode_config::advance_base: the detect pass, which reads both
  // copies anyway, writes the target's changed sectors): no second pass over the changes, but the detect pass's
  // scattered sector writes slow its reads (14.0 instead of ~10.4 ms per 7B version on an H100). Off (always for
  // a snapshot in host memory or entropy): a pass over each bucket's changes writes them (deferred_advance).
  bool fused_advance = false;
  // Without the fused advance: each bucket's pass over its changes waits until every bucket is encoded, then runs
  // while the last frames travel and the receivers verify and commit (the trainer's GPU is idle then), and the
  // sender waits for it before publish() returns (version_source requirement 6). Off: each bucket's pass right
  // after its encode, beside the next buckets' encodes.
  bool deferred_advance = true;
};

struct device_sink_options {
  cudaStream_t stream = nullptr;
  frame_commit_mode commit = frame_commit_mode::atomic;
  // Streams of the sink's own on which consecutive buckets of a patch verify side by side (apply_plan::set_lanes);
  // only each bucket's short join and its commit stay in order on `stream`. 1: every pass on `stream` (the
  // earlier behaviour). Full transfers always apply on `stream`.
  unsigned verify_lanes = 4;
};

}  // namespace cuda
SPARSESYNC_NS_END
