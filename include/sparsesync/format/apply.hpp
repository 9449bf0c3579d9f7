// Host decoder and atomic apply. A version is staged bucket by bucket (each bucket's base and target
// checksums verified against the receiver's own memory) and written only once every bucket has passed:
// a damaged or mismatched patch leaves the model untouched.
#pragma once

#include <sparsesync/codec/registry.hpp>
#include <sparsesync/format/base_checksum.hpp>
#include <sparsesync/format/bucket_reader.hpp>
#include <sparsesync/format/dense_bitmap.hpp>
#include <sparsesync/format/model_access.hpp>
#include <sparsesync/format/patch_reader.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

SPARSESYNC_NS_BEGIN

struct apply_options {
  // When set, the receiver vouches that this is the content checksum of its current model (for example the
  // target checksum of the last version it verified). The base is then proven by comparing this value with
  // the patch's, and no bucket is reread in full: only changed elements are touched.
  std::optional<std::uint64_t> known_base_checksum;
};

struct apply_report {
  std::uint64_t buckets = 0;
  std::uint64_t numel = 0;
  std::uint64_t changed = 0;
  std::uint64_t base_checksum = 0;
  std::uint64_t target_checksum = 0;
  std::uint64_t base_version = 0;
  std::uint64_t target_version = 0;
};

struct staged_change {
  std::uint32_t tensor;
  std::uint32_t bits;
  std::uint64_t offset;
};

namespace detail {
// Writes `changes` into `model` (element by element, prefetching ahead: the changes are scattered).
inline void write_changes(std::span<const tensor_view> model, std::span<const staged_change> changes) {
  const std::size_t n = changes.size();
  const auto at = [&](const staged_change& c) {
    const auto& v = model[c.tensor];
    return static_cast<unsigned char*>(v.data) + c.offset * size_of(v.dtype);
  };
  for (std::size_t j = 0; j < n; ++j) {
    if (j + prefetch_distance < n) prefetch_write(at(changes[j + prefetch_distance]));
    const auto& c = changes[j];
    const auto& v = model[c.tensor];
    switch (size_of(v.dtype)) {
      case 1: static_cast<std::uint8_t*>(v.data)[c.offset] = static_cast<std::uint8_t>(c.bits); break;
      case 2: static_cast<std::uint16_t*>(v.data)[c.offset] = static_cast<std::uint16_t>(c.bits); break;
      default: static_cast<std::uint32_t*>(v.data)[c.offset] = c.bits; break;
    }
  }
}
}  // namespace detail

// Stages one version against the receiver's current tensors; see the file comment.
class staged_patch {
 public:
  staged_patch(const model_layout& layout, std::span<const const_tensor_view> current, apply_options opt = {})
      : layout_(layout), current_(current), opt_(opt), tiling_(layout) {}

  // Validates, verifies and stages the bucket frame at the start of `frame`; `consumed` gets its length.
  status add_bucket(std::span<const unsigned char> frame, std::size_t& consumed) {
    bucket_view b;
    if (auto s = parse_bucket(frame, b); !s) return s.prefix("bucket " + std::to_string(buckets_));
    if (b.header.index != buckets_)
      return {errc::malformed, "bucket " + std::to_string(buckets_) + ": header says index " + std::to_string(b.header.index)};
    if (auto s = tiling_.add(b); !s) return s.prefix("bucket " + std::to_string(buckets_));
    const std::size_t staged_before = changes_.size();
    if (auto s = stage(b); !s) {
      changes_.resize(staged_before);  // a failed bucket leaves nothing staged
      return s.prefix("bucket " + std::to_string(buckets_));
    }
    consumed = b.frame_bytes;
    ++buckets_;
    return {};
  }

  // Checks completeness and the whole-model checksums of the header.
  status finish(const patch_header& h) {
    if (auto s = tiling_.finish(); !s) return s;
    if (buckets_ != h.bucket_count) return {errc::malformed, "bucket count differs from the header's"};
    if (numel_ != h.numel) return {errc::malformed, "buckets cover a different element count than the header's"};
    if (base_sum_ != h.base_checksum) return {errc::malformed, "bucket base checksums do not add up to the patch's"};
    if (target_sum_ != h.target_checksum) return {errc::malformed, "bucket target checksums do not add up to the patch's"};
    if (opt_.known_base_checksum && *opt_.known_base_checksum != h.base_checksum)
      return {errc::base_mismatch, "the receiver's model is not the patch's base (whole-model checksum differs)"};
    finished_ = true;
    return {};
  }

