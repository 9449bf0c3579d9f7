// Host encoder of one bucket: finds the changes, computes the checksums and frames the bucket (FORMAT.md).
#pragma once

#include <sparsesync/codec/registry.hpp>
#include <sparsesync/format/model_access.hpp>
#include <sparsesync/format/wire.hpp>

#include <cstring>
#include <vector>

SPARSESYNC_NS_BEGIN

struct encode_options {
  value_mode mode = value_mode::absolute;
  unsigned log2_chunk = default_log2_chunk;
};

// Changes of one bucket, per chunk, before any encoder has seen them.
template <element_word W>
struct bucket_changes {
  std::vector<std::uint64_t> chunk_first;  // chunk c's changes are [chunk_first[c], chunk_first[c + 1])
  std::vector<std::uint32_t> positions;    // chunk-relative
  std::vector<W> values;                   // coded values
  std::uint64_t numel = 0;
  std::uint64_t base_checksum = 0;
  std::uint64_t target_checksum = 0;
};

namespace detail {

// With `known_base` the caller vouches for the bucket's base checksum (a sender that remembers the target
// checksums of what it sent last): unchanged elements are then only compared, never hashed.
template <element_word W>
bucket_changes<W> collect_changes(const model_layout& layout, const bucket_plan& plan, std::span<const const_tensor_view> base,
                                  std::span<const const_tensor_view> target, const encode_options& opt,
                                  const std::uint64_t* known_base = nullptr) {
  bucket_changes<W> out;
  const auto starts = segment_starts(plan.segments);
  out.numel = plan.numel();
  const std::uint64_t chunk = std::uint64_t{1} << opt.log2_chunk;
  const std::uint64_t chunks = (out.numel + chunk - 1) / chunk;
  out.chunk_first.reserve(chunks + 1);
  std::uint64_t base_sum = 0, delta_sum = 0;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    out.chunk_first.push_back(out.positions.size());
    const std::uint64_t first = c * chunk;
    for_each_run(layout, plan.segments, starts, first, std::min(chunk, out.numel - first), [&](const bucket_run& r) {
      // A base view without data stands for zeros: a full transfer is a patch from the all-zero model.
      const W* b = base[r.tensor].data ? word_ptr<W>(base[r.tensor]) + r.tensor_offset : nullptr;
      const W* t = word_ptr<W>(target[r.tensor]) + r.tensor_offset;
      const auto rel = static_cast<std::uint32_t>(r.bucket_first - first);
      if (!known_base) {
        if (b) base_sum += content_checksum(b, r.count, r.flat_index);
        else for (std::uint64_t i = 0; i < r.count; ++i) base_sum += element_hash(r.flat_index + i, W{0});
      }
      auto record = [&](std::uint64_t i, W old_bits) {
        out.positions.push_back(rel + static_cast<std::uint32_t>(i));
        out.values.push_back(code_value<W>(opt.mode, old_bits, t[i]));
        delta_sum += element_hash(r.flat_index + i, t[i]) - element_hash(r.flat_index + i, old_bits);
      };
      std::uint64_t i = 0;
      if (b) {
        // At RL densities most 16-byte blocks hold no change: compare them whole, look inside only on a miss.
        constexpr std::uint64_t per_block = 16 / sizeof(W);
        for (; i + per_block <= r.count; i += per_block) {
          if (std::memcmp(b + i, t + i, 16) == 0) continue;
          for (std::uint64_t j = i; j < i + per_block; ++j)
            if (b[j] != t[j]) record(j, b[j]);
        }
      }
      for (; i < r.count; ++i) {
        const W old_bits = b ? b[i] : W{0};
        if (old_bits != t[i]) record(i, old_bits);
      }
    });
  }
  out.chunk_first.push_back(out.positions.size());
  if (known_base) base_sum = *known_base;
  out.base_checksum = base_sum;
  out.target_checksum = base_sum + delta_sum;
  return out;
}

template <element_word W>
std::vector<W> gather_chunk_base(const model_layout& layout, const bucket_plan& plan, std::span<const std::uint64_t> starts,
                                 std::span<const const_tensor_view> base, std::uint64_t first, std::uint64_t count) {
  std::vector<W> out;
  out.reserve(count);
  for_each_run(layout, plan.segments, starts, first, count, [&](const bucket_run& r) {
    if (!base[r.tensor].data) {
      out.insert(out.end(), r.count, W{0});
      return;
    }
    const W* b = word_ptr<W>(base[r.tensor]) + r.tensor_offset;
    out.insert(out.end(), b, b + r.count);
  });
  return out;
}

