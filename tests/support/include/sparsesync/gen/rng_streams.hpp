// The generator's random numbers, specified exactly so another implementation (a CUDA kernel, a Python
// check) can reproduce them bit for bit.
//
//   word(seed, stream, tensor, index, step) = Philox4x32-10(ctr, key).v[index % 4]
//   ctr = { lo32(index / 4), hi32(index / 4) | stream << 24, tensor, step },  key = { lo32(seed), hi32(seed) }
//
// `tensor` is the tensor's position in the layout and `index` the element's position inside that tensor,
// so a tensor's stream does not depend on the sizes of the tensors before it. Streams that do not vary by
// step use step 0. A normal variate is normal_from_u32(word) (normal.hpp); a per-tensor scalar uses the
// tensor_param stream with index = 4 * parameter id, i.e. lane 0 of block `parameter id`.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/gen/normal.hpp>
#include <sparsesync/gen/philox.hpp>

#include <cstdint>

SPARSESYNC_NS_BEGIN
namespace gen {

// Part of the stream's definition: never renumber.
enum class rng_stream : std::uint32_t {
  init_value = 1,       // z of each element's initial value; for loaded weights, the dither position
  init_outlier = 2,     // word < outlier_fraction * 2^32 marks an outlier
  grad_persistent = 3,  // the element's persistent gradient direction (same every step)
  grad_noise = 4,       // the element's gradient noise at `step` (1-based)
  tensor_param = 5,     // per-tensor scalars, see tensor_param_id
};

enum class tensor_param_id : std::uint32_t {
  init_mean = 0,
  init_stddev = 1,
  grad_scale = 2,
  grad_step_scale = 3,  // drawn with the step number: the tensor's gradient-norm factor at that step
};

SPARSESYNC_HD constexpr philox_block rng_block(std::uint64_t seed, rng_stream stream, std::uint32_t tensor,
                                               std::uint64_t block, std::uint32_t step) {
  const philox_block ctr{{static_cast<std::uint32_t>(block),
                          (static_cast<std::uint32_t>(block >> 32) & 0x00FFFFFFu) | (static_cast<std::uint32_t>(stream) << 24),
                          tensor, step}};
  return philox4x32_10(ctr, philox_key{{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}});
}

SPARSESYNC_HD constexpr std::uint32_t rng_word(std::uint64_t seed, rng_stream stream, std::uint32_t tensor,
                                               std::uint64_t index, std::uint32_t step) {
  return rng_block(seed, stream, tensor, index >> 2, step).v[index & 3u];
}

// A standard normal per-tensor scalar.
inline double tensor_normal(std::uint64_t seed, std::uint32_t tensor, tensor_param_id id, std::uint32_t step = 0) {
  return normal_from_u32(rng_word(seed, rng_stream::tensor_param, tensor, 4ull * static_cast<std::uint32_t>(id), step));
}

}  // namespace gen
SPARSESYNC_NS_END