  // Writes the staged changes into `model` (which must be the tensors that were `current`).
  void commit(std::span<const tensor_view> model) const { detail::write_changes(model, changes_); }

  // For receivers without a version (nothing to protect): writes one verified bucket's changes and drops them.
  void commit_and_clear(std::span<const tensor_view> model) {
    commit(model);
    changes_.clear();
  }

  // Hands each chunk's resolved changes to `sink` as soon as the chunk decoded, instead of staging them:
  // sink(flat_end, changes) gets the changes of the model's elements up to flat index flat_end (sorted, and
  // every element before flat_end not among them is unchanged). For a caller that writes the new version
  // somewhere that becomes the output only once finish() passed (a temporary file): memory then holds one
  // chunk's changes, not the version's. Checks are those of staged mode, per bucket; commit() has nothing.
  using chunk_sink = std::function<void(std::uint64_t flat_end, std::span<const staged_change> changes)>;
  void stream_to(chunk_sink sink) { sink_ = std::move(sink); }

  // For a patch from the all-zero model (every current view null) written as it arrives: each bucket is
  // written into `model` whole, every element of it, so `model` needs no zero-fill first. Buckets in the
  // dense form of a full transfer (bitmap, absolute values) are read straight into it (dense_bitmap.hpp: a
  // copy and a hash per element, no change list); any other bucket's range is zeroed, then its changes go
  // to the stream_to() sink, which must write them into `model`. Checks are those of staged mode, per bucket.
  void write_full_into(std::span<const tensor_view> model) {
    for (const auto& v : current_)
      if (v.data) throw error(errc::invalid_argument, "write_full_into: only for a patch from the all-zero model");
    if (auto s = check_views(layout_, model, "full transfer target"); !s) throw error(s);
    full_out_.assign(model.begin(), model.end());
  }

  // Hands over the change list of an earlier staged_patch (from take_storage) to stage into: its capacity is
  // kept, so that a receiver does not allocate and page in a new list for every version.
  void reuse_storage(std::vector<staged_change> storage) {
    if (!changes_.empty()) throw error(errc::invalid_argument, "reuse_storage: changes are already staged");
    storage.clear();
    changes_ = std::move(storage);
  }
  [[nodiscard]] std::vector<staged_change> take_storage() && { return std::move(changes_); }

  [[nodiscard]] bool finished() const { return finished_; }
  [[nodiscard]] std::uint64_t changed() const { return streamed_ + changes_.size(); }
  [[nodiscard]] std::uint64_t numel() const { return numel_; }
  [[nodiscard]] std::uint32_t buckets() const { return buckets_; }
  [[nodiscard]] std::uint64_t base_checksum() const { return base_sum_; }
  [[nodiscard]] std::uint64_t target_checksum() const { return target_sum_; }
  [[nodiscard]] const std::vector<staged_change>& changes() const { return changes_; }

 private:
  status stage(const bucket_view& b) {
    status result;
    const bool known = visit_encoder(b.header.encoder, [&]<class E>(E) {
      result = visit_word(b.header.dtype, [&]<class W>() { return stage_with<E, W>(b); });
    });
    if (!known) return {errc::malformed, "unknown encoder"};
    return result;
  }

