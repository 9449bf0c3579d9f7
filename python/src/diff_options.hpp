// The options the Python entry points check once: sparsesync.diff's for the host codec (module.cpp) and the GPU
// codec (gpu_codec.cpp), the link's (diff and the publishers) and an encoder's name.
#pragma once

#include <sparsesync/sparsesync.hpp>

#include <optional>
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

// An encoder named by the caller: an encoder_table name or alias, or "auto" (none: the caller's auto).
inline std::optional<encoder_id> named_encoder(const std::string& name) {
  if (name == "auto") return std::nullopt;
  const auto id = parse_encoder_name(name);
  if (!id) throw error(errc::invalid_argument, "unknown encoder '" + name + "' (" + encoder_names_list() + " or auto)");
  return id;
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
