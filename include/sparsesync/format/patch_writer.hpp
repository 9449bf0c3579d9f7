// Host encoder of a whole patch: header, layout and metadata sections, then every bucket (FORMAT.md).
#pragma once

#include <sparsesync/bucketing/bucketing_policy.hpp>
#include <sparsesync/bucketing/fixed_bytes.hpp>
#include <sparsesync/format/bucket_writer.hpp>

SPARSESYNC_NS_BEGIN

struct patch_options {
  encode_options encode;
  std::uint64_t base_version = 0;
  std::uint64_t target_version = 1;
  bool include_layout = true;                 // receivers can then inspect names and check the layout themselves
  std::span<const unsigned char> metadata;    // opaque application bytes (the CLI stores the target file header)
};

// Encodes the change from `base` to `target` (both laid out as `layout`) with encoder selection Sel
// (an encoder, or best_of<...>) and bucketing policy P. Returns an error status on inconsistent inputs.
template <class Sel = auto_encoder, class P = fixed_bytes>
status try_encode_patch(const model_layout& layout, std::span<const const_tensor_view> base, std::span<const const_tensor_view> target,
                        const patch_options& opt, std::vector<unsigned char>& out, const P& policy = P{}) {
  static_assert(check_bucketing_policy<P>);
  static_assert(encoder_selection<Sel>, "sparsesync: Sel must be an encoder or sparsesync::best_of<encoders...>");
  if (auto s = check_views(layout, base, "base"); !s) return s;
  if (auto s = check_views(layout, target, "target"); !s) return s;
  if (opt.encode.log2_chunk < min_log2_chunk || opt.encode.log2_chunk > max_log2_chunk)
    return {errc::invalid_argument, "log2_chunk must lie in [8, 24]"};
  if (opt.metadata.size() > 0xFFFFFFFFu) return {errc::invalid_argument, "metadata larger than 4 GiB"};
  const auto plans = policy.plan(layout, opt.encode.log2_chunk);
  const auto layout_bytes = opt.include_layout ? layout.serialize() : std::vector<unsigned char>{};
  if (layout_bytes.size() > 0xFFFFFFFFu) return {errc::invalid_argument, "layout section larger than 4 GiB"};

  out.clear();
  out.resize(patch_header_bytes);
  out.insert(out.end(), layout_bytes.begin(), layout_bytes.end());
  out.insert(out.end(), opt.metadata.begin(), opt.metadata.end());
  patch_header h;
  h.flags = (opt.include_layout ? flag_layout_section : 0u) | (opt.metadata.empty() ? 0u : flag_metadata_section);
  h.bucket_count = static_cast<std::uint32_t>(plans.size());
  h.layout_hash = layout.hash();
  h.base_version = opt.base_version;
  h.target_version = opt.target_version;
  h.numel = layout.numel();
  h.layout_bytes = static_cast<std::uint32_t>(layout_bytes.size());
  h.metadata_bytes = static_cast<std::uint32_t>(opt.metadata.size());
  h.metadata_checksum = opt.metadata.empty() ? 0 : stream_hash(opt.metadata.data(), opt.metadata.size(), 0);
  for (std::size_t b = 0; b < plans.size(); ++b) {
    const auto [base_sum, target_sum] =
        encode_bucket<Sel>(layout, plans[b], static_cast<std::uint32_t>(b), base, target, opt.encode, out);
    h.base_checksum += base_sum;
    h.target_checksum += target_sum;
  }
  detail::write_patch_header(out.data(), h);
  return {};
}

template <class Sel = auto_encoder, class P = fixed_bytes>
std::vector<unsigned char> encode_patch(const model_layout& layout, std::span<const const_tensor_view> base,
                                        std::span<const const_tensor_view> target, const patch_options& opt = {}, const P& policy = P{}) {
  std::vector<unsigned char> out;
  throw_if_error(try_encode_patch<Sel, P>(layout, base, target, opt, out, policy));
  return out;
}

SPARSESYNC_NS_END