  template <class E, element_word W>
  status stage_with(const bucket_view& b) {
    const auto& h = b.header;
    const auto starts = detail::segment_starts(b.segments);
    const std::uint64_t chunk = std::uint64_t{1} << h.log2_chunk;
    if (!full_out_.empty()) {
      if constexpr (std::same_as<E, bitmap>) {
        if (h.mode == value_mode::absolute) return stage_dense<W>(b, starts);
      }
      detail::for_each_run(layout_, b.segments, starts, 0, h.numel, [&](const detail::bucket_run& r) {
        std::memset(detail::word_ptr<W>(full_out_[r.tensor]) + r.tensor_offset, 0, r.count * sizeof(W));
      });
    }
    // The content checksum of the receiver's elements [from, from + count) of the bucket.
    const auto base_sum = [&](std::uint64_t from, std::uint64_t count) {
      return detail::bucket_base_checksum<W>(layout_, b.segments, starts, current_, from, count);
    };
    // A decoder that reads every base element (entropy) hashes them in the same pass (chunk_base_hash):
    // the base is then proven once the bucket decoded, and any error before that is reported as a base
    // mismatch where the base is wrong (a decoder fed another base may fail in any way). Not with a sink,
    // which must get changes only after the base is proven.
    const bool hash_in_decode = E::needs_base && !opt_.known_base_checksum && !sink_ && full_out_.empty();
    std::uint64_t actual_base = 0;
    const auto base_first = [&](status s) {
      if (hash_in_decode && base_sum(0, h.numel) != h.base_checksum) return status{errc::base_mismatch, "the receiver's weights are not the patch's base"};
      return s;
    };
    if (!opt_.known_base_checksum && !hash_in_decode) {
      actual_base = base_sum(0, h.numel);
      if (actual_base != h.base_checksum) return {errc::base_mismatch, "the receiver's weights are not the patch's base"};
    }
    // Room for a chunk's changes is made once the chunk decoded (geometric growth keeps it amortised): the
    // header's change count is only a claim, and reserving it up front would let a crafted patch that
    // claims every element changed cost 16 bytes per element before anything is verified.
    // Decode every chunk first (bits = coded values), then read the model in one pass that prefetches a
    // fixed distance ahead: the old values are scattered over the bucket, and reading them is most of the work.
    const std::size_t from = changes_.size();
    std::vector<std::size_t> chunk_end(h.chunk_count);  // end of each chunk's changes in changes_, for messages
    std::uint64_t delta = 0;
    std::vector<std::uint32_t> positions;
    std::vector<W> values;
    std::vector<W> chunk_base;  // (only where a chunk's base is not one span of memory)
    for (std::uint32_t c = 0; c < h.chunk_count; ++c) {
      const auto& ce = b.chunks[c];
      const std::uint64_t first = std::uint64_t{c} * chunk;
      chunk_context<W> ctx;
      ctx.numel = static_cast<std::uint32_t>(std::min(chunk, h.numel - first));
      ctx.changes = ce.changes;
      ctx.mode = h.mode;
      if constexpr (E::needs_base) ctx.base = detail::chunk_base_view<W>(layout_, b.segments, starts, current_, first, ctx.numel, chunk_base);
      chunk_base_hash chunk_hash;
      if (hash_in_decode && detail::start_chunk_hash(layout_, b.segments, starts, first, ctx.numel, chunk_hash)) ctx.hash_base = &chunk_hash;
      const auto data = b.data.subspan(b.chunk_offsets[c], ce.data_bytes);
      if (auto s = E::template decode<W>(data, ctx, positions, values); !s) return base_first(s.prefix("chunk " + std::to_string(c)));
      if (positions.size() != ce.changes || values.size() != ce.changes)
        return base_first({errc::malformed, "chunk " + std::to_string(c) + ": decoder returned the wrong change count"});
      if (hash_in_decode) actual_base += chunk_hash.done ? chunk_hash.sum : base_sum(first, ctx.numel);
      if (const std::size_t need = changes_.size() + positions.size(); changes_.capacity() < need)
        changes_.reserve(std::max(need, 2 * changes_.capacity()));
      std::size_t i = 0;
      detail::for_each_run(layout_, b.segments, starts, first, ctx.numel, [&](const detail::bucket_run& r) {
        const std::uint64_t run_first = r.bucket_first - first;
        for (; i < positions.size() && positions[i] < run_first + r.count; ++i)
          changes_.push_back({r.tensor, values[i], r.tensor_offset + (positions[i] - run_first)});
      });
      chunk_end[c] = changes_.size();
      if (sink_) {
        if (const std::size_t bad = resolve<W>(h.mode, from, delta); bad != changes_.size())
          return {errc::non_canonical, "chunk " + std::to_string(c) + ": change " + std::to_string(bad - from) + " leaves its element unchanged"};
        sink_(numel_ + first + ctx.numel, std::span<const staged_change>(changes_).subspan(from));
        streamed_ += changes_.size() - from;
        changes_.resize(from);
      }
    }
    if (hash_in_decode && actual_base != h.base_checksum) return {errc::base_mismatch, "the receiver's weights are not the patch's base"};
    if (!sink_) {  // staged mode: resolve the bucket in one pass (prefetching across chunk boundaries)
      if (const std::size_t bad = resolve<W>(h.mode, from, delta); bad != changes_.size()) {
        const auto c = static_cast<std::size_t>(std::upper_bound(chunk_end.begin(), chunk_end.end(), bad) - chunk_end.begin());
        const std::size_t chunk_first = c == 0 ? from : chunk_end[c - 1];
        return {errc::non_canonical, "chunk " + std::to_string(c) + ": change " + std::to_string(bad - chunk_first) + " leaves its element unchanged"};
      }
    }
    const std::uint64_t base = opt_.known_base_checksum ? h.base_checksum : actual_base;
    if (base + delta != h.target_checksum) return {errc::target_mismatch, "the rebuilt weights differ from the sender's"};
    numel_ += h.numel;
    base_sum_ += h.base_checksum;
    target_sum_ += h.target_checksum;
    return {};
  }

