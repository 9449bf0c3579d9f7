// The one sync engine's GPU backends compiled once, in sparsesync::cuda_engine (src/cuda_engine.cu): callable from
// any C++ file of a program that links that target, without nvcc and without compiling the codec again. The
// header-only route is device_engine.cuh (make_device_source / make_device_sink), for .cu files.
#pragma once

#include <sparsesync/cuda/sync/device_engine_options.hpp>

#include <memory>
#include <span>

SPARSESYNC_NS_BEGIN
namespace cuda {

// The GPU encoder behind a sync::device_source: sync::device_source<Sel, Policy>(compiled_device_encoder_backend(opt)).
std::unique_ptr<sync::device_encoder_backend> compiled_device_encoder_backend(const device_source_options& opt);

// The GPU applier behind a sync::device_sink over `weights` (device memory, layout order):
// sync::device_sink(compiled_device_applier_backend(layout, weights, opt)).
std::unique_ptr<sync::device_applier_backend> compiled_device_applier_backend(const model_layout& layout, std::span<const tensor_view> weights,
                                                                              const device_sink_options& opt);

}  // namespace cuda
SPARSESYNC_NS_END
