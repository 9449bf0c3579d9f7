// host_source<Sel, Policy>: the version_source for weights in host memory. Encodes on the CPU with encoder
// selection Sel (patch_encoder) and keeps the snapshot in host memory, brought to each new version by the
// encoder itself (the changed elements it found are written into the snapshot bucket by bucket: no copy of
// the model after the first version). Full transfers are dense bitmap frames (format/dense_bitmap.hpp) made from
// the snapshot one bucket at a time with the checksums it recorded: the sender sends them as its sessions need
// them (capture(), full_transfer_frames(), encode_full_bucket()), so no model-sized stream sits beside the snapshot.
#pragma once

#include <sparsesync/format/dense_bitmap.hpp>
#include <sparsesync/format/patch_writer.hpp>
#include <sparsesync/sync/snapshot.hpp>
#include <sparsesync/sync/version_source.hpp>

#include <chrono>
#include <memory>
#include <mutex>
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
  // With one encoder chosen at run time instead of Sel (nullopt: Sel): any built-in encoder, for callers that
  // take it from a name (the Python Publisher's `encoder=`) without one sender type per encoder.
  explicit host_source(std::optional<encoder_id> run_time_encoder) : encoder_(run_time_encoder) {
    if (encoder_) detail::require_builtin_encoder(*encoder_, "host_source");
  }

  // The encoder chosen at run time; nullopt when Sel chooses.
  [[nodiscard]] std::optional<encoder_id> encoder() const { return encoder_; }

  void prepare(const model_layout& layout, const encode_options& enc, const Policy& policy) {
    layout_ = &layout;
    enc_ = enc;
    policy_.emplace(policy);
    snapshot_.emplace(layout);
    plans_ = policy_->plan(layout, enc.log2_chunk);
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
        const auto* known = bucket_checksums_.empty() ? nullptr : &bucket_checksums_;
        if (encoder_)
          (void)visit_encoder(*encoder_, [&]<class E>(E) { totals.changed = encode<E>(base, weights, po, out, known, storage); });
        else
          totals.changed = encode<Sel>(base, weights, po, out, known, storage);
      } else {
        totals.changed = encode_dense(weights, po, out, /*known=*/false);  // from zero: a full transfer
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

  void encode_full(const patch_options& po, version_stream& out) {
    if (!has_version_) throw error(errc::invalid_argument, "encode_full: the snapshot holds no version");
    try {
      (void)encode_dense(snapshot_->views(), po, out, /*known=*/true);
    } catch (...) {
      out.finish(false);
      throw;
    }
  }

  // ---- Full transfers bucket by bucket (sync::sender's path for sources that have these) ----

  struct capture_report {
    source_totals totals;
    std::uint64_t payload_bytes = 0;    // of a full transfer of it (full_transfer_frames + every bucket)
    std::uint64_t target_checksum = 0;
  };

  // Makes `weights` the snapshot's version without encoding anything (the first version: from zero, every
  // receiver needs a full transfer of it, made bucket by bucket as they take it). One copy and one hash pass.
  capture_report capture(std::span<const const_tensor_view> weights, const patch_options& po) {
    throw_if_error(check_views(*layout_, weights, "weights"));
    const auto start = clock::now();
    capture_report rep;
    invalidate();
    snapshot_->assign(weights);
    rep.totals.snapshot_seconds = std::chrono::duration<double>(clock::now() - start).count();
    const auto views = snapshot_->views();
    std::vector<std::uint64_t> targets, zeros;
    rep.payload_bytes = prologue_bytes(po);
    for (const auto& plan : plans_) {
      const auto sum = visit_word(plan.dtype, [&]<class W>() { return sparsesync::detail::summarize_dense_bucket<W>(*layout_, plan, views, enc_.log2_chunk); });
      targets.push_back(sum.sums.target);
      zeros.push_back(sum.sums.base);
      rep.payload_bytes += sum.frame_bytes;
      rep.totals.changed += sum.changed;
      rep.target_checksum += sum.sums.target;
    }
    bucket_checksums_ = std::move(targets);
    zero_checksums_ = std::move(zeros);
    has_version_ = true;
    rep.totals.encode_seconds = std::chrono::duration<double>(clock::now() - start).count();
    return rep;
  }

  struct full_frames {
    std::vector<unsigned char> prologue;      // the version_begin body (header with zero whole-model checksums)
    std::vector<unsigned char> final_header;  // the version_end body
    std::size_t buckets = 0;
    std::uint64_t target_checksum = 0;
  };

  // The frames around a full transfer of the snapshot's version (callers hold the snapshot still).
  full_frames full_transfer_frames(const patch_options& po) {
    if (!has_version_) throw error(errc::invalid_argument, "full transfer: the snapshot holds no version");
    ensure_full_checksums();
    full_frames f;
    patch_header h = header_for_full(po);
    std::vector<unsigned char> layout_bytes;
    if (po.include_layout) layout_bytes = layout_->serialize();
    sparsesync::detail::write_patch_prologue(f.prologue, h, layout_bytes, po.metadata);
    for (std::size_t i = 0; i < plans_.size(); ++i) {
      h.base_checksum += zero_checksums_[i];
      h.target_checksum += bucket_checksums_[i];
    }
    f.final_header.resize(patch_header_bytes);
    sparsesync::detail::write_patch_header(f.final_header.data(), h);
    f.buckets = plans_.size();
    f.target_checksum = h.target_checksum;
    return f;
  }

  // Bucket i of a full transfer of the snapshot's version as a `bucket` message (callers hold the snapshot
  // still; concurrent calls are fine).
  [[nodiscard]] std::shared_ptr<const std::vector<std::byte>> encode_full_bucket(std::size_t i) const {
    if (!has_version_ || i >= plans_.size() || bucket_checksums_.size() != plans_.size() || zero_checksums_.size() != plans_.size())
      throw error(errc::invalid_argument, "full transfer bucket: no such bucket of a recorded version");
    const auto& plan = plans_[i];
    auto m = frames_->take();
    m->resize(1 + sparsesync::detail::dense_frame_bound(plan, enc_.log2_chunk));
    (*m)[0] = static_cast<std::byte>(message_type::bucket);
    const auto views = snapshot_->views();
    const std::size_t bytes = visit_word(plan.dtype, [&]<class W>() {
      return sparsesync::detail::write_dense_bucket<W>(*layout_, plan, static_cast<std::uint32_t>(i), views, enc_.log2_chunk,
                                           bucket_checksums{zero_checksums_[i], bucket_checksums_[i]},
                                           reinterpret_cast<unsigned char*>(m->data() + 1));
    });
    m->resize(1 + bytes);
    return frame_pool::share(frames_, std::move(m));
  }

  void invalidate() {
    has_version_ = false;
    bucket_checksums_.clear();
    if (snapshot_) snapshot_->invalidate();
  }

 private:
  // Buffers of full-transfer frames that were sent, for the next ones: a fresh 17 MiB frame per bucket is
  // zero-filled and faulted in (~0.1-0.2 s per GiB on the sending thread), and write_dense_bucket writes every
  // byte of its frame anyway. A recycled buffer keeps its length, so resize() fills only what grows.
  struct frame_pool {
    static constexpr std::size_t keep = 3;  // frames in flight at once: the one sent, the next, a session's own
    std::mutex mutex;
    std::vector<std::unique_ptr<std::vector<std::byte>>> free;

    std::unique_ptr<std::vector<std::byte>> take() {
      std::lock_guard lock(mutex);
      if (free.empty()) return std::make_unique<std::vector<std::byte>>();
      auto b = std::move(free.back());
      free.pop_back();
      return b;
    }
    // The message hands its buffer back to the pool when its last holder lets go (any thread).
    static std::shared_ptr<const std::vector<std::byte>> share(const std::shared_ptr<frame_pool>& pool,
                                                               std::unique_ptr<std::vector<std::byte>> b) {
      return std::shared_ptr<const std::vector<std::byte>>(b.release(), [pool](const std::vector<std::byte>* p) {
        std::unique_ptr<std::vector<std::byte>> owned(const_cast<std::vector<std::byte>*>(p));
        std::lock_guard lock(pool->mutex);
        if (pool->free.size() < keep) pool->free.push_back(std::move(owned));
      });
    }
  };

  // Full transfers (from the all-zero model) are dense: a bitmap of the nonzero elements and their raw bits
  // (absolute values), which costs a copy and a hash per element and ~1/16 to 1/32 more bytes than the model,
  // where entropy coding (auto's trial of every encoder on every chunk) would cost seconds per GB for a few %
  // less. Written by format/dense_bitmap.hpp: the bytes encode_bucket<bitmap> writes for the same bucket.

  patch_header header_for_full(const patch_options& po) const {
    std::size_t layout_bytes = 0;
    if (po.include_layout) layout_bytes = layout_->serialize().size();
    return sparsesync::detail::patch_header_for(*layout_, plans_.size(), po, /*from_zero=*/true, layout_bytes);
  }

  std::uint64_t prologue_bytes(const patch_options& po) const {
    return patch_header_bytes + (po.include_layout ? layout_->serialize().size() : 0) + po.metadata.size();
  }

  // The per-bucket checksums a full transfer's frames carry: the snapshot's (recorded by every version) and the
  // zero model's (they depend on the plan alone: computed once).
  void ensure_full_checksums() {
    if (bucket_checksums_.size() != plans_.size() || zero_checksums_.size() != plans_.size()) {
      const auto views = snapshot_->views();
      bucket_checksums_.clear();
      zero_checksums_.clear();
      for (const auto& plan : plans_) {
        const auto sum = visit_word(plan.dtype, [&]<class W>() { return sparsesync::detail::summarize_dense_bucket<W>(*layout_, plan, views, enc_.log2_chunk); });
        bucket_checksums_.push_back(sum.sums.target);
        zero_checksums_.push_back(sum.sums.base);
      }
    }
  }

  // A full transfer of `target` into `out`, bucket by bucket. `known`: target is the snapshot, whose checksums
  // are recorded (nothing is hashed); else they are computed and recorded (the first version). Returns the
  // changed (nonzero) count.
  std::uint64_t encode_dense(std::span<const const_tensor_view> target, const patch_options& po_in, version_stream& out, bool known) {
    patch_options po = po_in;
    po.encode = {value_mode::absolute, enc_.log2_chunk};
    if (known) ensure_full_checksums();
    patch_header h = header_for_full(po);
    stream_writer w(out);
    {
      std::vector<unsigned char> pro;
      std::vector<unsigned char> layout_bytes;
      if (po.include_layout) layout_bytes = layout_->serialize();
      sparsesync::detail::write_patch_prologue(pro, h, layout_bytes, po.metadata);
      w.prologue(pro);
    }
    std::vector<std::uint64_t> targets, zeros;
    std::vector<unsigned char> frame;
    for (std::size_t i = 0; i < plans_.size(); ++i) {
      const auto& plan = plans_[i];
      frame.resize(sparsesync::detail::dense_frame_bound(plan, enc_.log2_chunk));
      bucket_checksums sums;
      const std::optional<bucket_checksums> k =
          known ? std::optional<bucket_checksums>(bucket_checksums{zero_checksums_[i], bucket_checksums_[i]}) : std::nullopt;
      const std::size_t bytes = visit_word(plan.dtype, [&]<class W>() {
        return sparsesync::detail::write_dense_bucket<W>(*layout_, plan, static_cast<std::uint32_t>(i), target, enc_.log2_chunk, k, frame.data(), &sums);
      });
      (void)w.bucket(std::span<const unsigned char>(frame.data(), bytes));
      h.base_checksum += sums.base;
      h.target_checksum += sums.target;
      targets.push_back(sums.target);
      zeros.push_back(sums.base);
    }
    unsigned char final_header[patch_header_bytes];
    sparsesync::detail::write_patch_header(final_header, h);
    if (!known) {
      bucket_checksums_ = std::move(targets);
      zero_checksums_ = std::move(zeros);
    }
    w.end(final_header, h.target_checksum);
    return w.changed();
  }

  // Encodes into `out`; with `known_base` (per-bucket base checksums) the base is compared, not hashed; the
  // per-bucket target checksums are kept for the next version; `advance_base` (the base's memory) is brought
  // to the target bucket by bucket. Returns the changed count.
  template <class S>
  std::uint64_t encode(std::span<const const_tensor_view> base, std::span<const const_tensor_view> target, const patch_options& po,
                       version_stream& out, const std::vector<std::uint64_t>* known_base, std::span<const tensor_view> advance_base) {
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
    bucket_checksums_ = enc.bucket_target_checksums();
    w.end(final_header, enc.header().target_checksum);
    return w.changed();
  }

  const model_layout* layout_ = nullptr;
  encode_options enc_;
  std::optional<encoder_id> encoder_;
  std::optional<Policy> policy_;
  std::optional<host_snapshot> snapshot_;
  std::vector<bucket_plan> plans_;               // the policy's buckets (those of every patch and full transfer)
  std::vector<std::uint64_t> bucket_checksums_;  // per-bucket content checksums of the snapshot
  std::vector<std::uint64_t> zero_checksums_;    // per-bucket content checksums of the all-zero model
  std::shared_ptr<frame_pool> frames_ = std::make_shared<frame_pool>();
  bool has_version_ = false;
};

}  // namespace sync
SPARSESYNC_NS_END
