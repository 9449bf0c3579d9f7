// Host encoder of a whole patch: header, layout and metadata sections, then every bucket (FORMAT.md).
#pragma once

#include <sparsesync/bucketing/bucketing_policy.hpp>
#include <sparsesync/bucketing/fixed_bytes.hpp>
#include <sparsesync/format/bucket_writer.hpp>

#include <cstring>
#include <span>
#include <vector>

SPARSESYNC_NS_BEGIN

struct patch_options {
  encode_options encode;
  std::uint64_t base_version = 0;
  std::uint64_t target_version = 1;
  bool include_layout = true;                 // receivers can then inspect names and check the layout themselves
  std::span<const unsigned char> metadata;    // opaque application bytes (the CLI stores the target file header)
};

namespace detail {
// The header of a patch over `bucket_count` buckets, with its whole-model checksums still zero: what every
// patch writer (host patch_encoder, the GPU sync source) puts first. `layout_bytes`: the layout section's size.
inline patch_header patch_header_for(const model_layout& layout, std::size_t bucket_count, const patch_options& opt, bool from_zero,
                                     std::size_t layout_bytes) {
  if (opt.metadata.size() > 0xFFFFFFFFu) throw error(errc::invalid_argument, "metadata larger than 4 GiB");
  patch_header h;
  h.flags = (opt.include_layout ? flag_layout_section : 0u) | (opt.metadata.empty() ? 0u : flag_metadata_section) |
            (from_zero ? flag_from_zero : 0u);
  h.bucket_count = static_cast<std::uint32_t>(bucket_count);
  h.layout_hash = layout.hash();
  h.base_version = opt.base_version;
  h.target_version = opt.target_version;
  h.numel = layout.numel();
  h.layout_bytes = static_cast<std::uint32_t>(layout_bytes);
  h.metadata_bytes = static_cast<std::uint32_t>(opt.metadata.size());
  h.metadata_checksum = opt.metadata.empty() ? 0 : stream_hash(opt.metadata.data(), opt.metadata.size(), 0);
  return h;
}

// Appends a patch's prologue: the header, then the layout and metadata sections.
inline void write_patch_prologue(std::vector<unsigned char>& out, const patch_header& h, std::span<const unsigned char> layout_bytes,
                                 std::span<const unsigned char> metadata) {
  // (Sized once and copied in place: GCC 12 warned of a false -Wstringop-overread on vector::insert here.)
  const std::size_t at = out.size();
  out.resize(at + patch_header_bytes + layout_bytes.size() + metadata.size());
  unsigned char* p = out.data() + at;
  write_patch_header(p, h);
  p += patch_header_bytes;
  if (!layout_bytes.empty()) std::memcpy(p, layout_bytes.data(), layout_bytes.size());
  if (!metadata.empty()) std::memcpy(p + layout_bytes.size(), metadata.data(), metadata.size());
}
}  // namespace detail

// Encodes a patch one bucket at a time, for senders that transmit bucket i while encoding bucket i + 1.
// The prologue goes first with the whole-model checksums still zero; final_header() has them once every
// bucket is encoded. A base view whose data is null stands for an all-zero tensor (a full transfer).
template <class Sel = auto_encoder, class P = fixed_bytes>
class patch_encoder {
  static_assert(detail::check_encoder_selection_form<Sel>);  // encode_patch also requires built-in encoders
  static_assert(check_bucketing_policy<P>);

 public:
  patch_encoder(const model_layout& layout, std::span<const const_tensor_view> base, std::span<const const_tensor_view> target,
                const patch_options& opt, const P& policy = P{})
      : layout_(layout), base_(base), target_(target), opt_(opt) {
    throw_if_error(check_views(layout, base, "base", /*allow_zero=*/true));
    throw_if_error(check_views(layout, target, "target"));
    if (opt.encode.log2_chunk < min_log2_chunk || opt.encode.log2_chunk > max_log2_chunk)
      throw error(errc::invalid_argument, "log2_chunk must lie in [8, 24]");
    plans_ = policy.plan(layout, opt.encode.log2_chunk);
    if (opt.include_layout) layout_bytes_ = layout.serialize();
    bool from_zero = !base.empty();
    for (const auto& v : base) from_zero = from_zero && v.data == nullptr;
    header_ = detail::patch_header_for(layout, plans_.size(), opt, from_zero, layout_bytes_.size());
  }

  [[nodiscard]] std::size_t bucket_count() const { return plans_.size(); }
  [[nodiscard]] const std::vector<bucket_plan>& plans() const { return plans_; }

  // Appends the header (checksums zero unless every bucket is already encoded) and the sections.
  void prologue(std::vector<unsigned char>& out) const { detail::write_patch_prologue(out, header_, layout_bytes_, opt_.metadata); }

  // A sender that remembers the per-bucket target checksums of the version it encoded last (the same plan)
  // passes them here: the base is then compared, not hashed, which makes encoding several times cheaper.
  // The values are trusted: they are what receivers will check their own copies against.
  void use_known_base_checksums(std::vector<std::uint64_t> per_bucket) {
    if (per_bucket.size() != plans_.size()) throw error(errc::invalid_argument, "known base checksums: one per bucket needed");
    known_base_ = std::move(per_bucket);
  }

  // Writable views of the memory the base views point to (a sender's snapshot of what it sent last): each
  // encoded bucket's changed elements are then written there, so that it holds the target once every bucket
  // is encoded, without a copy of the whole model. Until then it is a mix of both: a caller whose encoding
  // fails part-way must not use it as either.
  void advance_base(std::span<const tensor_view> base_storage) {
    throw_if_error(check_views(layout_, base_storage, "base storage"));
    for (std::size_t i = 0; i < base_storage.size(); ++i)
      if (base_storage[i].data != base_[i].data) throw error(errc::invalid_argument, "base storage must be the base's memory");
    advance_ = base_storage;
  }

