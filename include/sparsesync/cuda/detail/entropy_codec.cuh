// The device twin of codec/entropy.hpp (the specification; FORMAT.md 3.4.1): here one chunk decoded by one
// thread, as rice is, for rice bodies (tag 0) and chunks over 2^16 elements; class bodies of shorter chunks are
// decoded a warp per chunk (entropy_decode.cuh), and the encoder's size pass is a warp per chunk
// (entropy_plan.cuh). The classes come from the chunk's base elements, read through the resolved
// segments: on encode the base tensors, on apply the receiver's weights before anything is written (the decode
// passes run before the commit pass; a rollback cannot re-decode an entropy bucket, whose classes the commit
// changed, so such buckets keep their verify staging: plan.cuh).
//
// Per chunk the decoding thread keeps ~4.9 KB of per-group tables (entropy_chunk_tables) where its caller gives
// them room, in shared memory (apply_kernels.cuh: apply_entropy_alone_kernel, and lane 0 of the warp decoder),
// never on its stack. Each change's (group, rank) is kept beside it in scratch (the apply's staging slot, 8 + 24
// bits), and each group's parameters are checked by a pass over the chunk's changes: O(groups x changes) per chunk.
#pragma once

#include <sparsesync/codec/entropy_params.hpp>
#include <sparsesync/codec/rice_params.hpp>
#include <sparsesync/cuda/detail/chunk_codec.cuh>
#include <sparsesync/cuda/types.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

inline constexpr unsigned entropy_rank_bits = 24;  // ranks and positions are below 2^max_log2_chunk
static_assert(max_log2_chunk <= entropy_rank_bits, "sparsesync: entropy packs a group and a rank into 32 bits");
inline constexpr std::uint32_t entropy_rank_mask = (1u << entropy_rank_bits) - 1;

// Reads a chunk's base elements in order from the resolved segments (a = base on encode, model on apply).
// An element outside every segment (never, for a validated bucket) reads as 0 instead of out of bounds.
template <class W>
class base_walker {
 public:
  SPARSESYNC_DEVICE base_walker(const resolved_segment* segs, std::uint32_t count, std::uint64_t first)
      : segs_(segs), count_(count), e_(first) {
    s_ = count ? find_segment(segs, 0, count, first) : 0;
    load();
  }

  SPARSESYNC_DEVICE W next() {
    if (e_ >= end_ && s_ + 1 < count_) {
      while (s_ + 1 < count_ && e_ >= segs_[s_].bucket_first + segs_[s_].count) ++s_;
      load();
    }
    const W v = ptr_ != nullptr && e_ >= first_ && e_ < end_ ? ptr_[e_ - first_] : W{0};
    ++e_;
    return v;
  }

 private:
  SPARSESYNC_DEVICE void load() {
    if (count_ == 0) return;
    const resolved_segment& sg = segs_[s_];
    first_ = sg.bucket_first;
    end_ = sg.bucket_first + sg.count;
    ptr_ = static_cast<const W*>(sg.a);
  }

  const resolved_segment* segs_;
  std::uint32_t count_;
  std::uint32_t s_ = 0;
  std::uint64_t e_;
  std::uint64_t first_ = 0, end_ = 0;
  const W* ptr_ = nullptr;
};

// A chunk's groups (codec/entropy.hpp make_entropy_groups).
struct entropy_dev_groups {
  std::uint8_t of_class[256];
  std::uint32_t size[256];
  unsigned count;
};

template <class W>
SPARSESYNC_DEVICE unsigned entropy_dev_group(const entropy_dev_groups& g, W bits) {
  return g.of_class[entropy_params::class_of<W>(bits)];
}

