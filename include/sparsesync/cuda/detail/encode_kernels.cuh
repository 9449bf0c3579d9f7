// The GPU encoder's kernels after change detection (detect.cuh): per-chunk size and write passes (a warp per
// chunk for the byte-aligned encoders, a thread per chunk for rice, entropy_plan.cuh for entropy) and the finalize pass that writes the
// segment table and the bucket header. The pipeline is described in cuda/encode.cuh; launched by
// dispatch_encode.cuh.
#pragma once

#include <sparsesync/codec/encoder.hpp>
#include <sparsesync/cuda/detail/chunk_codec.cuh>
#include <sparsesync/cuda/detail/detect.cuh>
#include <sparsesync/cuda/detail/entropy_codec.cuh>
#include <sparsesync/cuda/detail/warp_decode.cuh>
#include <sparsesync/cuda/types.cuh>
#include <sparsesync/format/wire.hpp>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

template <class W>
struct value_group {
  uint4 v[sizeof(W) == 4 ? 2 : 1];
};

template <class W>
SPARSESYNC_DEVICE value_group<W> load_values8(const W* p) {
  value_group<W> g;
  if constexpr (sizeof(W) == 1) {
    const uint2 x = *reinterpret_cast<const uint2*>(p);
    g.v[0] = make_uint4(x.x, x.y, 0, 0);
  } else if constexpr (sizeof(W) == 2) {
    g.v[0] = *reinterpret_cast<const uint4*>(p);
  } else {
    g.v[0] = reinterpret_cast<const uint4*>(p)[0];
    g.v[1] = reinterpret_cast<const uint4*>(p)[1];
  }
  return g;
}

template <class W>
SPARSESYNC_DEVICE W value_at(const value_group<W>& g, int k) {
  if constexpr (sizeof(W) == 4) return k < 4 ? vec_get<W>(g.v[0], k) : vec_get<W>(g.v[sizeof(W) == 4 ? 1 : 0], k - 4);
  return vec_get<W>(g.v[0], k);
}

// A chunk's compacted changes: its tiles' runs of (u16 tile-relative position, coded value), in order. One
// thread walks them with the next group of 8 (and the next tile's header) already in flight.
template <class W>
struct compact_source {
  const std::uint16_t* pos;
  const W* val;
  const std::uint64_t* tile_off;
  const std::uint32_t* tile_cnt;
  std::uint64_t t0, t1;
  unsigned tile_log2;

  template <class F>
  SPARSESYNC_DEVICE void for_each(F&& f) const {
    std::uint32_t cnt = t0 < t1 ? tile_cnt[t0] : 0;
    std::uint64_t off = t0 < t1 ? tile_off[t0] : 0;
    for (std::uint64_t t = t0; t < t1; ++t) {
      std::uint32_t next_cnt = 0;
      std::uint64_t next_off = 0;
      if (t + 1 < t1) {
        next_cnt = tile_cnt[t + 1];
        next_off = tile_off[t + 1];
      }
      if (cnt) {
        const std::uint32_t base = static_cast<std::uint32_t>(t - t0) << tile_log2;
        uint4 pv = *reinterpret_cast<const uint4*>(pos + off);
        value_group<W> vv = load_values8<W>(val + off);
        for (std::uint32_t i = 0; i < cnt; i += 8) {
          const bool more = i + 8 < cnt;
          uint4 pn = pv;
          value_group<W> vn = vv;
          if (more) {
            pn = *reinterpret_cast<const uint4*>(pos + off + i + 8);
            vn = load_values8<W>(val + off + i + 8);
          }
          const int m = cnt - i < 8 ? static_cast<int>(cnt - i) : 8;
#pragma unroll 1
          for (int k = 0; k < m; ++k) f(base + vec_get<std::uint16_t>(pv, k), value_at<W>(vv, k));  // one copy of f
          pv = pn;
          vv = vn;
        }
      }
      cnt = next_cnt;
      off = next_off;
    }
  }