  // Appends bucket `next_bucket()`'s frame; buckets are encoded in order.
  void encode_next(std::vector<unsigned char>& out) {
    if (next_ >= plans_.size()) throw error(errc::invalid_argument, "every bucket is already encoded");
    const std::uint64_t* known = known_base_.empty() ? nullptr : &known_base_[next_];
    const auto [b, t] =
        encode_bucket<Sel>(layout_, plans_[next_], static_cast<std::uint32_t>(next_), base_, target_, opt_.encode, out, known, advance_);
    header_.base_checksum += b;
    header_.target_checksum += t;
    bucket_targets_.push_back(t);
    ++next_;
  }

  // Target checksums of the buckets encoded so far, in order.
  [[nodiscard]] const std::vector<std::uint64_t>& bucket_target_checksums() const { return bucket_targets_; }
  [[nodiscard]] std::size_t next_bucket() const { return next_; }

  // The patch header with its whole-model checksums; valid once every bucket is encoded.
  [[nodiscard]] const patch_header& header() const { return header_; }
  void final_header(unsigned char* out) const {
    if (next_ != plans_.size()) throw error(errc::invalid_argument, "final_header before every bucket is encoded");
    detail::write_patch_header(out, header_);
  }

 private:
  const model_layout& layout_;
  std::span<const const_tensor_view> base_, target_;
  std::span<const tensor_view> advance_;
  patch_options opt_;
  std::vector<bucket_plan> plans_;
  std::vector<unsigned char> layout_bytes_;
  patch_header header_;
  std::vector<std::uint64_t> known_base_, bucket_targets_;
  std::size_t next_ = 0;
};

// Encodes the change from `base` to `target` (both laid out as `layout`) with encoder selection Sel
// (an encoder, or best_of<...>) and bucketing policy P, as one contiguous patch.
template <class Sel = auto_encoder, class P = fixed_bytes>
std::vector<unsigned char> encode_patch(const model_layout& layout, std::span<const const_tensor_view> base,
                                        std::span<const const_tensor_view> target, const patch_options& opt = {}, const P& policy = P{}) {
  static_assert(check_encoder_selection<Sel>);
  static_assert(check_bucketing_policy<P>);
  patch_encoder<Sel, P> enc(layout, base, target, opt, policy);
  std::vector<unsigned char> out;
  enc.prologue(out);
  while (enc.next_bucket() < enc.bucket_count()) enc.encode_next(out);
  enc.final_header(out.data());
  return out;
}

// The non-throwing form.
template <class Sel = auto_encoder, class P = fixed_bytes>
status try_encode_patch(const model_layout& layout, std::span<const const_tensor_view> base, std::span<const const_tensor_view> target,
                        const patch_options& opt, std::vector<unsigned char>& out, const P& policy = P{}) {
  static_assert(check_encoder_selection<Sel>);
  static_assert(check_bucketing_policy<P>);
  try {
    out = encode_patch<Sel, P>(layout, base, target, opt, policy);
    return {};
  } catch (const error& e) {
    return {e.code(), e.what()};
  }
}

SPARSESYNC_NS_END

// ---- The compiled part (docs/BUILD.md) ----
// Encoding a bucket with every run-time choice (auto and each built-in encoder) is most of the compile time
// of a program that encodes. The optional sparsesync::compiled library instantiates these once; the
// translation units that link it get SPARSESYNC_COMPILED_LIBRARY defined and, through the declarations
// below, reuse its instantiations instead of compiling their own. Header-only use is unchanged.
// SPEC is `extern` (a declaration) or empty (the library's definition, src/compiled.cpp).
#define SPARSESYNC_DETAIL_ENCODE_INSTANTIATION(SPEC, Sel)                                                                    \
  SPEC template std::pair<std::uint64_t, std::uint64_t> encode_bucket<Sel>(                                                  \
      const model_layout&, const bucket_plan&, std::uint32_t, std::span<const const_tensor_view>,                            \
      std::span<const const_tensor_view>, const encode_options&, std::vector<unsigned char>&, const std::uint64_t*,          \
      std::span<const tensor_view>);                                                                                          \
  SPEC template std::vector<unsigned char> encode_patch<Sel, fixed_bytes>(const model_layout&, std::span<const const_tensor_view>, \
                                                                         std::span<const const_tensor_view>, const patch_options&, \
                                                                         const fixed_bytes&);
#define SPARSESYNC_DETAIL_ENCODE_INSTANTIATIONS(SPEC)       \
  SPARSESYNC_DETAIL_ENCODE_INSTANTIATION(SPEC, auto_encoder) \
  SPARSESYNC_DETAIL_ENCODE_INSTANTIATION(SPEC, rice)         \
  SPARSESYNC_DETAIL_ENCODE_INSTANTIATION(SPEC, delta_varint) \
  SPARSESYNC_DETAIL_ENCODE_INSTANTIATION(SPEC, bitmap)       \
  SPARSESYNC_DETAIL_ENCODE_INSTANTIATION(SPEC, raw_index32) \
  SPARSESYNC_DETAIL_ENCODE_INSTANTIATION(SPEC, entropy)

SPARSESYNC_NS_BEGIN
// A new built-in encoder still works without a line above (it is then instantiated where used); this keeps the
// list complete so that the compiled part covers every run-time choice.
static_assert(builtin_encoders::size == 5, "sparsesync: list the new encoder in SPARSESYNC_DETAIL_ENCODE_INSTANTIATIONS");
#ifdef SPARSESYNC_COMPILED_LIBRARY
SPARSESYNC_DETAIL_ENCODE_INSTANTIATIONS(extern)
#endif
SPARSESYNC_NS_END