// The groups of a chunk of n elements (codec/entropy.hpp entropy_groups_of) from its class counts, handed over one
// class at a time in increasing order (add, then finish): of_class[c] becomes the group of class c and, for groups
// g < cap, size[g] the group's element count and from[g] (where given) its first class. Group g is closed only
// after class c >= g was handed over, so size may be the array the counts come from.
struct entropy_group_builder {
  std::uint32_t min_size, open = 0;
  unsigned count = 0, open_from = 0;
  SPARSESYNC_DEVICE explicit entropy_group_builder(std::uint32_t n)
      : min_size((n >> entropy_params::group_shift) > 1 ? (n >> entropy_params::group_shift) : 1u) {}
  SPARSESYNC_DEVICE void add(unsigned c, std::uint32_t s, std::uint32_t* size, std::uint8_t* of_class, std::uint16_t* from, unsigned cap) {
    if (s == 0) return;
    if (open == 0) open_from = c;
    of_class[c] = static_cast<std::uint8_t>(count);
    open += s;
    if (open >= min_size) {
      if (count < cap) {
        if (from) from[count] = static_cast<std::uint16_t>(open_from);
        size[count] = open;
      }
      ++count;
      open = 0;
    }
  }
  // Returns the group count (cap >= 1).
  template <unsigned classes>
  SPARSESYNC_DEVICE unsigned finish(std::uint32_t* size, std::uint8_t* of_class, std::uint16_t* from, unsigned cap) {
    if (open > 0) {
      if (count == 0) {
        if (from) from[0] = static_cast<std::uint16_t>(open_from);
        size[count++] = open;
      } else {
        for (unsigned c = open_from; c < classes; ++c) of_class[c] = static_cast<std::uint8_t>(count - 1);
        if (count - 1 < cap) size[count - 1] += open;
      }
    }
    return count;
  }
};

// The groups from a class histogram in size[0, classes), in place (entropy_group_builder). Returns the group count.
template <class W>
SPARSESYNC_DEVICE unsigned entropy_groups_from_counts(std::uint32_t* size, std::uint8_t* of_class, std::uint16_t* from, std::uint32_t n) {
  constexpr unsigned classes = entropy_params::class_count<W>;
  entropy_group_builder b(n);
  for (unsigned c = 0; c < classes; ++c) b.add(c, size[c], size, of_class, from, classes);
  return b.finish<classes>(size, of_class, from, classes);
}

template <class W>
SPARSESYNC_DEVICE void entropy_make_groups(entropy_dev_groups& g, base_walker<W> base, std::uint32_t n) {
  for (unsigned c = 0; c < entropy_params::class_count<W>; ++c) g.size[c] = 0;
  for (std::uint32_t i = 0; i < n; ++i) ++g.size[entropy_params::class_of<W>(base.next())];
  g.count = entropy_groups_from_counts<W>(g.size, g.of_class, nullptr, n);
}

// For each change (`changes.for_each(f(pos, slot))`, positions increasing and below the chunk's length):
// out(slot, group << 24 | rank), its rank among its group's elements; seen[] counts each group's elements.
template <class W, class Changes, class Out>
SPARSESYNC_DEVICE void entropy_rank_changes(const entropy_dev_groups& g, base_walker<W> base, const Changes& changes, std::uint32_t* seen,
                                            Out&& out) {
  for (unsigned i = 0; i < g.count; ++i) seen[i] = 0;
  std::uint32_t i = 0;
  changes.for_each([&](std::uint32_t pos, std::uint64_t slot) {
    for (; i < pos; ++i) ++seen[entropy_dev_group(g, base.next())];
    const unsigned grp = entropy_dev_group(g, base.next());
    ++i;
    out(slot, (static_cast<std::uint32_t>(grp) << entropy_rank_bits) | seen[grp]++);
  });
}

// The best Rice parameter in [0, max_k] of costs c[] (ties to the smaller, as the host's entropy_best_k).
template <unsigned N>
SPARSESYNC_DEVICE unsigned entropy_best(const std::uint32_t (&c)[N], unsigned max_k, std::uint32_t& cost) {
  unsigned best = 0;
  cost = c[0];
#pragma unroll
  for (unsigned k = 1; k < N; ++k)
    if (k <= max_k && c[k] < cost) {
      cost = c[k];
      best = k;
    }
  return best;
}