  // A full transfer's bitmap bucket (absolute values), read into full_out_ chunk by chunk (write_full_into).
  template <element_word W>
  status stage_dense(const bucket_view& b, std::span<const std::uint64_t> starts) {
    const auto& h = b.header;
    const std::uint64_t chunk = std::uint64_t{1} << h.log2_chunk;
    bucket_checksums sums;
    for (std::uint32_t c = 0; c < h.chunk_count; ++c) {
      const auto& ce = b.chunks[c];
      const std::uint64_t first = std::uint64_t{c} * chunk;
      const auto n = static_cast<std::uint32_t>(std::min(chunk, h.numel - first));
      const auto runs = [&](auto&& f) {
        detail::for_each_run(layout_, b.segments, starts, first, n, [&](const detail::bucket_run& r) { f(r, r.bucket_first - first); });
      };
      const auto out = [&](const detail::bucket_run& r) { return detail::word_ptr<W>(full_out_[r.tensor]) + r.tensor_offset; };
      if (auto s = detail::read_dense_chunk<W>(b.data.subspan(b.chunk_offsets[c], ce.data_bytes), n, ce.changes, runs, out, sums); !s)
        return s.prefix("chunk " + std::to_string(c));
      streamed_ += ce.changes;
    }
    if (sums.base != h.base_checksum) return {errc::base_mismatch, "the receiver's weights are not the patch's base"};
    if (sums.target != h.target_checksum) return {errc::target_mismatch, "the rebuilt weights differ from the sender's"};
    numel_ += h.numel;
    base_sum_ += h.base_checksum;
    target_sum_ += h.target_checksum;
    return {};
  }

  // Turns the coded values of changes_[from, end) into new bit patterns against the current model and adds
  // their checksum deltas to `delta`. Returns the index of the first change that leaves its element as it
  // was (invalid), or changes_.size().
  // The hashes are taken after the loop, eight at a time (hash_deltas_fast), from the flat indices and old
  // bits it keeps.
  template <element_word W>
  std::size_t resolve(value_mode mode, std::size_t from, std::uint64_t& delta) {
    staged_change* c = changes_.data();
    const std::size_t n = changes_.size();
    resolve_flat_.resize(n - from);
    resolve_old_.resize(n - from);
    resolve_new_.resize(n - from);
    for (std::size_t j = from; j < n; ++j) {
      if (j + detail::prefetch_distance < n) detail::prefetch_read(current_ptr<W>(c[j + detail::prefetch_distance]));
      const W* p = current_ptr<W>(c[j]);
      const W old_bits = p ? *p : W{0};
      const W new_bits = decode_value<W>(mode, old_bits, static_cast<W>(c[j].bits));
      if (new_bits == old_bits) return j;
      resolve_flat_[j - from] = layout_.first_element(c[j].tensor) + c[j].offset;
      resolve_old_[j - from] = old_bits;
      resolve_new_[j - from] = new_bits;
      c[j].bits = new_bits;
    }
    delta += detail::hash_deltas_fast(resolve_flat_.data(), resolve_new_.data(), resolve_old_.data(), n - from);
    return n;
  }

  static void* element_ptr(std::span<const tensor_view> model, const staged_change& c) {
    const auto& v = model[c.tensor];
    return static_cast<unsigned char*>(v.data) + c.offset * size_of(v.dtype);
  }

  // The current element a staged change replaces; null where the base is the all-zero model.
  template <element_word W>
  const W* current_ptr(const staged_change& c) const {
    const auto& v = current_[c.tensor];
    return v.data ? detail::word_ptr<W>(v) + c.offset : nullptr;
  }

  const model_layout& layout_;
  std::span<const const_tensor_view> current_;
  apply_options opt_;
  tiling_check tiling_;
  std::vector<staged_change> changes_;
  std::vector<std::uint64_t> resolve_flat_;                // resolve(): each change's flat index,
  std::vector<std::uint32_t> resolve_old_, resolve_new_;  // and its old and new bits
  chunk_sink sink_;               // stream_to(): changes go there chunk by chunk
  std::vector<tensor_view> full_out_;  // write_full_into(): where a full transfer's buckets are written whole
  std::uint64_t streamed_ = 0;    // changes handed to sink_
  std::uint32_t buckets_ = 0;
  std::uint64_t numel_ = 0, base_sum_ = 0, target_sum_ = 0;
  bool finished_ = false;
};