  // As for_each, one change at a time, with its scratch slot (entropy keeps a word per change beside it).
  template <class F>
  SPARSESYNC_DEVICE void for_each_slot(F&& f) const {
    for (std::uint64_t t = t0; t < t1; ++t) {
      const std::uint32_t cnt = tile_cnt[t];
      const std::uint64_t off = tile_off[t];
      const std::uint32_t base = static_cast<std::uint32_t>(t - t0) << tile_log2;
      for (std::uint32_t i = 0; i < cnt; ++i) f(base + pos[off + i], val[off + i], off + i);
    }
  }
};

struct encode_counters {
  std::uint64_t allocated;
  std::uint64_t data_total;
  std::uint64_t changed[hash_slots];
  std::uint64_t base[hash_slots];
  std::uint64_t delta[hash_slots];
  // reset by the write phase:
  std::uint64_t payload[hash_slots];
  std::int32_t error;
  std::int32_t reserved;
};

struct chunk_pass_params {
  std::uint64_t numel;
  std::uint32_t chunk_count;
  unsigned log2_chunk;
  unsigned tile_log2;
  std::uint64_t num_tiles;
  encoder_id enc;
  value_mode mode;
  const std::uint16_t* pos;
  const void* val;
  const std::uint64_t* tile_off;
  const std::uint32_t* tile_cnt;
  std::uint64_t capacity;
  chunk_plan* plans;
  std::uint64_t* chunk_bytes;
  const std::uint64_t* chunk_off;
  encode_counters* ctr;
  unsigned char* out;
  std::uint64_t out_capacity;
  std::uint32_t segment_count;
  const resolved_segment* segs;  // entropy: the base, read again by the size and write passes
  std::uint32_t* aux;            // entropy: a word per change slot (group << 24 | rank), filled by the size pass
};

template <class W>
SPARSESYNC_DEVICE compact_source<W> chunk_source(const chunk_pass_params& p, std::uint32_t c) {
  const std::uint64_t per = std::uint64_t{1} << (p.log2_chunk - p.tile_log2);
  const std::uint64_t t0 = c * per;
  const std::uint64_t t1 = t0 + per < p.num_tiles ? t0 + per : p.num_tiles;
  return {p.pos, static_cast<const W*>(p.val), p.tile_off, p.tile_cnt, t0, t1, p.tile_log2};
}

SPARSESYNC_DEVICE std::uint32_t chunk_numel(std::uint64_t numel, unsigned log2_chunk, std::uint32_t c) {
  const std::uint64_t first = std::uint64_t{c} << log2_chunk;
  const std::uint64_t size = std::uint64_t{1} << log2_chunk;
  return static_cast<std::uint32_t>(numel - first < size ? numel - first : size);
}

template <class W, class P>
SPARSESYNC_KERNEL void __launch_bounds__(P::chunk_threads) chunk_size_kernel(chunk_pass_params p) {
  const std::uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= p.chunk_count || p.ctr->allocated > p.capacity) return;
  auto src = chunk_source<W>(p, c);
  std::uint32_t n = 0;
  for (std::uint64_t t = src.t0; t < src.t1; ++t) n += p.tile_cnt[t];
  chunk_plan plan;
  p.chunk_bytes[c] = chunk_data_size<W>(p.enc, p.mode, chunk_numel(p.numel, p.log2_chunk, c), n, src, plan);
  p.plans[c] = plan;
  if (n) atomicAdd(reinterpret_cast<unsigned long long*>(p.ctr->changed + c % hash_slots), static_cast<unsigned long long>(n));
}

SPARSESYNC_HD std::uint64_t frame_bytes_of(std::uint32_t segments, std::uint32_t chunks, std::uint64_t data) {
  return bucket_header_bytes + segment_entry_bytes * std::uint64_t{segments} + chunk_entry_bytes * std::uint64_t{chunks} + data;
}

