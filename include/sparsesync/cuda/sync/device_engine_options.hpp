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
};

struct device_sink_options {
  cudaStream_t stream = nullptr;
  frame_commit_mode commit = frame_commit_mode::atomic;
};

}  // namespace cuda
SPARSESYNC_NS_END