inline void zero_fill(std::span<const tensor_view> model) {
  for (const auto& v : model)
    if (v.data) std::memset(v.data, 0, v.numel * size_of(v.dtype));
}

// Applies a whole patch to `model` in place, atomically: on any error the model is left untouched.
inline status try_apply_patch(std::span<const unsigned char> patch, const model_layout& layout, std::span<const tensor_view> model,
                              const apply_options& opt = {}, apply_report* report = nullptr) {
  patch_prologue pro;
  if (auto s = parse_patch_prologue(patch, pro); !s) return s;
  if (pro.header.layout_hash != layout.hash())
    return {errc::layout_mismatch, "the patch was made for another model layout (names, dtypes or shapes differ)"};
  if (auto s = check_views(layout, model, "model"); !s) return s;
  // A patch from the all-zero model (a full transfer) ignores the model's current contents.
  const bool from_zero = pro.header.flags & flag_from_zero;
  std::vector<const_tensor_view> current(model.begin(), model.end());
  if (from_zero)
    for (auto& v : current) v.data = nullptr;
  staged_patch staged(layout, current, opt);
  std::size_t pos = pro.bytes;
  for (std::uint32_t b = 0; b < pro.header.bucket_count; ++b) {
    std::size_t used = 0;
    if (auto s = staged.add_bucket(patch.subspan(pos), used); !s) return s;
    pos += used;
  }
  if (pos != patch.size()) return {errc::malformed, "trailing bytes after the last bucket"};
  if (auto s = staged.finish(pro.header); !s) return s;
  if (from_zero) zero_fill(model);
  staged.commit(model);
  if (report) {
    *report = {staged.buckets(), staged.numel(), staged.changed(), staged.base_checksum(), staged.target_checksum(),
               pro.header.base_version, pro.header.target_version};
  }
  return {};
}

inline apply_report apply_patch(std::span<const unsigned char> patch, const model_layout& layout, std::span<const tensor_view> model,
                                const apply_options& opt = {}) {
  apply_report r;
  throw_if_error(try_apply_patch(patch, layout, model, opt, &r));
  return r;
}

SPARSESYNC_NS_END

// ---- The compiled part (docs/BUILD.md) ----
// Staging a bucket instantiates the decoder of every built-in encoder for every word size (the encoder is
// read from the wire): the bulk of the compile time of a program that applies patches. The optional
// sparsesync::compiled library instantiates them once; with SPARSESYNC_COMPILED_LIBRARY (set by that target)
// the declarations below keep every other translation unit from compiling them again. apply_patch and
// try_apply_patch themselves are plain inline functions (cheap once these are out of the way).
#define SPARSESYNC_DETAIL_STAGE_INSTANTIATION(SPEC, E)                                  \
  SPEC template status staged_patch::stage_with<E, std::uint8_t>(const bucket_view&);  \
  SPEC template status staged_patch::stage_with<E, std::uint16_t>(const bucket_view&); \
  SPEC template status staged_patch::stage_with<E, std::uint32_t>(const bucket_view&);
#define SPARSESYNC_DETAIL_APPLY_INSTANTIATIONS(SPEC)        \
  SPARSESYNC_DETAIL_STAGE_INSTANTIATION(SPEC, rice)         \
  SPARSESYNC_DETAIL_STAGE_INSTANTIATION(SPEC, delta_varint) \
  SPARSESYNC_DETAIL_STAGE_INSTANTIATION(SPEC, bitmap)       \
  SPARSESYNC_DETAIL_STAGE_INSTANTIATION(SPEC, raw_index32) \
  SPARSESYNC_DETAIL_STAGE_INSTANTIATION(SPEC, entropy)

SPARSESYNC_NS_BEGIN
static_assert(builtin_encoders::size == 5, "sparsesync: list the new encoder in SPARSESYNC_DETAIL_APPLY_INSTANTIATIONS");
#ifdef SPARSESYNC_COMPILED_LIBRARY
SPARSESYNC_DETAIL_APPLY_INSTANTIATIONS(extern)
#endif
SPARSESYNC_NS_END
