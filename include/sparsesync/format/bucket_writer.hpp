// Host encoder of one bucket: finds the changes, computes the checksums and frames the bucket (FORMAT.md).
#pragma once

#include <sparsesync/codec/registry.hpp>
#include <sparsesync/format/base_checksum.hpp>
#include <sparsesync/format/diff_scan.hpp>
#include <sparsesync/format/link_cost.hpp>
#include <sparsesync/format/model_access.hpp>
#include <sparsesync/format/wire.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

SPARSESYNC_NS_BEGIN

struct encode_options {
  value_mode mode = value_mode::absolute;
  unsigned log2_chunk = default_log2_chunk;
  link_cost link{};  // what best_of (auto) weighs an encoder that reads the base against (link_cost.hpp)
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
  // The base was not hashed here (collect_changes' defer_base): base_checksum is 0 and target_checksum holds
  // only the changes' part; serializing adds the base's, which an encoder that reads the base hashes as it
  // reads it (chunk_base_hash).
  bool base_pending = false;
};

namespace detail {

// With `known_base` the caller vouches for the bucket's base checksum (a sender that remembers the target
// checksums of what it sent last): unchanged elements are then only compared, never hashed.
// With `advance` (writable views of the base's memory) each change's target bits are written into the base
// right after they are read (see encode_bucket's advance_base).
template <element_word W>
bucket_changes<W> collect_changes(const model_layout& layout, const bucket_plan& plan, std::span<const const_tensor_view> base,
                                  std::span<const const_tensor_view> target, const encode_options& opt,
                                  const std::uint64_t* known_base = nullptr, std::span<const tensor_view> advance = {},
                                  bool defer_base = false) {
  bucket_changes<W> out;
  out.base_pending = defer_base && !known_base;
  const auto starts = segment_starts(plan.segments);
  out.numel = plan.numel();
  const std::uint64_t chunk = std::uint64_t{1} << opt.log2_chunk;
  const std::uint64_t chunks = (out.numel + chunk - 1) / chunk;
  out.chunk_first.reserve(chunks + 1);
  // Run-relative indices of one run's changes (a run lies inside one chunk), before values and hashes.
  std::vector<std::uint32_t> found(static_cast<std::size_t>(std::min(chunk, out.numel)) + 2);
  std::uint64_t base_sum = 0, delta_sum = 0;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    out.chunk_first.push_back(out.positions.size());
    const std::uint64_t first = c * chunk;
    for_each_run(layout, plan.segments, starts, first, std::min(chunk, out.numel - first), [&](const bucket_run& r) {
      // A base view without data stands for zeros: a full transfer is a patch from the all-zero model.
      const W* b = base[r.tensor].data ? word_ptr<W>(base[r.tensor]) + r.tensor_offset : nullptr;
      const W* t = word_ptr<W>(target[r.tensor]) + r.tensor_offset;
      const auto rel = static_cast<std::uint32_t>(r.bucket_first - first);
      W* adv = advance.empty() ? nullptr : word_ptr<W>(advance[r.tensor]) + r.tensor_offset;
      if (!known_base && !out.base_pending) base_sum += run_base_checksum<W>(b, r);
      // Find first, then code: the scan stays free of data-dependent branches and this loop of them.
      const auto k = static_cast<std::size_t>(find_differences(t, b, r.count, found.data()) - found.data());
      const std::size_t at = out.positions.size();
      out.positions.resize(at + k);
      out.values.resize(at + k);
      std::uint32_t* pos = out.positions.data() + at;
      W* val = out.values.data() + at;
      for (std::size_t j = 0; j < k; ++j) {
        const std::uint32_t i = found[j];
        const W old_bits = b ? b[i] : W{0};
        pos[j] = rel + i;
        val[j] = code_value<W>(opt.mode, old_bits, t[i]);
        delta_sum += element_hash(r.flat_index + i, t[i]) - element_hash(r.flat_index + i, old_bits);
        if (adv) adv[i] = t[i];
      }
    });
  }
  out.chunk_first.push_back(out.positions.size());
  if (known_base) base_sum = *known_base;
  out.base_checksum = base_sum;
  out.target_checksum = base_sum + delta_sum;
  return out;
}

