// Makes a CUDA device current for a scope and restores the caller's. The engine's backends, the device links and
// the Python layer are called on whichever thread runs them (publish() on the trainer's, a session's, an
// engine's worker thread), whose current device may be another GPU than the one their memory lives on.
// Plain C++: no nvcc needed.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/cuda/cuda_error.hpp>

#include <cuda_runtime_api.h>

#include <new>

SPARSESYNC_NS_BEGIN
namespace cuda {

class device_scope {
 public:
  // Throws cuda_error when `device` cannot be made current.
  explicit device_scope(int device) : device_scope(device, std::nothrow) { throw_on_cuda_error(status_, "cudaSetDevice"); }
  // For paths that must not throw (aborts, destructors) or report failures their own way: status() says.
  device_scope(int device, std::nothrow_t) noexcept {
    status_ = cudaGetDevice(&previous_);
    if (status_ != cudaSuccess) previous_ = -1;
    if (previous_ != device) status_ = cudaSetDevice(device);
    else previous_ = -1;
  }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;
  ~device_scope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  [[nodiscard]] cudaError_t status() const noexcept { return status_; }

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

}  // namespace cuda
SPARSESYNC_NS_END