template <class W, class P>
SPARSESYNC_KERNEL void __launch_bounds__(P::chunk_threads) chunk_write_kernel(chunk_pass_params p) {
  const std::uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= p.chunk_count || p.ctr->allocated > p.capacity) return;
  if (frame_bytes_of(p.segment_count, p.chunk_count, p.ctr->data_total) > p.out_capacity) return;
  unsigned char* table = p.out + bucket_header_bytes + segment_entry_bytes * std::uint64_t{p.segment_count};
  unsigned char* data = table + chunk_entry_bytes * std::uint64_t{p.chunk_count};
  const chunk_plan plan = p.plans[c];
  const std::uint64_t bytes = p.chunk_bytes[c];
  const std::uint64_t entry = std::uint64_t{plan.changes} | (bytes << 32);
  store_le64(table + chunk_entry_bytes * std::uint64_t{c}, entry);
  std::uint64_t digest;
  if (plan.changes) {
    const auto src = chunk_source<W>(p, c);
    chunk_writer<true, true> w(data + p.chunk_off[c], bytes, c, entry);
    encode_chunk<W>(p.enc, p.mode, chunk_numel(p.numel, p.log2_chunk, c), plan, src, w);
    if (!w.finish()) atomicExch(&p.ctr->error, 1);
    digest = w.digest();
  } else {
    xxh64_state h(c);
    h.update_word(entry);
    digest = h.digest();
  }
  atomicAdd(reinterpret_cast<unsigned long long*>(p.ctr->payload + c % hash_slots), static_cast<unsigned long long>(digest));
}

// ---- warp-per-chunk size and write passes for raw_index32, delta_varint and bitmap ----
static_assert(device_encoder_count == 5,
              "sparsesync: encoder_table (codec/encoder_table.hpp) gained a row: give it warp-per-chunk size and write passes here, or send it to the thread-per-chunk kernels (warp_encoder)");
// Lanes take consecutive changes; byte offsets come from warp scans of per-change byte counts, so each lane
// writes its own bytes (no two lanes share a byte; bitmap bits that share a byte are merged first), then the
// warp hashes the chunk (warp_hash_chunk).

// Calls f(act, rank, pos, value, prev) on all lanes for each group of 32 consecutive changes of the chunk;
// `prev` is the position of the change before (or ~0u before the first). Groups run across tile boundaries: the
// lanes read the counts and offsets of 32 tiles at once and each lane finds its change's tile from the warp's
// running counts (a ballot and the few tile ends inside its group of 32). (Tile by tile, a 64K-element chunk at 1%
// took 32 groups of ~20 changes, each behind two dependent loads of its tile's count and offset: the size and write
// passes were latency-bound, 0.04 + 0.09 ms per 512 MiB bucket on an H200, beside the next bucket's read. Session 22.)
template <class W, class F>
SPARSESYNC_DEVICE void warp_for_each(const compact_source<W>& src, F&& f) {
  const unsigned lane = lane_id();
  std::uint32_t rank0 = 0, carry = ~0u;
  for (std::uint64_t w0 = src.t0; w0 < src.t1; w0 += 32) {  // a window of up to 32 tiles, one a lane
    const std::uint64_t t = w0 + lane;
    const std::uint32_t cnt = t < src.t1 ? src.tile_cnt[t] : 0u;
    const std::uint64_t off = t < src.t1 ? src.tile_off[t] : 0u;
    const std::uint32_t incl = warp_inclusive_sum<std::uint32_t>(cnt);
    const std::uint32_t total = __shfl_sync(full_warp, incl, 31);
    const auto first_tile = static_cast<std::uint32_t>(w0 - src.t0);
    for (std::uint32_t i0 = 0; i0 < total; i0 += 32) {
      const std::uint32_t i = i0 + lane;
      const bool act = i < total;
      // The window's tile holding change i: the tiles whose running count ends at or before i. Those ending at or
      // before the group's first change are a prefix (a ballot); at RL densities a tile holds more changes than a
      // group, so at most one or two tiles end inside the group, each a step past it for the lanes after it.
      unsigned k = static_cast<unsigned>(__popc(__ballot_sync(full_warp, incl <= i0)));
      for (unsigned inside = __ballot_sync(full_warp, t < src.t1 && incl > i0 && incl - i0 < 32u); inside; inside &= inside - 1)
        if (__shfl_sync(full_warp, incl, static_cast<unsigned>(__ffs(static_cast<int>(inside))) - 1) <= i) ++k;
      const std::uint32_t before = __shfl_sync(full_warp, incl - cnt, k);
      const std::uint64_t at = __shfl_sync(full_warp, off, k) + (i - before);
      const std::uint32_t pos = act ? ((first_tile + k) << src.tile_log2) + src.pos[at] : 0u;
      const W v = act ? src.val[at] : W{0};
      const std::uint32_t up = __shfl_up_sync(full_warp, pos, 1);
      const std::uint32_t prev = lane == 0 ? carry : up;
      f(act, rank0 + i, pos, v, prev);
      const unsigned last = (total - i0 < 32 ? total - i0 : 32) - 1;
      carry = __shfl_sync(full_warp, pos, last);
    }
    rank0 += total;
  }
}