// A chunk's fitted parameters (codec/entropy.hpp entropy_fit).
struct entropy_dev_fit {
  std::uint32_t changes[256];
  std::uint8_t k_gap[256], k_val[256];
  std::uint64_t bits;  // the class body's bits, tag byte excluded
};

// `src.for_each(f(group, rank, coded value))` visits the m changes in position order.
template <class W, class Src>
SPARSESYNC_DEVICE void entropy_fit(const entropy_dev_groups& g, value_mode mode, std::uint32_t m, const Src& src, entropy_dev_fit& f) {
  constexpr unsigned wbits = 8 * sizeof(W);
  const bool ulp = mode == value_mode::ulp;
  for (unsigned i = 0; i < g.count; ++i) {
    f.changes[i] = 0;
    f.k_gap[i] = f.k_val[i] = 0;
  }
  src.for_each([&](unsigned grp, std::uint32_t, W) { ++f.changes[grp]; });
  std::uint64_t bits = 0;
  std::uint32_t remaining = m;
  for (unsigned gi = 0; gi < g.count; ++gi) {
    const std::uint32_t n = g.size[gi], c = f.changes[gi];
    if (gi + 1 < g.count) bits += entropy_params::count_bits(n, remaining);
    remaining -= c;
    if (c == 0) continue;
    const bool gaps = c < n;
    const unsigned raw = gaps ? entropy_params::gap_raw_bits(n) : 0;
    std::uint32_t gc[entropy_params::max_gap_k + 1], vc[wbits];
#pragma unroll
    for (unsigned k = 0; k <= entropy_params::max_gap_k; ++k) gc[k] = 0;
#pragma unroll
    for (unsigned k = 0; k < wbits; ++k) vc[k] = 0;
    std::uint32_t next = 0;
    src.for_each([&](unsigned grp, std::uint32_t rank, W v) {
      if (grp != gi) return;
      if (gaps) {
        const std::uint32_t gap = rank - next;
        next = rank + 1;
#pragma unroll
        for (unsigned k = 0; k <= entropy_params::max_gap_k; ++k) gc[k] += rice_params::code_bits<std::uint32_t>(gap, k, raw);
      }
      if (ulp) {
        const std::uint32_t code = static_cast<std::uint32_t>(zigzag<W>(v)) - 1u;
#pragma unroll
        for (unsigned k = 0; k < wbits; ++k) vc[k] += rice_params::code_bits<std::uint32_t>(code, k, wbits);
      }
    });
    std::uint32_t cost = 0;
    if (gaps) {
      f.k_gap[gi] = static_cast<std::uint8_t>(entropy_best(gc, entropy_params::max_gap_k_of(n), cost));
      bits += entropy_params::gap_k_bits(n) + cost;
    }
    if (ulp) {
      f.k_val[gi] = static_cast<std::uint8_t>(entropy_best(vc, wbits - 1, cost));
      bits += entropy_params::value_k_bits<W>(f.k_val[gi]) + cost;
    }
  }
  if (!ulp) bits += std::uint64_t{wbits} * m;
  f.bits = bits;
}

SPARSESYNC_DEVICE std::uint64_t entropy_class_bytes(std::uint64_t bits) { return 1 + (bits + 7) / 8; }

// The tables of a chunk that one thread decodes (entropy_decode_chunk: up to 256 groups, ~4.9 KB). The caller
// gives them room (the warp decoder's shared memory), never the thread's stack: the driver reserves a kernel's
// stack frame for every thread the GPU can hold, for as long as the context lives (10800 bytes a thread held
// 2642 MB of an H100 while these tables were locals: bench/results/gpu-test-runs/s17/callJ).
struct entropy_chunk_tables {
  entropy_dev_groups g;
  entropy_dev_fit f;         // the parameters and change counts of each group, read or fitted
  std::uint32_t first[257];  // each group's first change in group order
  std::uint32_t seen[256];   // each group's elements walked so far (ranks; the decoder's next change per group)
};

