// See gpu_link_codec.hpp.
#include "gpu_link_codec.hpp"

#include <sparsesync/bucketing/fixed_bytes.hpp>
#include <sparsesync/cuda/sync/frame_sync.cuh>

namespace gpu_link {

namespace ss = sparsesync;
namespace sc = sparsesync::cuda;

std::unique_ptr<sc::any_frame_publisher> make_publisher(const ss::model_layout& layout, std::uint64_t bucket_bytes, ss::encoder_id encoder,
                                                        sc::device_frame_channel_ref channel, cudaStream_t stream, cudaStream_t channel_stream,
                                                        double expected_density) {
  sc::encode_config cfg;
  cfg.encoder = encoder;
  cfg.mode = ss::value_mode::ulp;
  return sc::make_any_frame_publisher(layout, ss::fixed_bytes{bucket_bytes}.plan(layout, cfg.log2_chunk), cfg, channel, stream, channel_stream,
                                      expected_density);
}

std::unique_ptr<sc::any_frame_subscriber> make_subscriber(const ss::model_layout& layout, sc::device_frame_channel_ref channel, cudaStream_t stream,
                                                          cudaStream_t channel_stream, sc::frame_commit_mode mode, std::uint64_t held_checksum) {
  return sc::make_any_frame_subscriber(layout, channel, stream, channel_stream, mode, held_checksum);
}

}  // namespace gpu_link
