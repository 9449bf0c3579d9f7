// A stream whose work the GPU schedules before that of ordinary streams: for the frames' way out and in (the
// device links' sends and receives, the trainer's frame copies). Those are a few small kernels and copies beside
// the encode and apply passes, whose many blocks fill every SM: at equal priority a send queued behind them waits
// until their last blocks have been handed out. On two H200s (session 12, call A: engine_nccl_bench's timeline)
// a version's last frame left the trainer 2.2 ms after it was handed to the link, behind the snapshot advance.
// Plain C++: no nvcc needed.
#pragma once

#include <sparsesync/core/config.hpp>

#include <cuda_runtime_api.h>

SPARSESYNC_NS_BEGIN
namespace cuda {

// A non-blocking stream of the current device at its greatest priority.
inline cudaError_t create_urgent_stream(cudaStream_t* stream) noexcept {
  int least = 0, greatest = 0;
  if (cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest); e != cudaSuccess) return e;
  return cudaStreamCreateWithPriority(stream, cudaStreamNonBlocking, greatest);
}

}  // namespace cuda
SPARSESYNC_NS_END