// ---- encode: entropy_plan.cuh (a warp per chunk) ----

// ---- decode ----

// Changes staged as (chunk-relative position or group << 24 | rank, coded value) in spos / sval; as positions
// and values they are a staged_changes (chunk_codec.cuh).
template <class W>
struct entropy_staged_ranked {
  const std::uint32_t* spos;
  const std::uint32_t* sval;
  std::uint32_t n;
  template <class F>
  SPARSESYNC_DEVICE void for_each(F&& f) const {
    for (std::uint32_t j = 0; j < n; ++j) f(spos[j] >> entropy_rank_bits, spos[j] & entropy_rank_mask, static_cast<W>(sval[j]));
  }
};

// The staged positions with their slots (entropy_rank_changes' input).
struct entropy_staged_slots {
  const std::uint32_t* spos;
  std::uint32_t n;
  template <class F>
  SPARSESYNC_DEVICE void for_each(F&& f) const {
    for (std::uint32_t j = 0; j < n; ++j) f(spos[j], std::uint64_t{j});
  }
};

template <class Reader>
SPARSESYNC_DEVICE errc entropy_rice_get(Reader& r, unsigned k, unsigned raw_bits, std::uint64_t& v) {
  if (r.try_rice(k, rice_params::escape, v)) return errc::ok;  // (the short codes: one step, fewer dependent loads)
  const unsigned q = r.get_unary(rice_params::escape);
  if (q < rice_params::escape) {
    v = (std::uint64_t{q} << k) | r.get(k);
    return r.failed() ? errc::truncated : errc::ok;
  }
  v = r.get(raw_bits);
  if (r.failed()) return errc::truncated;
  return (v >> k) >= rice_params::escape ? errc::ok : errc::non_canonical;
}

// rice's fitted data length for the staged changes (positions in spos), and its parameters in plan.
template <class W>
SPARSESYNC_DEVICE std::uint64_t entropy_rice_bytes(value_mode mode, std::uint32_t numel, std::uint32_t n, const std::uint32_t* spos,
                                                   const std::uint32_t* sval, chunk_plan& plan) {
  staged_changes<W> src{spos, sval, n};
  return chunk_data_size<W>(encoder_id::rice, mode, numel, n, src, plan);
}

// Tag 0: rice's data, whose parameters must be rice's fitted ones, and a class body that would not be smaller.
template <class W>
SPARSESYNC_DEVICE errc entropy_decode_fallback(value_mode mode, const unsigned char* data, std::uint32_t len, std::uint32_t numel,
                                               std::uint32_t n, const base_walker<W>& base, const unsigned char* lo,
                                               const unsigned char* hi, std::uint32_t* spos, std::uint32_t* sval, entropy_chunk_tables& t) {
  chunk_decoder<W> dec(encoder_id::rice, mode, data + 1, len - 1, numel, n, lo, hi);
  errc e = dec.init();
  for (std::uint32_t j = 0; j < n && e == errc::ok; ++j) {
    std::uint32_t pos = 0;
    W v = 0;
    e = dec.next(pos, v);
    spos[j] = pos;
    sval[j] = v;
  }
  if (e == errc::ok) e = dec.finish();
  if (e != errc::ok) return e;
  if (const errc pe = check_rice_parameters<W>(mode, numel, data + 1, staged_changes<W>{spos, sval, n}); pe != errc::ok) return pe;
  entropy_dev_groups& g = t.g;
  entropy_make_groups<W>(g, base, numel);
  // Ranks replace the positions while the class body is priced, then the positions are found again.
  std::uint32_t* const seen = t.seen;
  entropy_rank_changes<W>(g, base, entropy_staged_slots{spos, n}, seen, [&](std::uint64_t slot, std::uint32_t a) { spos[slot] = a; });
  entropy_fit<W>(g, mode, n, entropy_staged_ranked<W>{spos, sval, n}, t.f);
  const bool smaller = entropy_class_bytes(t.f.bits) < len;
  for (unsigned i = 0; i < g.count; ++i) seen[i] = 0;
  base_walker<W> b = base;
  std::uint32_t j = 0;
  for (std::uint32_t i = 0; j < n; ++i) {
    if (i >= numel) return errc::malformed;  // (never: every rank was taken from an element of the chunk)
    const unsigned grp = entropy_dev_group(g, b.next());
    const std::uint32_t a = spos[j];
    if (grp == (a >> entropy_rank_bits) && seen[grp] == (a & entropy_rank_mask)) spos[j++] = i;
    ++seen[grp];
  }
  return smaller ? errc::non_canonical : errc::ok;
}

