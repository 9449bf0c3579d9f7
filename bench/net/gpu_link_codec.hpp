// The GPU side of gpu_link_bench, compiled by nvcc in gpu_link_codec.cu: the benchmark itself includes Boost.Asio,
// which nvcc's front end does not accept, so it reaches the publisher and subscriber through the handles of
// sparsesync/cuda/sync/frame_channel.hpp.
#pragma once

#include <sparsesync/codec/registry.hpp>
#include <sparsesync/core/layout.hpp>
#include <sparsesync/cuda/sync/frame_channel.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

namespace gpu_link {

// Buckets of `bucket_bytes` (fixed_bytes), `encoder` with ULP values, default chunks.
std::unique_ptr<sparsesync::cuda::any_frame_publisher> make_publisher(const sparsesync::model_layout& layout, std::uint64_t bucket_bytes,
                                                                      sparsesync::encoder_id encoder,
                                                                      sparsesync::cuda::device_frame_channel_ref channel, cudaStream_t stream,
                                                                      cudaStream_t channel_stream, double expected_density);

std::unique_ptr<sparsesync::cuda::any_frame_subscriber> make_subscriber(const sparsesync::model_layout& layout,
                                                                        sparsesync::cuda::device_frame_channel_ref channel, cudaStream_t stream,
                                                                        cudaStream_t channel_stream, sparsesync::cuda::frame_commit_mode mode,
                                                                        std::uint64_t held_checksum);

}  // namespace gpu_link
