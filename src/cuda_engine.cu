// sparsesync::cuda_engine: the one sync engine's GPU backends (device_engine.cuh) compiled once, for programs that
// create them from plain C++ files (device_engine_compiled.hpp).
#include <sparsesync/cuda/sync/device_engine.cuh>
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>

SPARSESYNC_NS_BEGIN
namespace cuda {

std::unique_ptr<sync::device_encoder_backend> compiled_device_encoder_backend(const device_source_options& opt) {
  return make_device_encoder_backend(opt);
}

std::unique_ptr<sync::device_applier_backend> compiled_device_applier_backend(const model_layout& layout, std::span<const tensor_view> weights,
                                                                              const device_sink_options& opt) {
  return make_device_applier_backend(layout, weights, opt);
}

}  // namespace cuda
SPARSESYNC_NS_END