// The values of a class body, in position order, from `r` (just past the gaps) into sval[0, n): change j's
// parameter is k_of(j) (ulp mode). The data must end with them.
template <class W, class KOf>
SPARSESYNC_DEVICE errc entropy_read_values(value_mode mode, bit_reader& r, std::uint32_t n, KOf&& k_of, std::uint32_t* sval) {
  constexpr unsigned wbits = 8 * sizeof(W);
  if (mode == value_mode::ulp) {
    for (std::uint32_t j = 0; j < n; ++j) {
      std::uint64_t code = 0;
      if (const errc e = entropy_rice_get(r, k_of(j), wbits, code); e != errc::ok) return e;
      if (code >= (std::uint64_t{1} << wbits) - 1) return errc::malformed;
      sval[j] = unzigzag<W>(static_cast<W>(code + 1));
    }
  } else {
    for (std::uint32_t j = 0; j < n; ++j) sval[j] = static_cast<W>(r.get(wbits));
    if (r.failed()) return errc::truncated;
  }
  return r.at_padded_end() ? errc::ok : errc::malformed;
}

// The checks that end a class body's decode, once its values are read: the value parameters must be the fitted
// ones (`fitted`: so were the gap parameters), and the class body the smaller choice. spos holds each change's
// position with its group in the bits from entropy_rank_bits up (cleared here); k_val and changes are per group,
// `groups` of them.
template <class W>
SPARSESYNC_DEVICE errc entropy_check_values(value_mode mode, std::uint32_t len, std::uint32_t numel, std::uint32_t n, unsigned groups,
                                            const std::uint8_t* k_val, const std::uint32_t* changes, bool fitted, std::uint32_t* spos,
                                            const std::uint32_t* sval) {
  constexpr unsigned wbits = 8 * sizeof(W);
  if (mode == value_mode::ulp) {
    for (unsigned gi = 0; gi < groups && fitted; ++gi) {
      if (changes[gi] == 0) continue;
      std::uint32_t vc[wbits];
#pragma unroll
      for (unsigned k = 0; k < wbits; ++k) vc[k] = 0;
      for (std::uint32_t j = 0; j < n; ++j) {
        if ((spos[j] >> entropy_rank_bits) != gi) continue;
        const std::uint32_t code = static_cast<std::uint32_t>(zigzag<W>(static_cast<W>(sval[j]))) - 1u;
#pragma unroll
        for (unsigned k = 0; k < wbits; ++k) vc[k] += rice_params::code_bits<std::uint32_t>(code, k, wbits);
      }
      std::uint32_t cost = 0;
      if (entropy_best(vc, wbits - 1, cost) != k_val[gi]) fitted = false;
    }
  }
  for (std::uint32_t j = 0; j < n; ++j) spos[j] &= entropy_rank_mask;
  if (!fitted) return errc::non_canonical;
  // Exactly consumed with the fitted parameters, the data is the class body's length: it must beat rice's.
  chunk_plan rp;
  if (std::uint64_t{len} >= 1 + entropy_rice_bytes<W>(mode, numel, n, spos, sval, rp)) return errc::non_canonical;
  return errc::ok;
}