// The chunk's change count, in every lane.
template <class W>
SPARSESYNC_DEVICE std::uint32_t warp_chunk_changes(const compact_source<W>& src) {
  std::uint32_t n = 0;
  for (std::uint64_t t = src.t0 + lane_id(); t < src.t1; t += 32) n += src.tile_cnt[t];
  return __shfl_sync(full_warp, static_cast<std::uint32_t>(warp_inclusive_sum(n)), 31);
}

SPARSESYNC_DEVICE void store_varint(unsigned char* p, std::uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<unsigned char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  *p = static_cast<unsigned char>(v);
}

SPARSESYNC_DEVICE void store_bytes_le(unsigned char* p, std::uint64_t v, unsigned n) {
  for (unsigned i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

// Zeroes data[0, n) with the warp: 16-byte stores in the aligned middle, byte stores at the ends.
SPARSESYNC_DEVICE void warp_zero_bytes(unsigned char* data, std::uint64_t n) {
  const unsigned lane = lane_id();
  const auto addr = reinterpret_cast<std::uintptr_t>(data);
  std::uint64_t head = (16 - (addr & 15u)) & 15u;
  if (head > n) head = n;
  const std::uint64_t vecs = (n - head) / 16;
  if (lane < head) data[lane] = 0;
  uint4* mid = reinterpret_cast<uint4*>(data + head);
  for (std::uint64_t i = lane; i < vecs; i += 32) mid[i] = make_uint4(0, 0, 0, 0);
  for (std::uint64_t i = head + 16 * vecs + lane; i < n; i += 32) data[i] = 0;
}

// Bitmap section, one group of up to 32 sorted positions: lanes whose positions share a byte form a run;
// a segmented OR (shuffles up) leaves each run's bits in its last lane, which stores the byte. A byte that
// the previous group already stored (`carry_byte`) starts from its bits, so the later store is a superset.
SPARSESYNC_DEVICE void warp_set_bits(unsigned char* data, bool act, std::uint32_t pos, std::uint32_t& carry_byte,
                                     std::uint32_t& carry_bits) {
  const unsigned lane = lane_id();
  const std::uint32_t byte = act ? pos >> 3 : ~0u;
  std::uint32_t bits = act ? 1u << (pos & 7u) : 0u;
  if (lane == 0 && byte == carry_byte) bits |= carry_bits;
#pragma unroll
  for (unsigned o = 1; o < 32; o *= 2) {
    const std::uint32_t ob = __shfl_up_sync(full_warp, bits, o);
    const std::uint32_t ok = __shfl_up_sync(full_warp, byte, o);
    if (lane >= o && ok == byte) bits |= ob;
  }
  const std::uint32_t next = __shfl_down_sync(full_warp, byte, 1);
  const bool last_of_run = act && (lane == 31 || next != byte);
  __syncwarp();  // the previous group's store to carry_byte comes before this group's
  if (last_of_run) data[byte] = static_cast<unsigned char>(bits);
  const unsigned last = 31u - static_cast<unsigned>(__clz(static_cast<int>(__ballot_sync(full_warp, act))));
  carry_byte = __shfl_sync(full_warp, byte, last);
  carry_bits = __shfl_sync(full_warp, bits, last);
}

template <class W, class P>
SPARSESYNC_KERNEL void __launch_bounds__(P::chunk_threads) warp_size_kernel(chunk_pass_params p) {
  const unsigned lane = lane_id();
  const std::uint64_t c = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  if (c >= p.chunk_count || p.ctr->allocated > p.capacity) return;  // warp-uniform
  const auto src = chunk_source<W>(p, static_cast<std::uint32_t>(c));
  const std::uint32_t n = warp_chunk_changes(src);
  const bool ulp = p.mode == value_mode::ulp;
  const bool varint = p.enc == encoder_id::delta_varint;
  std::uint64_t gbytes = 0, vbytes = 0;
  if (n && (ulp || varint)) {
    warp_for_each<W>(src, [&](bool act, std::uint32_t, std::uint32_t pos, W v, std::uint32_t prev) {
      if (!act) return;
      if (varint) gbytes += varint_bytes(pos - prev - 1);  // prev == ~0u before the first change: gap = pos
      if (ulp) vbytes += varint_bytes(zigzag<W>(v));
    });
    gbytes = warp_sum(gbytes);
    vbytes = warp_sum(vbytes);
    gbytes = __shfl_sync(full_warp, gbytes, 0);
    vbytes = __shfl_sync(full_warp, vbytes, 0);
  }
  if (!ulp) vbytes = std::uint64_t{n} * sizeof(W);
  if (p.enc == encoder_id::raw_index32) gbytes = 4ull * n;
  if (p.enc == encoder_id::bitmap) gbytes = (std::uint64_t{chunk_numel(p.numel, p.log2_chunk, static_cast<std::uint32_t>(c))} + 7) / 8;
  if (lane == 0) {
    p.plans[c] = chunk_plan{n, 0, 0, static_cast<std::uint32_t>(gbytes)};
    p.chunk_bytes[c] = n ? gbytes + vbytes : 0;
    if (n) atomicAdd(reinterpret_cast<unsigned long long*>(p.ctr->changed + c % hash_slots), static_cast<unsigned long long>(n));
  }
}

template <class W, class P>
SPARSESYNC_KERNEL void __launch_bounds__(P::chunk_threads) warp_write_kernel(chunk_pass_params p) {
  const unsigned lane = lane_id();
  const std::uint64_t c = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  if (c >= p.chunk_count || p.ctr->allocated > p.capacity) return;  // warp-uniform
  if (frame_bytes_of(p.segment_count, p.chunk_count, p.ctr->data_total) > p.out_capacity) return;
  unsigned char* table = p.out + bucket_header_bytes + segment_entry_bytes * std::uint64_t{p.segment_count};
  unsigned char* data = table + chunk_entry_bytes * std::uint64_t{p.chunk_count} + p.chunk_off[c];
  const chunk_plan plan = p.plans[c];
  const std::uint64_t bytes = p.chunk_bytes[c];
  const std::uint64_t entry = std::uint64_t{plan.changes} | (bytes << 32);
  if (lane == 0) store_le64(table + chunk_entry_bytes * c, entry);
  if (plan.changes) {
    const auto src = chunk_source<W>(p, static_cast<std::uint32_t>(c));
    const bool varint = p.enc == encoder_id::delta_varint;
    const bool bitmap = p.enc == encoder_id::bitmap;
    const bool ulp = p.mode == value_mode::ulp;
    if (bitmap) {
      warp_zero_bytes(data, plan.values_at);
      __syncwarp();  // the zeros land before any lane sets a bit
    }
    std::uint32_t carry_byte = ~0u, carry_bits = 0;  // bitmap: the last byte stored and its bits so far
    std::uint64_t gat = 0, vat = plan.values_at;  // running byte offsets of the two sections
    warp_for_each<W>(src, [&](bool act, std::uint32_t rank, std::uint32_t pos, W v, std::uint32_t prev) {
      // Both varint sections' byte offsets from one 32-bit warp scan (gap bytes in the low half, value bytes in the
      // high half; each half sums at most 32 x 5 bytes): the pass is bound by its instructions, not by memory.
      const std::uint32_t gap = pos - prev - 1;
      const W z = zigzag<W>(v);
      const std::uint32_t gl = act && varint ? varint_bytes(gap) : 0u, vl = act && ulp ? varint_bytes(z) : 0u;
      std::uint32_t incl = 0, sums = 0;
      if (varint || ulp) {  // (warp-uniform)
        incl = warp_inclusive_sum<std::uint32_t>(gl | (vl << 16));
        sums = __shfl_sync(full_warp, incl, 31);
      }
      if (bitmap) {
        warp_set_bits(data, act, pos, carry_byte, carry_bits);
      } else if (varint) {
        if (act) store_varint(data + gat + (incl & 0xFFFFu) - gl, gap);
      } else if (act) {  // raw_index32
        store_bytes_le(data + 4ull * rank, pos, 4);
      }
      if (ulp) {
        if (act) store_varint(data + vat + (incl >> 16) - vl, z);
      } else if (act) {
        store_bytes_le(data + plan.values_at + std::uint64_t{sizeof(W)} * rank, v, sizeof(W));
      }
      gat += sums & 0xFFFFu;
      vat += sums >> 16;
    });
    if (ulp && vat != bytes && lane == 0) atomicExch(&p.ctr->error, 1);  // the size pass disagreed: a bug
  }
  // The chunk's hash: chunk_hash_kernel, next on the stream.
}

// XXH64(c, entry || data) of each chunk that warp_write_kernel wrote, eight chunks a warp: lanes 4j..4j+3 run the
// four stripe accumulators of one chunk. (Hashed by the writing warp, 28 of its lanes shadowed the four: about a
// quarter of the write pass's instructions, which bound it, not memory.) Same sums as warp_hash_chunk.
template <class P>
SPARSESYNC_KERNEL void __launch_bounds__(P::chunk_threads) chunk_hash_kernel(chunk_pass_params p) {
  const unsigned lane = lane_id(), k = lane & 3u;
  const std::uint64_t c = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 4;
  if (p.ctr->allocated > p.capacity || frame_bytes_of(p.segment_count, p.chunk_count, p.ctr->data_total) > p.out_capacity) return;  // uniform
  const bool live = c < p.chunk_count;
  std::uint64_t entry = 0, n = 0;
  const unsigned char* data = nullptr;
  if (live) {
    const unsigned char* table = p.out + bucket_header_bytes + segment_entry_bytes * std::uint64_t{p.segment_count};
    data = table + chunk_entry_bytes * std::uint64_t{p.chunk_count} + p.chunk_off[c];
    const std::uint32_t changes = p.plans[c].changes;
    const std::uint64_t bytes = p.chunk_bytes[c];
    entry = std::uint64_t{changes} | (bytes << 32);
    n = changes ? bytes : 0;
  }
  xxh64_state h(c);
  const std::uint64_t total = 8 + n, stripes = total / 32;
  const unsigned char* end = p.out + p.out_capacity;
  std::uint64_t v = h.lane_init(k);
#pragma unroll 4
  for (std::uint64_t s = 0; s < stripes; ++s) {
    const std::uint64_t word = 4 * s + k;  // of the stream entry || data
    v = xxh64_round(v, word == 0 ? entry : load8_le(data + 8 * (word - 1), end));
  }
  const unsigned g = lane & ~3u;
  const std::uint64_t v1 = __shfl_sync(full_warp, v, g), v2 = __shfl_sync(full_warp, v, g + 1);
  const std::uint64_t v3 = __shfl_sync(full_warp, v, g + 2), v4 = __shfl_sync(full_warp, v, g + 3);
  if (!live || k != 0) return;
  const std::uint64_t digest = xxh64_chunk_digest(h, v1, v2, v3, v4, entry, data, n);
  atomicAdd(reinterpret_cast<unsigned long long*>(p.ctr->payload + c % hash_slots), static_cast<unsigned long long>(digest));
}

struct finalize_params {
  const device_segment* segments;
  std::uint32_t segment_count;
  std::uint32_t index;
  encoder_id enc;
  value_mode mode;
  sparsesync::dtype dtype;
  unsigned log2_chunk;
  std::uint64_t numel;
  std::uint32_t chunk_count;
  std::uint64_t capacity;
  const encode_counters* ctr;
  bool known_base;
  std::uint64_t known_base_checksum;
  bool write_frame;  // false: only report sizes (after the detect phase)
  unsigned char* out;
  std::uint64_t out_capacity;
  encode_result* result;
};

SPARSESYNC_DEVICE std::uint64_t sum_slots(const std::uint64_t* s) {
  std::uint64_t v = 0;
  for (int i = 0; i < hash_slots; ++i) v += s[i];
  return v;
}

template <class P>
SPARSESYNC_KERNEL void __launch_bounds__(256) encode_finalize_kernel(finalize_params p) {
  const encode_counters& ctr = *p.ctr;
  const std::uint64_t frame = frame_bytes_of(p.segment_count, p.chunk_count, ctr.data_total);
  encode_status st = encode_status::ok;
  if (ctr.allocated > p.capacity)
    st = encode_status::scratch_too_small;
  else if (frame > p.out_capacity && p.write_frame)
    st = encode_status::output_too_small;
  else if (p.write_frame && ctr.error)
    st = encode_status::internal_error;
  const bool write = p.write_frame && st == encode_status::ok;
  if (write) {
    for (std::uint32_t s = threadIdx.x; s < p.segment_count; s += blockDim.x) {
      unsigned char* e = p.out + bucket_header_bytes + segment_entry_bytes * std::uint64_t{s};
      const device_segment& sg = p.segments[s];
      store_le64(e, sg.tensor);
      store_le64(e + 8, sg.tensor_offset);
      store_le64(e + 16, sg.count);
    }
  }
  if (threadIdx.x != 0) return;
  encode_result r;
  r.status = static_cast<std::int32_t>(st);
  r.entries_needed = ctr.allocated;
  r.frame_bytes = st == encode_status::scratch_too_small ? 0 : frame;
  if (st != encode_status::scratch_too_small) {
    r.changed = sum_slots(ctr.changed);
    r.base_checksum = p.known_base ? p.known_base_checksum : sum_slots(ctr.base);
    r.target_checksum = r.base_checksum + sum_slots(ctr.delta);
  }
  if (write) {
    xxh64_state seg_hash(0);
    for (std::uint32_t s = 0; s < p.segment_count; ++s) {
      const device_segment& sg = p.segments[s];
      seg_hash.update_word(sg.tensor);
      seg_hash.update_word(sg.tensor_offset);
      seg_hash.update_word(sg.count);
    }
    r.payload_checksum = seg_hash.digest() + sum_slots(ctr.payload);
    std::uint64_t w[9];
    w[0] = std::uint64_t{bucket_magic} | (std::uint64_t{p.index} << 32);
    w[1] = std::uint64_t{static_cast<std::uint8_t>(p.enc)} | (std::uint64_t{static_cast<std::uint8_t>(p.mode)} << 8) |
           (std::uint64_t{static_cast<std::uint8_t>(p.dtype)} << 16) | (std::uint64_t{p.log2_chunk} << 24) |
           (std::uint64_t{p.segment_count} << 32);
    w[2] = p.numel;
    w[3] = r.changed;
    w[4] = p.chunk_count;  // reserved u32 = 0
    w[5] = ctr.data_total;
    w[6] = r.base_checksum;
    w[7] = r.target_checksum;
    w[8] = r.payload_checksum;
    xxh64_state hh(0);
    for (int i = 0; i < 9; ++i) {
      hh.update_word(w[i]);
      store_le64(p.out + 8 * i, w[i]);
    }
    store_le64(p.out + 72, hh.digest());
  }
  *p.result = r;
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