// Chunk c's changes as an encoder sees them (without the base).
template <element_word W>
chunk_changes<W> chunk_of(const bucket_changes<W>& ch, std::size_t c, const encode_options& opt) {
  const std::uint64_t chunk = std::uint64_t{1} << opt.log2_chunk;
  const std::uint64_t first = c * chunk;
  chunk_changes<W> in;
  in.numel = static_cast<std::uint32_t>(std::min(chunk, ch.numel - first));
  in.mode = opt.mode;
  in.positions = std::span(ch.positions).subspan(ch.chunk_first[c], ch.chunk_first[c + 1] - ch.chunk_first[c]);
  in.values = std::span(ch.values).subspan(ch.chunk_first[c], ch.chunk_first[c + 1] - ch.chunk_first[c]);
  return in;
}

// Whether best_of<Es...> takes a member that reads the base into account: only where the link is stated
// (link_cost.hpp), unless every member reads it.
template <class... Es>
bool best_of_weighs_base_readers(const encode_options& opt) {
  return opt.link.stated() || (Es::needs_base && ...);
}
// Whether serializing with selection Sel reads the base with these options (then the base may only change after it).
template <class Sel>
struct selection_base_use {
  static bool with(const encode_options&) { return Sel::needs_base; }
};
template <class... Es>
struct selection_base_use<best_of<Es...>> {
  static bool with(const encode_options& opt) { return (Es::needs_base || ...) && best_of_weighs_base_readers<Es...>(opt); }
};

// Encoders that can tell their chunk data's length without encoding, and need no base to do so.
template <class E, class W>
concept sizes_without_encoding = !E::needs_base && requires(const chunk_changes<W>& in) {
  { E::template encoded_size<W>(in) } -> std::convertible_to<std::size_t>;
};

// Encoders that split encoding into a plan, which knows the chunk data's length, and the writing of it:
// best_of plans each chunk once, both to compare sizes and to encode.
template <class E, class W>
concept plans_chunks = sizes_without_encoding<E, W> && requires(const chunk_changes<W>& in, std::vector<unsigned char>& out) {
  { E::template plan<W>(in).bytes } -> std::convertible_to<std::size_t>;
  E::template encode<W>(in, out, E::template plan<W>(in));
};

// Appends the framed bucket encoded with E to `out`; encode_chunk(c, in, out) appends chunk c's data. Returns
// the bucket's base and target checksums.
template <class E, element_word W, class EncodeChunk>
std::pair<std::uint64_t, std::uint64_t> serialize_bucket_with(const model_layout& layout, const bucket_plan& plan, std::uint32_t index, const bucket_changes<W>& ch,
                           std::span<const const_tensor_view> base, const encode_options& opt, std::vector<unsigned char>& out,
                           EncodeChunk&& encode_chunk) {
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
  std::vector<W> chunk_base;  // (only where a chunk's base is not one span of memory)
  std::uint64_t base_sum = 0;  // (a pending base checksum)
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t before = out.size();
    const std::uint64_t first = c * chunk;
    chunk_changes<W> in = chunk_of(ch, c, opt);
    if constexpr (E::needs_base) in.base = chunk_base_view<W>(layout, plan.segments, starts, base, first, in.numel, chunk_base);
    // A pending base checksum: the encoder hashes the chunk's base where its elements lie at consecutive flat
    // indices, and the chunks it did not hash (no changes, or elements apart) are hashed here.
    chunk_base_hash chunk_hash;
    if (ch.base_pending && in.base.size() >= in.numel && start_chunk_hash(layout, plan.segments, starts, first, in.numel, chunk_hash))
      in.hash_base = &chunk_hash;
    encode_chunk(c, in, out);
    if (ch.base_pending)
      base_sum += chunk_hash.done ? chunk_hash.sum : bucket_base_checksum<W>(layout, plan.segments, starts, base, first, in.numel);
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
  hdr.base_checksum = ch.base_pending ? base_sum : ch.base_checksum;
  hdr.target_checksum = ch.base_pending ? base_sum + ch.target_checksum : ch.target_checksum;
  hdr.payload_checksum = payload_checksum;
  write_bucket_header(out.data() + start, hdr);
  return {hdr.base_checksum, hdr.target_checksum};
}