// The header and the gaps of a class body of the groups t.g (the tag byte read by the caller, r just past it):
// each group's change count (t.f.changes), first change in group order (t.first) and parameters (t.f.k_gap,
// t.f.k_val), each change's gap into sval[0, n) in group order (a wholly changed group's: 0); fitted stays true
// only if every gap parameter is the fitted one. r is left at the values.
template <class W>
SPARSESYNC_DEVICE errc entropy_chunk_header_gaps(value_mode mode, bit_reader& r, std::uint32_t len, std::uint32_t n, entropy_chunk_tables& t,
                                                 std::uint32_t* sval, bool& fitted) {
  constexpr unsigned wbits = 8 * sizeof(W);
  const bool ulp = mode == value_mode::ulp;
  const entropy_dev_groups& g = t.g;
  const unsigned groups = g.count;
  std::uint32_t* const changes = t.f.changes;
  std::uint32_t* const first = t.first;
  std::uint8_t* const k_gap = t.f.k_gap;
  std::uint8_t* const k_val = t.f.k_val;
  std::uint32_t remaining = n;
  for (unsigned gi = 0; gi < groups; ++gi) {
    const std::uint32_t size = g.size[gi];
    std::uint32_t c = remaining;
    if (gi + 1 < groups) {
      c = r.get(entropy_params::count_bits(size, remaining));
      if (c > (size < remaining ? size : remaining)) return errc::malformed;
    } else if (c > size) {
      return errc::malformed;
    }
    changes[gi] = c;
    remaining -= c;
    k_gap[gi] = k_val[gi] = 0;
    if (c > 0 && c < size) {
      k_gap[gi] = static_cast<std::uint8_t>(r.get(entropy_params::gap_k_bits(size)));
      if (k_gap[gi] > entropy_params::max_gap_k_of(size)) return errc::malformed;
    }
    if (c > 0 && ulp) k_val[gi] = static_cast<std::uint8_t>(r.get_unary(wbits - 1));
  }
  if (r.failed()) return errc::truncated;
  first[0] = 0;
  std::uint64_t least = 0;
  for (unsigned gi = 0; gi < groups; ++gi) {
    first[gi + 1] = first[gi] + changes[gi];
    if (changes[gi] < g.size[gi]) least += changes[gi];
  }
  if (least > 8 * std::uint64_t{len}) return errc::truncated;
  // Gaps, group by group, into sval (group order); each group's gap parameter priced as they are read.
  for (unsigned gi = 0; gi < groups; ++gi) {
    const std::uint32_t size = g.size[gi], c = changes[gi];
    if (c == size) {
      for (std::uint32_t i = first[gi]; i < first[gi + 1]; ++i) sval[i] = 0;
      continue;
    }
    if (c == 0) continue;
    const unsigned raw = entropy_params::gap_raw_bits(size);
    std::uint32_t gc[entropy_params::max_gap_k + 1];
#pragma unroll
    for (unsigned k = 0; k <= entropy_params::max_gap_k; ++k) gc[k] = 0;
    std::uint64_t next = 0;
    for (std::uint32_t i = first[gi]; i < first[gi + 1]; ++i) {
      std::uint64_t gap = 0;
      if (const errc e = entropy_rice_get(r, k_gap[gi], raw, gap); e != errc::ok) return e;
      next += gap;
      if (next >= size) return errc::index_out_of_range;
      sval[i] = static_cast<std::uint32_t>(gap);
      ++next;
#pragma unroll
      for (unsigned k = 0; k <= entropy_params::max_gap_k; ++k) gc[k] += rice_params::code_bits<std::uint32_t>(static_cast<std::uint32_t>(gap), k, raw);
    }
    std::uint32_t cost = 0;
    if (entropy_best(gc, entropy_params::max_gap_k_of(size), cost) != k_gap[gi]) fitted = false;
  }
  return errc::ok;
}

