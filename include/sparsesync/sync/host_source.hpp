// host_source<Sel, Policy>: the version_source for weights in host memory. Encodes on the CPU with encoder
// selection Sel (patch_encoder) and keeps the snapshot in host memory, brought to each new version by the
// encoder itself (the changed elements it found are written into the snapshot bucket by bucket: no copy of
// the model after the first version).
#pragma once

#include <sparsesync/format/patch_writer.hpp>
#include <sparsesync/sync/snapshot.hpp>
#include <sparsesync/sync/version_source.hpp>

#include <chrono>
#include <optional>

SPARSESYNC_NS_BEGIN
namespace sync {

template <class Sel = auto_encoder, class Policy = fixed_bytes>
class host_source {
  static_assert(check_encoder_selection<Sel>);
  static_assert(check_bucketing_policy<Policy>);
  using clock = std::chrono::steady_clock;

 public:
  host_source() = default;

  void prepare(const model_layout& layout, const encode_options& enc, const Policy& policy) {
    layout_ = &layout;
    enc_ = enc;
    policy_.emplace(policy);
    snapshot_.emplace(layout);
  }

  [[nodiscard]] bool has_version() const { return has_version_; }

  source_totals encode_version(std::span<const const_tensor_view> weights, const patch_options& po_in, version_stream& out) {
    throw_if_error(check_views(*layout_, weights, "weights"));
    const auto start = clock::now();
    patch_options po = po_in;
    po.encode = enc_;
    // With a version in the snapshot, the encoder writes each bucket's changes into it: it becomes the new
    // version without a copy of the whole model (a full copy costs more than encoding a sparse update).
    const bool in_place = has_version_;
    source_totals totals;
    try {
      const auto base = snapshot_->views();
      if (in_place) {
        // Our own snapshot's bucket checksums are known from the last version: compare it, do not rehash it.
        const auto storage = snapshot_->mutable_views();
        totals.changed = encode<Sel>(base, weights, po, out, bucket_checksums_.empty() ? nullptr : &bucket_checksums_, storage);
      } else {
        po.encode.mode = value_mode::absolute;  // from zero: a full transfer, see dense_transfer
        totals.changed = encode<dense_transfer>(base, weights, po, out, nullptr, {});
      }
    } catch (...) {
      bucket_checksums_.clear();
      out.finish(false);
      // In place, part of the snapshot may hold the new weights: it is no version any more.
      invalidate();
      throw;
    }
    totals.encode_seconds = std::chrono::duration<double>(clock::now() - start).count();
    if (!in_place) {
      const auto copy_start = clock::now();
      snapshot_->assign(weights);  // the first version: the one dense copy
      totals.snapshot_seconds = std::chrono::duration<double>(clock::now() - copy_start).count();
    }
    has_version_ = true;
    return totals;
  }

  void encode_full(const patch_options& po_in, version_stream& out) {
    patch_options po = po_in;
    po.encode = {value_mode::absolute, enc_.log2_chunk};
    std::vector<const_tensor_view> zero = snapshot_->views();
    for (auto& v : zero) v.data = nullptr;
    try {
      (void)encode<dense_transfer>(zero, snapshot_->views(), po, out, nullptr, {}, /*record_targets=*/false);
    } catch (...) {
      out.finish(false);
      throw;
    }
  }

  void invalidate() {
    has_version_ = false;
    bucket_checksums_.clear();
    if (snapshot_) snapshot_->invalidate();
  }

 private:
  // Full transfers (from the all-zero model) are dense: a bitmap of the nonzero elements and their raw bits
  // (absolute values), which costs a pass over the model and ~1/16 to 1/32 more bytes than it, where entropy
  // coding (auto's trial of every encoder on every chunk) would cost seconds per GB for a few % less.
  using dense_transfer = bitmap;

  // Encodes into `out`; with `known_base` (per-bucket base checksums) the base is compared, not hashed; the
  // per-bucket target checksums are kept for the next version; `advance_base` (the base's memory) is brought
  // to the target bucket by bucket. Returns the changed count.
  template <class S>
  std::uint64_t encode(std::span<const const_tensor_view> base, std::span<const const_tensor_view> target, const patch_options& po,
                       version_stream& out, const std::vector<std::uint64_t>* known_base, std::span<const tensor_view> advance_base,
                       bool record_targets = true) {
    patch_encoder<S, Policy> enc(*layout_, base, target, po, *policy_);
    if (known_base && known_base->size() == enc.bucket_count()) enc.use_known_base_checksums(*known_base);
    if (!advance_base.empty()) enc.advance_base(advance_base);
    stream_writer w(out);
    std::vector<unsigned char> bytes;
    enc.prologue(bytes);
    w.prologue(bytes);
    while (enc.next_bucket() < enc.bucket_count()) {
      bytes.clear();
      enc.encode_next(bytes);
      (void)w.bucket(bytes);
    }
    unsigned char final_header[patch_header_bytes];
    enc.final_header(final_header);
    if (record_targets) bucket_checksums_ = enc.bucket_target_checksums();
    w.end(final_header, enc.header().target_checksum);
    return w.changed();
  }

  const model_layout* layout_ = nullptr;
  encode_options enc_;
  std::optional<Policy> policy_;
  std::optional<host_snapshot> snapshot_;
  std::vector<std::uint64_t> bucket_checksums_;  // per-bucket content checksums of the snapshot
  bool has_version_ = false;
};

}  // namespace sync
SPARSESYNC_NS_END