// Appends the framed bucket encoded with E to `out`.
template <class E, element_word W>
void serialize_bucket(const model_layout& layout, const bucket_plan& plan, std::uint32_t index, const bucket_changes<W>& ch,
                      std::span<const const_tensor_view> base, const encode_options& opt, std::vector<unsigned char>& out) {
  static_assert(check_encoder<E>);
  const std::uint64_t chunk = std::uint64_t{1} << opt.log2_chunk;
  const std::size_t chunks = ch.chunk_first.size() - 1;
  const std::size_t start = out.size();
  const std::size_t seg_at = start + bucket_header_bytes;
  const std::size_t table_at = seg_at + segment_entry_bytes * plan.segments.size();
  const std::size_t data_at = table_at + chunk_entry_bytes * chunks;
  out.resize(data_at);
  for (std::size_t s = 0; s < plan.segments.size(); ++s) {
    unsigned char* p = out.data() + seg_at + segment_entry_bytes * s;
    store_le<std::uint32_t>(p, plan.segments[s].tensor);
    store_le<std::uint32_t>(p + 4, 0);
    store_le<std::uint64_t>(p + 8, plan.segments[s].offset);
    store_le<std::uint64_t>(p + 16, plan.segments[s].count);
  }
  std::uint64_t payload_checksum = stream_hash(out.data() + seg_at, table_at - seg_at, 0);
  const auto starts = E::needs_base ? segment_starts(plan.segments) : std::vector<std::uint64_t>{};
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t before = out.size();
    const std::uint64_t first = c * chunk;
    chunk_changes<W> in;
    in.numel = static_cast<std::uint32_t>(std::min(chunk, ch.numel - first));
    in.mode = opt.mode;
    in.positions = std::span(ch.positions).subspan(ch.chunk_first[c], ch.chunk_first[c + 1] - ch.chunk_first[c]);
    in.values = std::span(ch.values).subspan(ch.chunk_first[c], ch.chunk_first[c + 1] - ch.chunk_first[c]);
    std::vector<W> chunk_base;
    if constexpr (E::needs_base) {
      chunk_base = gather_chunk_base<W>(layout, plan, starts, base, first, in.numel);
      in.base = chunk_base;
    }
    E::encode(in, out);
    unsigned char* entry = out.data() + table_at + chunk_entry_bytes * c;
    store_le<std::uint32_t>(entry, static_cast<std::uint32_t>(in.positions.size()));
    store_le<std::uint32_t>(entry + 4, static_cast<std::uint32_t>(out.size() - before));
    stream_hasher h(c);
    h.update(entry, chunk_entry_bytes);
    h.update(out.data() + before, out.size() - before);
    payload_checksum += h.digest();
  }
  bucket_header hdr;
  hdr.index = index;
  hdr.encoder = E::id;
  hdr.mode = opt.mode;
  hdr.dtype = plan.dtype;
  hdr.log2_chunk = static_cast<std::uint8_t>(opt.log2_chunk);
  hdr.segment_count = static_cast<std::uint32_t>(plan.segments.size());
  hdr.numel = ch.numel;
  hdr.changed = ch.positions.size();
  hdr.chunk_count = static_cast<std::uint32_t>(chunks);
  hdr.data_bytes = out.size() - data_at;
  hdr.base_checksum = ch.base_checksum;
  hdr.target_checksum = ch.target_checksum;
  hdr.payload_checksum = payload_checksum;
  write_bucket_header(out.data() + start, hdr);
}

template <class Sel>
struct bucket_serializer;

template <class E>
  requires encoder<E>
struct bucket_serializer<E> {
  template <element_word W>
  static void run(const model_layout& layout, const bucket_plan& plan, std::uint32_t index, const bucket_changes<W>& ch,
                  std::span<const const_tensor_view> base, const encode_options& opt, std::vector<unsigned char>& out) {
    serialize_bucket<E, W>(layout, plan, index, ch, base, opt, out);
  }
};

template <class... Es>
struct bucket_serializer<best_of<Es...>> {
  template <element_word W>
  static void run(const model_layout& layout, const bucket_plan& plan, std::uint32_t index, const bucket_changes<W>& ch,
                  std::span<const const_tensor_view> base, const encode_options& opt, std::vector<unsigned char>& out) {
    std::vector<unsigned char> best, trial;
    bool have = false;
    auto try_one = [&]<class E>() {
      trial.clear();
      serialize_bucket<E, W>(layout, plan, index, ch, base, opt, trial);
      if (!have || trial.size() < best.size()) {
        best.swap(trial);
        have = true;
      }
    };
    (try_one.template operator()<Es>(), ...);
    out.insert(out.end(), best.begin(), best.end());
  }
};

}  // namespace detail

// An encoder selection: one encoder type, or best_of<...>.
template <class S>
concept encoder_selection = encoder<S> || requires { typename detail::bucket_serializer<S>; sizeof(detail::bucket_serializer<S>); };

// Encodes one bucket of the change from `base` to `target` and appends its frame to `out`;
// returns its base and target content checksums.
// `known_base`, when given, is the bucket's base checksum as the caller knows it (see collect_changes).
template <class Sel>
std::pair<std::uint64_t, std::uint64_t> encode_bucket(const model_layout& layout, const bucket_plan& plan, std::uint32_t index,
                                                      std::span<const const_tensor_view> base, std::span<const const_tensor_view> target,
                                                      const encode_options& opt, std::vector<unsigned char>& out,
                                                      const std::uint64_t* known_base = nullptr) {
  return visit_word(plan.dtype, [&]<class W>() {
    const auto ch = detail::collect_changes<W>(layout, plan, base, target, opt, known_base);
    detail::bucket_serializer<Sel>::template run<W>(layout, plan, index, ch, base, opt, out);
    return std::pair{ch.base_checksum, ch.target_checksum};
  });
}

SPARSESYNC_NS_END
