// See frame_sync_tcp_codec.hpp.
#include "frame_sync_tcp_codec.hpp"

#include <sparsesync/bucketing/fixed_bytes.hpp>
#include <sparsesync/cuda/sync/frame_sync.cuh>

namespace sparsesync_test {

namespace sc = sparsesync::cuda;

std::unique_ptr<sc::any_frame_publisher> make_tcp_test_publisher(const sparsesync::model_layout& layout, sc::device_frame_channel_ref channel,
                                                                 cudaStream_t stream, cudaStream_t channel_stream) {
  sc::encode_config cfg;
  cfg.encoder = sparsesync::encoder_id::delta_varint;
  cfg.mode = sparsesync::value_mode::ulp;
  cfg.log2_chunk = 12;
  return sc::make_any_frame_publisher(layout, sparsesync::fixed_bytes{1u << 20}.plan(layout, cfg.log2_chunk), cfg, channel, stream, channel_stream);
}

std::unique_ptr<sc::any_frame_subscriber> make_tcp_test_subscriber(const sparsesync::model_layout& layout, sc::device_frame_channel_ref channel,
                                                                   cudaStream_t stream, cudaStream_t channel_stream, sc::frame_commit_mode mode) {
  return sc::make_any_frame_subscriber(layout, channel, stream, channel_stream, mode);
}

}  // namespace sparsesync_test
