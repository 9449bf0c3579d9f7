// CUDA runtime failures as exceptions, for the host-side layers (plans, channels, applications). Host-only:
// usable from translation units that a plain C++ compiler builds (for instance the ones that include
// Boost.Asio, which nvcc's front end does not accept).
#pragma once

#include <sparsesync/core/config.hpp>

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

SPARSESYNC_NS_BEGIN
namespace cuda {

class cuda_error : public std::runtime_error {
 public:
  cuda_error(cudaError_t code, const std::string& what)
      : std::runtime_error("sparsesync cuda: " + what + ": " + cudaGetErrorString(code)), code_(code) {}
  [[nodiscard]] cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

inline void throw_on_cuda_error(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw cuda_error(e, what);
}

}  // namespace cuda
SPARSESYNC_NS_END
