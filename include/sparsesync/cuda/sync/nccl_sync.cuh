// Sparse sync over NCCL for weights that live on GPUs: frame_publisher / frame_subscriber (frame_sync.cuh) on an
// nccl_broadcast_channel, one sender to every other rank. Needs sparsesync::cuda and sparsesync::nccl.
#pragma once

#include <sparsesync/cuda/sync/frame_sync.cuh>
#include <sparsesync/transport/nccl.hpp>

SPARSESYNC_NS_BEGIN
namespace cuda {

static_assert(check_device_frame_channel<nccl_broadcast_channel>);

using nccl_publisher = frame_publisher<nccl_broadcast_channel>;
using nccl_subscriber = frame_subscriber<nccl_broadcast_channel>;
using nccl_publish_stats = frame_publish_stats;
using nccl_received_version = frame_received_version;

}  // namespace cuda
SPARSESYNC_NS_END