// Appends the framed bucket encoded with E to `out`.
template <class E, element_word W>
std::pair<std::uint64_t, std::uint64_t> serialize_bucket(const model_layout& layout, const bucket_plan& plan, std::uint32_t index,
                                                         const bucket_changes<W>& ch, std::span<const const_tensor_view> base,
                                                         const encode_options& opt, std::vector<unsigned char>& out) {
  return serialize_bucket_with<E, W>(layout, plan, index, ch, base, opt, out,
                              [](std::size_t, const chunk_changes<W>& in, std::vector<unsigned char>& o) { E::encode(in, o); });
}

// One best_of candidate's chunk sizes: their total, and for encoders that plan, the plans to encode with.
template <class E, class W>
struct candidate_sizes {
  std::uint64_t total = 0;
  void add(const chunk_changes<W>& in) { total += E::template encoded_size<W>(in); }
  void encode(std::size_t, const chunk_changes<W>& in, std::vector<unsigned char>& out) const { E::template encode<W>(in, out); }
};

template <class E, class W>
  requires plans_chunks<E, W>
struct candidate_sizes<E, W> {
  std::uint64_t total = 0;
  std::vector<decltype(E::template plan<W>(std::declval<const chunk_changes<W>&>()))> plans;
  void add(const chunk_changes<W>& in) {
    plans.push_back(E::template plan<W>(in));
    total += plans.back().bytes;
  }
  void encode(std::size_t c, const chunk_changes<W>& in, std::vector<unsigned char>& out) const {
    E::template encode<W>(in, out, plans[c]);
  }
};

template <class Sel>
struct bucket_serializer;

template <class E>
  requires encoder<E>
struct bucket_serializer<E> {
  template <element_word W>
  static std::pair<std::uint64_t, std::uint64_t> run(const model_layout& layout, const bucket_plan& plan, std::uint32_t index,
                                                     const bucket_changes<W>& ch, std::span<const const_tensor_view> base,
                                                     const encode_options& opt, std::vector<unsigned char>& out) {
    return serialize_bucket<E, W>(layout, plan, index, ch, base, opt, out);
  }
};

template <class... Es>
struct bucket_serializer<best_of<Es...>> {
  // The members first compared by their chunk data's lengths, without encoding (those that read no base), then
  // the others, each encoded in full; ties go to the first in that order.
  template <element_word W>
  static std::pair<std::uint64_t, std::uint64_t> run(const model_layout& layout, const bucket_plan& plan, std::uint32_t index,
                                                     const bucket_changes<W>& ch, std::span<const const_tensor_view> base,
                                                     const encode_options& opt, std::vector<unsigned char>& out) {
    if (ch.base_pending) throw error(errc::invalid_argument, "best_of: the bucket's base checksum must be computed first");
    const std::size_t start = out.size();
    bool have = false;
    double best_score = 0;
    using sized = decltype(std::tuple_cat(std::conditional_t<sizes_without_encoding<Es, W>, std::tuple<Es>, std::tuple<>>{}...));
    if constexpr (std::tuple_size_v<sized> > 0) {
      // Frames differ only in their chunk data: sum each encoder's data lengths, then encode once.
      [&]<class... Ss>(std::tuple<Ss...>*) {
        std::tuple<candidate_sizes<Ss, W>...> sizes;
        for (std::size_t c = 0; c + 1 < ch.chunk_first.size(); ++c) {
          const auto in = chunk_of(ch, c, opt);
          std::apply([&](auto&... e) { (e.add(in), ...); }, sizes);
        }
        const auto totals = std::apply([](const auto&... e) { return std::array<std::uint64_t, sizeof...(Ss)>{e.total...}; }, sizes);
        const std::size_t best = static_cast<std::size_t>(std::min_element(totals.begin(), totals.end()) - totals.begin());
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          auto encode_with = [&]<std::size_t J>() {
            using E = std::tuple_element_t<J, std::tuple<Ss...>>;
            serialize_bucket_with<E, W>(layout, plan, index, ch, base, opt, out,
                                        [&](std::size_t c, const chunk_changes<W>& in, std::vector<unsigned char>& o) {
                                          std::get<J>(sizes).encode(c, in, o);
                                        });
          };
          ((I == best ? encode_with.template operator()<I>() : void()), ...);
        }(std::index_sequence_for<Ss...>{});
      }(static_cast<sized*>(nullptr));
      have = true;
      best_score = static_cast<double>(out.size() - start);
    }
    std::vector<unsigned char> trial;
    auto try_one = [&]<class E>() {
      if constexpr (!sizes_without_encoding<E, W>) {
        if (E::needs_base && !best_of_weighs_base_readers<Es...>(opt)) return;
        trial.clear();
        serialize_bucket<E, W>(layout, plan, index, ch, base, opt, trial);
        const double score = static_cast<double>(trial.size()) + (E::needs_base ? opt.link.walk_as_bytes(ch.numel) : 0.0);
        if (!have || score < best_score) {
          out.resize(start);
          out.insert(out.end(), trial.begin(), trial.end());
          best_score = score;
          have = true;
        }
      }
    };
    (try_one.template operator()<Es>(), ...);
    if (!have) throw error(errc::invalid_argument, "best_of: no member could encode the bucket");  // (none listed weighs in)
    return {ch.base_checksum, ch.target_checksum};
  }
};

}  // namespace detail