// The placing walk's start: group g's next change is after skip[g] more of its elements (none: it has no more),
// and cursor[g] is that change's index in group order. skip takes the group sizes' table (read no more).
inline constexpr std::uint32_t entropy_no_change = ~std::uint32_t{0};
SPARSESYNC_DEVICE void entropy_place_start(entropy_chunk_tables& t, const std::uint32_t* gaps, unsigned from, unsigned step) {
  for (unsigned gi = from; gi < t.g.count; gi += step) {
    t.seen[gi] = t.first[gi];
    t.g.size[gi] = t.f.changes[gi] > 0 ? gaps[t.first[gi]] : entropy_no_change;
  }
}

// The end of a class body's decode, its changes placed (spos: position with the group in the bits from
// entropy_rank_bits up): the values from r, then the checks that need them.
template <class W>
SPARSESYNC_DEVICE errc entropy_chunk_values(value_mode mode, bit_reader& r, std::uint32_t len, std::uint32_t numel, std::uint32_t n,
                                            const entropy_chunk_tables& t, bool fitted, std::uint32_t* spos, std::uint32_t* sval) {
  const std::uint8_t* const k_val = t.f.k_val;
  if (const errc e = entropy_read_values<W>(mode, r, n, [&](std::uint32_t j) { return k_val[spos[j] >> entropy_rank_bits]; }, sval);
      e != errc::ok)
    return e;
  return entropy_check_values<W>(mode, len, numel, n, t.g.count, k_val, t.f.changes, fitted, spos, sval);
}

// Decodes a chunk's entropy data into spos[0, n) (chunk-relative positions) and sval[0, n) (coded values)
// with the host decoder's checks, in one thread. `base` starts at the chunk's first element; [lo, hi) bounds the
// allocation holding the data (the frame); t is the thread's.
template <class W>
SPARSESYNC_DEVICE errc entropy_decode_chunk(value_mode mode, const unsigned char* data, std::uint32_t len, std::uint32_t numel,
                                            std::uint32_t n, const base_walker<W>& base, const unsigned char* lo,
                                            const unsigned char* hi, std::uint32_t* spos, std::uint32_t* sval, entropy_chunk_tables& t) {
  if (n == 0) return len == 0 ? errc::ok : errc::malformed;
  if (len == 0) return errc::truncated;
  if (data[0] == entropy_params::tag_rice) return entropy_decode_fallback<W>(mode, data, len, numel, n, base, lo, hi, spos, sval, t);
  if (data[0] != entropy_params::tag_classes) return errc::malformed;
  entropy_make_groups<W>(t.g, base, numel);
  bit_reader r(data + 1, data + len, lo, hi);
  bool fitted = true;
  if (const errc e = entropy_chunk_header_gaps<W>(mode, r, len, n, t, sval, fitted); e != errc::ok) return e;
  // Positions: walk the chunk, counting each group's elements, until every change is placed; the group of
  // each change rides in the top bits of its staged position until the values are read.
  entropy_place_start(t, sval, 0, 1);
  std::uint32_t* const skip = t.g.size;
  std::uint32_t* const cursor = t.seen;
  base_walker<W> b = base;
  std::uint32_t placed = 0;
  for (std::uint32_t i = 0; placed < n; ++i) {
    if (i >= numel) return errc::malformed;  // (never: the counts sum to n and the ranks are below the sizes)
    const unsigned gi = entropy_dev_group(t.g, b.next());
    if (skip[gi] != 0) {
      --skip[gi];
      continue;
    }
    spos[placed++] = (static_cast<std::uint32_t>(gi) << entropy_rank_bits) | i;
    skip[gi] = ++cursor[gi] < t.first[gi + 1] ? sval[cursor[gi]] : entropy_no_change;
  }
  return entropy_chunk_values<W>(mode, r, len, numel, n, t, fitted, spos, sval);
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
