// The nvcc-compiled half of frame_sync_tcp_test (which includes Boost.Asio, so a plain C++ compiler builds
// it): a publisher and subscribers behind the handles of sparsesync/cuda/sync/frame_channel.hpp.
#pragma once

#include <sparsesync/core/layout.hpp>
#include <sparsesync/cuda/sync/frame_channel.hpp>

#include <cuda_runtime_api.h>

#include <memory>

namespace sparsesync_test {

// delta_varint with ULP values, buckets of 1 MiB, chunks of 2^12 elements.
std::unique_ptr<sparsesync::cuda::any_frame_publisher> make_tcp_test_publisher(const sparsesync::model_layout& layout,
                                                                               sparsesync::cuda::device_frame_channel_ref channel,
                                                                               cudaStream_t stream, cudaStream_t channel_stream);

std::unique_ptr<sparsesync::cuda::any_frame_subscriber> make_tcp_test_subscriber(const sparsesync::model_layout& layout,
                                                                                 sparsesync::cuda::device_frame_channel_ref channel,
                                                                                 cudaStream_t stream, cudaStream_t channel_stream,
                                                                                 sparsesync::cuda::frame_commit_mode mode);

}  // namespace sparsesync_test