// An encoder selection: one encoder type, or best_of<...>.
template <class S>
concept encoder_selection = encoder<S> || requires { typename detail::bucket_serializer<S>; sizeof(detail::bucket_serializer<S>); };

namespace detail {

// Writes the target bits of the bucket's changed elements into `base_storage` (views of the base's memory),
// which then holds the target: for a sender, far less work than copying the whole model.
template <element_word W>
void store_changes(const model_layout& layout, const bucket_plan& plan, const bucket_changes<W>& ch,
                   std::span<const const_tensor_view> target, std::span<const tensor_view> base_storage, unsigned log2_chunk) {
  const auto starts = segment_starts(plan.segments);
  const std::uint64_t chunk = std::uint64_t{1} << log2_chunk;
  for (std::size_t c = 0; c + 1 < ch.chunk_first.size(); ++c) {
    const std::uint64_t first = c * chunk;
    std::size_t i = ch.chunk_first[c];
    const std::size_t end = ch.chunk_first[c + 1];
    if (i == end) continue;
    for_each_run(layout, plan.segments, starts, first, std::min(chunk, ch.numel - first), [&](const bucket_run& r) {
      const W* t = word_ptr<W>(target[r.tensor]) + r.tensor_offset;
      W* b = word_ptr<W>(base_storage[r.tensor]) + r.tensor_offset;
      const std::uint64_t run_first = r.bucket_first - first;
      for (; i < end && ch.positions[i] < run_first + r.count; ++i) b[ch.positions[i] - run_first] = t[ch.positions[i] - run_first];
    });
  }
}

}  // namespace detail

// Encodes one bucket of the change from `base` to `target` and appends its frame to `out`;
// returns its base and target content checksums.
// `known_base`, when given, is the bucket's base checksum as the caller knows it (see collect_changes).
// `advance_base`, when not empty, are writable views of the memory `base` points to: once the bucket is
// encoded its changed elements are set to the target's, so the caller's copy of the base becomes the target.
template <class Sel>
std::pair<std::uint64_t, std::uint64_t> encode_bucket(const model_layout& layout, const bucket_plan& plan, std::uint32_t index,
                                                      std::span<const const_tensor_view> base, std::span<const const_tensor_view> target,
                                                      const encode_options& opt, std::vector<unsigned char>& out,
                                                      const std::uint64_t* known_base = nullptr,
                                                      std::span<const tensor_view> advance_base = {}) {
  static_assert(detail::check_encoder_selection_form<Sel>);
  // Written while the changes are collected (each element is in cache then), unless the encoder reads the base.
  const bool store_after = detail::selection_base_use<Sel>::with(opt);
  // One encoder that reads the base hashes it as it reads it (its bucket's checksum is then found while
  // serializing; best_of's candidates would each read it).
  constexpr bool hash_in_encode = [] {
    if constexpr (encoder<Sel>) return Sel::needs_base;
    else return false;
  }();
  return visit_word(plan.dtype, [&]<class W>() {
    const auto ch = detail::collect_changes<W>(layout, plan, base, target, opt, known_base,
                                               store_after ? std::span<const tensor_view>{} : advance_base, hash_in_encode);
    const auto sums = detail::bucket_serializer<Sel>::template run<W>(layout, plan, index, ch, base, opt, out);
    if (store_after && !advance_base.empty()) detail::store_changes<W>(layout, plan, ch, target, advance_base, opt.log2_chunk);
    return sums;
  });
}

SPARSESYNC_NS_END
