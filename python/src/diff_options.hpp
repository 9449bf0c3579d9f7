// The options of sparsesync.diff, checked once for the host codec (module.cpp) and the GPU codec (gpu_codec.cpp).
#pragma once

#include <sparsesync/sparsesync.hpp>

#include <string>

namespace sparsesync::python {

inline patch_options diff_options(const std::string& values, std::uint64_t base_version, std::uint64_t target_version,
                                  std::uint64_t bucket_bytes, unsigned chunk_log2) {
  const auto mode = parse_value_mode(values);
  if (!mode) throw error(errc::invalid_argument, "values must be 'ulp' or 'absolute', not '" + values + "'");
  if (bucket_bytes == 0) throw error(errc::invalid_argument, "bucket_bytes must be positive");
  if (chunk_log2 < min_log2_chunk || chunk_log2 > max_log2_chunk) throw error(errc::invalid_argument, "chunk_log2 (log2_chunk) must lie in [8, 24]");
  patch_options po;
  po.encode.mode = *mode;
  po.encode.log2_chunk = chunk_log2;
  po.base_version = base_version;
  po.target_version = target_version;
  return po;
}

// What auto weighs entropy against (format/link_cost.hpp): the link's speed (0: not stated) and where the
// receivers decode.
inline link_cost link_options(double gbps, const std::string& receivers) {
  if (!(gbps >= 0)) throw error(errc::invalid_argument, "link_gbps must be 0 (not stated) or positive");
  const auto walk = link_cost::receivers_named(receivers);
  if (!walk) throw error(errc::invalid_argument, "receivers must be 'gpu' or 'cpu', not '" + receivers + "'");
  return link_cost::gigabits(gbps, *walk);
}

}  // namespace sparsesync::python
