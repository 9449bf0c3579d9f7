// The GPU decode + apply kernels: parse, base hash, decode (a warp per chunk; rice a thread per chunk),
// verify / commit / undo (a block per chunk), finish, and the patch-wide reset and check. The passes are
// described in cuda/apply.cuh; launched by dispatch_apply.cuh.
#pragma once

#include <sparsesync/core/hash.hpp>
#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/cuda/detail/chunk_codec.cuh>
#include <sparsesync/cuda/detail/detect.cuh>
#include <sparsesync/cuda/detail/entropy_codec.cuh>
#include <sparsesync/cuda/detail/entropy_decode.cuh>
#include <sparsesync/cuda/detail/entropy_decode_alone.cuh>
#include <sparsesync/cuda/detail/entropy_decode_split.cuh>
#include <sparsesync/cuda/detail/scan.cuh>
#include <sparsesync/cuda/detail/warp_decode.cuh>
#include <sparsesync/cuda/types.cuh>
#include <sparsesync/format/wire.hpp>

#include <cub/block/block_scan.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

struct bucket_info {
  std::int32_t status;         // structural errc (0 = parsed)
  std::int32_t decode_status;  // first errc seen while decoding chunks
  std::uint32_t S, C;
  std::uint32_t enc, mode, dtype, log2_chunk;
  std::uint64_t N, changed, D, base_cs, target_cs, payload_cs;
  std::uint64_t table_off, data_off;
  std::uint64_t seg_hash;
  std::uint64_t data_total;
  std::uint64_t staged_total;
  std::uint64_t end_offset;
  std::uint32_t end_tensor;
  std::uint32_t written;       // set by a commit that wrote (undo_bucket restores only those)
  std::uint32_t index;         // the header's bucket index
  std::uint32_t first_tensor;  // where the first segment starts (checked against the patch by the join of an
  std::uint64_t first_offset;  // unordered verify)
  std::uint64_t payload[hash_slots];
  std::uint64_t delta[hash_slots];
  std::uint64_t base[hash_slots];
  std::uint64_t changes[hash_slots];
};

struct apply_params {
  const unsigned char* frame;
  std::uint64_t frame_bytes;
  device_layout layout;
  void* const* model;
  apply_state* state;
  bucket_info* info;
  resolved_segment* segs;
  std::uint32_t seg_cap;
  std::uint64_t* chunk_off;
  std::uint64_t chunk_cap;
  std::uint64_t* change_off;   // staging offset of each chunk's first change (counts rounded up to 4)
  std::uint32_t* stage_pos;    // decoded changes: chunk-relative position
  std::uint32_t* stage_val;    // decoded changes: coded value (zero-extended); after verify the new bits,
                               // with the old bits above them for 1- and 2-byte dtypes
  std::uint32_t* stage_old;    // after verify, 4-byte dtypes: the old bits (apply_config::keep_old; else null)
  std::uint64_t stage_cap;
  bool commit_phase;
  bool compute_base;
  // A verify that reads nothing of the patch-wide state (so that it may run beside other buckets' verifies, on
  // any stream): the bucket's index and its first segment's start are checked against the patch so far by the
  // join (apply_finish_kernel), which runs in bucket order.
  bool unordered;
  std::uint32_t* entropy_state;  // per chunk: what the warp entropy decoder leaves for the values (entropy_decode.cuh)
  std::uint8_t encoder;          // apply_config::encoder: the only encoder whose frames this launch decodes (0: any)
  // A commit of staging its own verify left (commit_after_verify) counts itself and no finish kernel follows:
  // the verdict was joined already, so the finish could only count, and without it the commits of kept buckets
  // may run side by side (apply_plan::commit of a whole patch).
  bool commit_counts;
};

SPARSESYNC_DEVICE void fail(std::int32_t* status, errc e) { atomicCAS(status, 0, static_cast<std::int32_t>(e)); }

SPARSESYNC_DEVICE std::uint32_t ld32(const unsigned char* p) { return ::sparsesync::detail::load_le<std::uint32_t>(p); }
SPARSESYNC_DEVICE std::uint64_t ld64(const unsigned char* p) { return load_le64(p); }

SPARSESYNC_DEVICE errc parse_header(const apply_params& p, bucket_info& I) {
  if (p.frame_bytes < bucket_header_bytes) return errc::truncated;
  const unsigned char* h = p.frame;
  if (ld32(h) != bucket_magic) return errc::bad_magic;
  xxh64_state hh(0);
  for (int i = 0; i < 9; ++i) hh.update_word(ld64(h + 8 * i));
  if (ld64(h + 72) != hh.digest()) return errc::header_checksum;
  const std::uint32_t index = ld32(h + 4);
  I.enc = h[8];
  I.mode = h[9];
  I.dtype = h[10];
  I.log2_chunk = h[11];
  I.S = ld32(h + 12);
  I.N = ld64(h + 16);
  I.changed = ld64(h + 24);
  I.C = ld32(h + 32);
  const std::uint32_t reserved = ld32(h + 36);
  I.D = ld64(h + 40);
  I.base_cs = ld64(h + 48);
  I.target_cs = ld64(h + 56);
  I.payload_cs = ld64(h + 64);
  I.index = index;
  if (!p.commit_phase && !p.unordered && index != p.state->buckets) return errc::malformed;
  if (I.enc < 1 || I.enc > max_encoder_id) return errc::malformed;
  if (I.enc > device_encoder_count) return errc::unsupported;  // a host-only encoder (encoder_table's gpu column)
  if (p.encoder != 0 && I.enc != p.encoder) return errc::malformed;  // not the encoder whose kernels were launched
  if (I.mode > 1) return errc::malformed;
  if (!is_valid(static_cast<sparsesync::dtype>(I.dtype))) return errc::malformed;
  if (I.log2_chunk < min_log2_chunk || I.log2_chunk > max_log2_chunk) return errc::malformed;
  if (reserved != 0) return errc::malformed;
  if (I.N == 0 || I.changed > I.N) return errc::malformed;
  if (((I.N - 1) >> I.log2_chunk) + 1 != I.C) return errc::malformed;
  if (I.S == 0) return errc::malformed;
  const std::uint64_t avail = p.frame_bytes - bucket_header_bytes;
  if (std::uint64_t{I.S} > avail / segment_entry_bytes) return errc::truncated;
  const std::uint64_t after_segments = avail - segment_entry_bytes * std::uint64_t{I.S};
  if (std::uint64_t{I.C} > after_segments / chunk_entry_bytes) return errc::truncated;
  const std::uint64_t after_tables = after_segments - chunk_entry_bytes * std::uint64_t{I.C};
  if (I.D > after_tables) return errc::truncated;
  if (I.S > p.seg_cap || I.C > p.chunk_cap || I.changed > p.stage_cap) return errc::invalid_argument;  // beyond the scratch
  I.table_off = bucket_header_bytes + segment_entry_bytes * std::uint64_t{I.S};
  I.data_off = I.table_off + chunk_entry_bytes * std::uint64_t{I.C};
  return errc::ok;
}

template <class P>
SPARSESYNC_KERNEL void __launch_bounds__(256) apply_parse_kernel(apply_params p) {
  using scan_t = cub::BlockScan<std::uint64_t, 256>;
  __shared__ typename scan_t::TempStorage tmp;
  bucket_info& I = *p.info;
  const device_layout& L = p.layout;
  // The bucket's info starts zeroed (sums and slots the later passes add to): here rather than a memset launch
  // of its own before this one.
  static_assert(sizeof(bucket_info) % 8 == 0, "bucket_info is zeroed in 8-byte words");
  for (unsigned w = threadIdx.x; w < sizeof(bucket_info) / 8; w += blockDim.x) reinterpret_cast<std::uint64_t*>(&I)[w] = 0;
  __syncthreads();
  if (threadIdx.x == 0) {
    errc e = errc::ok;
    if (!p.unordered && p.state->status != 0)
      e = static_cast<errc>(p.state->status);  // an earlier bucket failed: skip this one
    else
      e = parse_header(p, I);
    if (e != errc::ok) {
      I.status = static_cast<std::int32_t>(e);
      I.S = 0;
      I.C = 0;
    }
  }
  __syncthreads();
  if (I.status != 0) return;
  const std::uint32_t S = I.S;
  const unsigned char* seg = p.frame + bucket_header_bytes;
  std::uint64_t carry = 0;
  for (std::uint32_t base = 0; base < S; base += 256) {
    const std::uint32_t s = base + threadIdx.x;
    std::uint64_t count = 0;
    std::uint32_t tensor = 0;
    std::uint64_t offset = 0;
    bool ok = false;
    if (s < S) {
      const unsigned char* e = seg + segment_entry_bytes * std::uint64_t{s};
      tensor = ld32(e);
      offset = ld64(e + 8);
      count = ld64(e + 16);
      ok = ld32(e + 4) == 0 && count != 0 && count <= I.N && tensor < L.tensor_count;
      if (ok) ok = L.dtype[tensor] == I.dtype && offset <= L.numel[tensor] && count <= L.numel[tensor] - offset;
      if (ok) {
        // Tiling: this segment continues the previous one (or the patch's cursor for the first).
        std::uint32_t want_t = 0;
        std::uint64_t want_o = 0;
        if (s == 0) {
          const bool own = p.commit_phase || p.unordered;  // (the join checks an unordered one's start)
          want_t = own ? tensor : p.state->cursor_tensor;
          want_o = own ? offset : p.state->cursor_offset;
          I.first_tensor = tensor;
          I.first_offset = offset;
        } else {
          const unsigned char* q = e - segment_entry_bytes;
          const std::uint32_t pt = ld32(q);
          const std::uint64_t po = ld64(q + 8), pc = ld64(q + 16);
          if (pt < L.tensor_count && po <= L.numel[pt] && pc <= L.numel[pt] - po) {
            const std::uint64_t end = po + pc;
            want_t = end == L.numel[pt] ? L.next_nonempty[pt] : pt;
            want_o = end == L.numel[pt] ? 0 : end;
          } else {
            want_t = 0xFFFFFFFFu;  // the previous entry is invalid and reports itself
          }
        }
        ok = want_t == tensor && want_o == offset;
      }
      if (!ok) fail(&I.status, errc::malformed);
      count = ok ? count : 0;
    }
    std::uint64_t first = 0, agg = 0;
    scan_t(tmp).ExclusiveSum(count, first, agg);
    if (s < S && ok) {
      const std::uint64_t byte_off = offset * size_of(static_cast<sparsesync::dtype>(I.dtype));
      p.segs[s] = resolved_segment{carry + first, count, L.first_element[tensor] + offset,
                                   static_cast<const unsigned char*>(p.model[tensor]) + byte_off, nullptr};
    }
    carry += agg;
    __syncthreads();
  }
  if (threadIdx.x != 0 || I.status != 0) return;
  if (carry != I.N) {
    I.status = static_cast<std::int32_t>(errc::malformed);
    return;
  }
  xxh64_state h(0);
  for (std::uint64_t i = 0; i < 3ull * S; ++i) h.update_word(ld64(seg + 8 * i));
  I.seg_hash = h.digest();
  const unsigned char* last = seg + segment_entry_bytes * std::uint64_t{S - 1};
  const std::uint32_t last_tensor = ld32(last);
  const std::uint64_t end = ld64(last + 8) + ld64(last + 16);
  const bool whole = end == L.numel[last_tensor];
  I.end_tensor = whole ? L.next_nonempty[last_tensor] : last_tensor;
  I.end_offset = whole ? 0 : end;
}

// Data bytes of chunk i, from the frame's chunk table (0 past a rejected bucket's count, which is 0).
struct table_loader {
  const unsigned char* frame;
  const bucket_info* info;
  SPARSESYNC_DEVICE std::uint64_t operator()(std::uint64_t i) const {
    return ld32(frame + info->table_off + chunk_entry_bytes * i + 4);
  }
};

SPARSESYNC_DEVICE std::uint32_t chunk_len(std::uint64_t numel, unsigned log2_chunk, std::uint64_t c) {
  const std::uint64_t first = c << log2_chunk;
  const std::uint64_t size = std::uint64_t{1} << log2_chunk;
  return static_cast<std::uint32_t>(numel - first < size ? numel - first : size);
}

// A chunk's table entry (changes, data bytes), its length, and where its data and staging start, with whether
// they fit the frame's data and the staging: the sequential decoders skip a chunk that does not (the warp pass,
// pass 1a, reports it).
struct chunk_slot {
  std::uint32_t n, bytes, numel;
  std::uint64_t off, at;
  bool fits;
};
SPARSESYNC_DEVICE chunk_slot read_chunk_slot(const apply_params& p, const bucket_info& I, std::uint64_t c) {
  const std::uint64_t entry = ld64(p.frame + I.table_off + chunk_entry_bytes * c);
  chunk_slot k{static_cast<std::uint32_t>(entry), static_cast<std::uint32_t>(entry >> 32), chunk_len(I.N, I.log2_chunk, c),
               p.chunk_off[c], p.change_off[c], false};
  const std::uint64_t slots = (std::uint64_t{k.n} + 3) & ~std::uint64_t{3};
  k.fits = k.off <= I.D && k.bytes <= I.D - k.off && k.n <= k.numel && k.at <= p.stage_cap && slots <= p.stage_cap - k.at;
  return k;
}

// Staging slots of chunk i: its change count (bounded by the chunk's length) rounded up to 4, so that every
// chunk's staged run starts 16-byte aligned.
struct stage_loader {
  const unsigned char* frame;
  const bucket_info* info;
  SPARSESYNC_DEVICE std::uint64_t operator()(std::uint64_t i) const {
    const std::uint32_t n = ld32(frame + info->table_off + chunk_entry_bytes * i);
    const std::uint32_t len = chunk_len(info->N, info->log2_chunk, i);
    return (std::uint64_t{n < len ? n : len} + 3) & ~std::uint64_t{3};
  }
};

// Both scans of the chunk table in one (data offsets: table_loader; staging offsets: stage_loader).
struct chunk_offsets_loader {
  const unsigned char* frame;
  const bucket_info* info;
  SPARSESYNC_DEVICE u64_pair operator()(std::uint64_t i) const { return {table_loader{frame, info}(i), stage_loader{frame, info}(i)}; }
};
struct chunk_offsets_out {
  std::uint64_t* chunk_off;
  std::uint64_t* change_off;
  SPARSESYNC_DEVICE void operator()(std::uint64_t i, u64_pair v) const {
    chunk_off[i] = v.a;
    change_off[i] = v.b;
  }
};
struct chunk_totals_out {
  bucket_info* info;
  SPARSESYNC_DEVICE void operator()(u64_pair v) const {
    info->data_total = v.a;
    info->staged_total = v.b;
  }
};

inline constexpr int decode_threads = 128;
inline constexpr int process_threads = 256;

static_assert(device_encoder_count == 5,
              "sparsesync: encoder_table (codec/encoder_table.hpp) gained a row: decode it in warp_decode_chunks (byte-aligned) or in apply_rice_kernel (sequential)");

// Pass 1a, a warp per chunk: the chunk's payload checksum share (verify only) and, for raw_index32, bitmap
// and delta_varint, the full canonical decoding into the staging list.
template <class W, bool Verify>
SPARSESYNC_DEVICE void warp_decode_chunks(const apply_params& p, const bucket_info& I) {
  const unsigned lane = lane_id();
  const auto enc = static_cast<encoder_id>(I.enc);
  const auto mode = static_cast<value_mode>(I.mode);
  const unsigned char* table = p.frame + I.table_off;
  const unsigned char* data0 = p.frame + I.data_off;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * (blockDim.x / 32);
  std::uint64_t changes = 0, payload = 0;
  for (std::uint64_t c = std::uint64_t{blockIdx.x} * (blockDim.x / 32) + threadIdx.x / 32; c < I.C; c += warps) {
    const std::uint64_t entry = ld64(table + chunk_entry_bytes * c);
    const auto n = static_cast<std::uint32_t>(entry);
    const auto bytes = static_cast<std::uint32_t>(entry >> 32);
    const std::uint32_t numel_c = chunk_len(I.N, I.log2_chunk, c);
    const std::uint64_t off = p.chunk_off[c];
    if (off > I.D || bytes > I.D - off) {  // the table's lengths overrun the data (their sum is checked too)
      if (lane == 0) fail(&p.info->decode_status, errc::malformed);
      continue;
    }
    const unsigned char* data = data0 + off;
    if constexpr (Verify) {
      const std::uint64_t h = warp_hash_chunk(c, entry, data, bytes);
      if (lane == 0) {
        payload += h;
        changes += n;
      }
    }
    const std::uint64_t at = p.change_off[c];
    const std::uint64_t slots = (std::uint64_t{n} + 3) & ~std::uint64_t{3};
    if (n > numel_c || at > p.stage_cap || slots > p.stage_cap - at) {
      if (lane == 0) fail(&p.info->decode_status, errc::malformed);
      continue;
    }
    if (enc == encoder_id::rice || enc == encoder_id::entropy) continue;  // sequential: apply_rice_kernel, apply_entropy_warp_kernel
    const errc e = warp_decode_chunk<W>(enc, mode, data, bytes, numel_c, n, p.stage_pos + at, p.stage_val + at);
    if (e != errc::ok && lane == 0) fail(&p.info->decode_status, e);
  }
  if constexpr (Verify) {
    if (lane == 0) {
      const unsigned slot = (blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) % hash_slots;
      if (changes) atomicAdd(reinterpret_cast<unsigned long long*>(p.info->changes + slot), static_cast<unsigned long long>(changes));
      if (payload) atomicAdd(reinterpret_cast<unsigned long long*>(p.info->payload + slot), static_cast<unsigned long long>(payload));
    }
  }
}

template <bool Verify>
SPARSESYNC_KERNEL void __launch_bounds__(decode_threads) apply_decode_kernel(apply_params p) {
  const bucket_info& I = *p.info;
  if (I.status != 0) return;
  if (!Verify && p.state->status != 0) return;
  switch (size_of(static_cast<sparsesync::dtype>(I.dtype))) {
    case 1: warp_decode_chunks<std::uint8_t, Verify>(p, I); break;
    case 2: warp_decode_chunks<std::uint16_t, Verify>(p, I); break;
    default: warp_decode_chunks<std::uint32_t, Verify>(p, I); break;
  }
}

// Pass 1b, Rice only (a sequential code), a thread per chunk: the full canonical decoding into the staging
// list in groups of four (16-byte stores), then the parameter check on the staged changes.
template <class W>
SPARSESYNC_DEVICE void rice_decode_chunks(const apply_params& p, const bucket_info& I) {
  const auto mode = static_cast<value_mode>(I.mode);
  const unsigned char* data0 = p.frame + I.data_off;
  const unsigned char* frame_end = p.frame + p.frame_bytes;
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t c = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < I.C; c += stride) {
    const auto [n, bytes, numel_c, off, at, fits] = read_chunk_slot(p, I, c);
    if (!fits) continue;  // reported by pass 1a
    chunk_decoder<W> dec(encoder_id::rice, mode, data0 + off, bytes, numel_c, n, p.frame, frame_end);
    errc e = dec.init();
    std::uint32_t pp[4] = {0, 0, 0, 0}, vv[4] = {0, 0, 0, 0};
    for (std::uint32_t i = 0; i < n && e == errc::ok; ++i) {
      std::uint32_t pos = 0;
      W v = 0;
      e = dec.next(pos, v);
      const unsigned k = i & 3u;
      pp[0] = k == 0 ? pos : pp[0];
      pp[1] = k == 1 ? pos : pp[1];
      pp[2] = k == 2 ? pos : pp[2];
      pp[3] = k == 3 ? pos : pp[3];
      vv[0] = k == 0 ? v : vv[0];
      vv[1] = k == 1 ? v : vv[1];
      vv[2] = k == 2 ? v : vv[2];
      vv[3] = k == 3 ? v : vv[3];
      if (k == 3 || i + 1 == n) {  // slots past n in the last group are padding (never read)
        *reinterpret_cast<uint4*>(p.stage_pos + at + (i & ~3u)) = make_uint4(pp[0], pp[1], pp[2], pp[3]);
        *reinterpret_cast<uint4*>(p.stage_val + at + (i & ~3u)) = make_uint4(vv[0], vv[1], vv[2], vv[3]);
      }
    }
    if (e == errc::ok) e = dec.finish();
    // A chunk without changes has no data (init checked it): no parameters to check, and its bytes 0 and 1 would
    // be the next chunk's, or past the frame (such buckets were refused as non-canonical).
    if (e == errc::ok && n != 0) e = check_rice_parameters<W>(mode, numel_c, data0 + off, staged_changes<W>{p.stage_pos + at, p.stage_val + at, n});
    if (e != errc::ok) fail(&p.info->decode_status, e);
  }
}

template <class P>
SPARSESYNC_KERNEL void __launch_bounds__(decode_threads) apply_rice_kernel(apply_params p) {
  const bucket_info& I = *p.info;
  if (I.status != 0 || static_cast<encoder_id>(I.enc) != encoder_id::rice) return;
  if (p.commit_phase && p.state->status != 0) return;
  switch (size_of(static_cast<sparsesync::dtype>(I.dtype))) {
    case 1: rice_decode_chunks<std::uint8_t>(p, I); break;
    case 2: rice_decode_chunks<std::uint16_t>(p, I); break;
    default: rice_decode_chunks<std::uint32_t>(p, I); break;
  }
}

// The chunks of an entropy bucket, one warp per block (the decoders' tables fill a third of the shared memory a
// block may have statically) looping over them: f(c, slot, first element, whether the warp shares it out
// (entropy_warp_decodes)) with the whole warp; the error it returns fails the bucket.
template <class F>
SPARSESYNC_DEVICE void for_each_warp_chunk(const apply_params& p, const bucket_info& I, F&& f) {
  const unsigned char* data0 = p.frame + I.data_off;
  for (std::uint64_t c = blockIdx.x; c < I.C; c += gridDim.x) {
    const chunk_slot k = read_chunk_slot(p, I, c);
    if (!k.fits) continue;  // reported by pass 1a
    const errc e = f(c, k, c << I.log2_chunk, entropy_warp_decodes(k.n, k.bytes, k.bytes ? data0[k.off] : 0u, k.numel));
    if (e != errc::ok && lane_id() == 0) fail(&p.info->decode_status, e);
    __syncwarp();  // (the next chunk reuses the warp's shared memory)
  }
}

// Pass 1b for the entropy chunks the warp decoder does not take (entropy_warp_decodes: class bodies of chunks over
// entropy_warp_max_numel, rice bodies, the trivial and malformed ones), before the bucket's commit pass writes
// anything: a warp per chunk (entropy_decode_alone.cuh), one per block with its ~4.9 KB of tables in shared memory.
// As a thread's locals those tables took 10800 bytes of stack, which the driver reserves for every thread the GPU
// can hold (2642 MB of an H100 for the context's life, bench/gpu/local_memory_probe).
template <class W>
SPARSESYNC_DEVICE void entropy_alone_chunks(const apply_params& p, const bucket_info& I, entropy_alone_smem& s) {
  const auto mode = static_cast<value_mode>(I.mode);
  const unsigned char* data0 = p.frame + I.data_off;
  const unsigned char* frame_end = p.frame + p.frame_bytes;
  // The block's chunks are blockIdx.x + k * gridDim.x; each lane judges one of the next 32 (most are the warp
  // decoder's: one slot read after another over all of them would be the whole pass).
  const std::uint64_t stride = gridDim.x;
  for (std::uint64_t c0 = blockIdx.x; c0 < I.C; c0 += 32 * stride) {
    const std::uint64_t mine = c0 + lane_id() * stride;
    bool take = false;
    if (mine < I.C) {
      const chunk_slot k = read_chunk_slot(p, I, mine);  // (an unfit slot is reported by pass 1a)
      take = k.fits && !entropy_warp_decodes(k.n, k.bytes, k.bytes ? data0[k.off] : 0u, k.numel);  // else apply_entropy_warp_kernel's
    }
    for (unsigned todo = __ballot_sync(full_warp, take); todo != 0; todo &= todo - 1) {
      const std::uint64_t c = c0 + static_cast<unsigned>(__ffs(todo) - 1) * stride;
      const auto [n, bytes, numel_c, off, at, fits] = read_chunk_slot(p, I, c);
      const std::uint64_t first = c << I.log2_chunk;
      const W* fast = n > 0 ? entropy_fast_base<W>(p.segs, I.S, first, numel_c) : nullptr;
      const errc e = entropy_warp_decode_alone<W>(s, mode, data0 + off, bytes, numel_c, n, fast, p.segs, I.S, first, p.frame, frame_end,
                                                  p.stage_pos + at, p.stage_val + at);
      if (e != errc::ok && lane_id() == 0) fail(&p.info->decode_status, e);
      __syncwarp();  // (the next chunk reuses s)
    }
  }
}

// At most 12 blocks an SM promised, so that it may keep 147 registers a thread: at the default 128 it spilled onto a
// 56-byte stack frame, at 24 blocks (80 registers) onto a 232-byte one (ptxas -v); 13 fit.
template <class P>
SPARSESYNC_KERNEL void __launch_bounds__(32, 12) apply_entropy_alone_kernel(apply_params p) {
  __shared__ entropy_alone_smem s;
  const bucket_info& I = *p.info;
  if (I.status != 0 || static_cast<encoder_id>(I.enc) != encoder_id::entropy) return;
  if (p.commit_phase && p.state->status != 0) return;
  switch (size_of(static_cast<sparsesync::dtype>(I.dtype))) {
    case 1: entropy_alone_chunks<std::uint8_t>(p, I, s); break;
    case 2: entropy_alone_chunks<std::uint16_t>(p, I, s); break;
    default: entropy_alone_chunks<std::uint32_t>(p, I, s); break;
  }
}

template <class W>
SPARSESYNC_DEVICE void entropy_warp_decode_chunks(const apply_params& p, const bucket_info& I, entropy_decode_smem& s) {
  const auto mode = static_cast<value_mode>(I.mode);
  const unsigned char* data0 = p.frame + I.data_off;
  const unsigned char* frame_end = p.frame + p.frame_bytes;
  for_each_warp_chunk(p, I, [&](std::uint64_t c, const chunk_slot& k, std::uint64_t first, bool shared) {
    if (!shared) return errc::ok;  // apply_entropy_alone_kernel's
    bool alone = false;
    const W* fast = entropy_fast_base<W>(p.segs, I.S, first, k.numel);
    const errc e = entropy_warp_decode_classes<W>(s, mode, data0 + k.off, k.bytes, k.numel, k.n, fast, p.segs, I.S, first, p.frame, frame_end,
                                                  p.stage_pos + k.at, p.stage_val + k.at, p.entropy_state + c, alone);
    if (e != errc::ok || !alone) return e;
    return entropy_lane0_decode<W>(s, mode, data0 + k.off, k.bytes, k.numel, k.n, p.segs, I.S, first, p.frame, frame_end, p.stage_pos + k.at,
                                   p.stage_val + k.at);
  });
}

inline constexpr int entropy_warp_threads = 32;

template <class P>
SPARSESYNC_KERNEL void __launch_bounds__(entropy_warp_threads) apply_entropy_warp_kernel(apply_params p) {
  __shared__ entropy_decode_smem s;
  const bucket_info& I = *p.info;
  if (I.status != 0 || static_cast<encoder_id>(I.enc) != encoder_id::entropy) return;
  if (p.commit_phase && p.state->status != 0) return;
  switch (size_of(static_cast<sparsesync::dtype>(I.dtype))) {
    case 1: entropy_warp_decode_chunks<std::uint8_t>(p, I, s); break;
    case 2: entropy_warp_decode_chunks<std::uint16_t>(p, I, s); break;
    default: entropy_warp_decode_chunks<std::uint32_t>(p, I, s); break;
  }
}

// The split decoder's second step (entropy_decode_split.cuh), a thread per chunk: the header and gaps of the
// chunks the warp decoder counted.
template <class W>
SPARSESYNC_DEVICE void entropy_split_parse_chunks(const apply_params& p, const bucket_info& I, entropy_parse_smem<decode_threads>& s) {
  const auto mode = static_cast<value_mode>(I.mode);
  const unsigned char* data0 = p.frame + I.data_off;
  const unsigned char* frame_end = p.frame + p.frame_bytes;
  for (std::uint64_t c = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; c < I.C; c += std::uint64_t{gridDim.x} * blockDim.x) {
    const auto [n, bytes, numel_c, off, at, fits] = read_chunk_slot(p, I, c);
    if (!fits || !entropy_warp_decodes(n, bytes, bytes ? data0[off] : 0u, numel_c)) continue;
    std::uint32_t state = p.entropy_state[c];
    if (state != entropy_split_counted) continue;
    const errc e = entropy_split_parse<W>(s, threadIdx.x, mode, data0 + off, bytes, n, p.frame, frame_end, p.stage_pos + at, p.stage_val + at, state);
    if (e != errc::ok) {
      fail(&p.info->decode_status, e);
      state = 0;
    }
    p.entropy_state[c] = state;
  }
}

template <class P>
SPARSESYNC_KERNEL void __launch_bounds__(decode_threads) apply_entropy_parse_kernel(apply_params p) {
  __shared__ entropy_parse_smem<decode_threads> s;
  const bucket_info& I = *p.info;
  if (I.status != 0 || static_cast<encoder_id>(I.enc) != encoder_id::entropy) return;
  if (p.commit_phase && p.state->status != 0) return;
  switch (size_of(static_cast<sparsesync::dtype>(I.dtype))) {
    case 1: entropy_split_parse_chunks<std::uint8_t>(p, I, s); break;
    case 2: entropy_split_parse_chunks<std::uint16_t>(p, I, s); break;
    default: entropy_split_parse_chunks<std::uint32_t>(p, I, s); break;
  }
}

// Its third step, a warp per chunk (one per block, as the warp decoder): the changes of the parsed chunks placed.
template <class W>
SPARSESYNC_DEVICE void entropy_split_place_chunks(const apply_params& p, const bucket_info& I, entropy_place_smem& s) {
  for_each_warp_chunk(p, I, [&](std::uint64_t c, const chunk_slot& k, std::uint64_t first, bool shared) {
    if (!shared || (p.entropy_state[c] & entropy_split_parsed) == 0) return errc::ok;  // (before the base's segment search)
    const W* fast = entropy_fast_base<W>(p.segs, I.S, first, k.numel);
    return entropy_split_place<W>(s, k.numel, k.n, fast, p.segs, I.S, first, p.stage_pos + k.at, p.stage_val + k.at, p.entropy_state + c);
  });
}

template <class P>
SPARSESYNC_KERNEL void __launch_bounds__(entropy_warp_threads) apply_entropy_place_kernel(apply_params p) {
  __shared__ entropy_place_smem s;
  const bucket_info& I = *p.info;
  if (I.status != 0 || static_cast<encoder_id>(I.enc) != encoder_id::entropy) return;
  if (p.commit_phase && p.state->status != 0) return;
  switch (size_of(static_cast<sparsesync::dtype>(I.dtype))) {
    case 1: entropy_split_place_chunks<std::uint8_t>(p, I, s); break;
    case 2: entropy_split_place_chunks<std::uint16_t>(p, I, s); break;
    default: entropy_split_place_chunks<std::uint32_t>(p, I, s); break;
  }
}

// The values of the chunks the warp decoder left pending, a thread per chunk (entropy_warp_values).
template <class W>
SPARSESYNC_DEVICE void entropy_warp_values_chunks(const apply_params& p, const bucket_info& I) {
  const auto mode = static_cast<value_mode>(I.mode);
  const unsigned char* data0 = p.frame + I.data_off;
  const unsigned char* frame_end = p.frame + p.frame_bytes;
  for (std::uint64_t c = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; c < I.C; c += std::uint64_t{gridDim.x} * blockDim.x) {
    const auto [n, bytes, numel_c, off, at, fits] = read_chunk_slot(p, I, c);
    if (!fits || !entropy_warp_decodes(n, bytes, bytes ? data0[off] : 0u, numel_c)) continue;
    const std::uint32_t state = p.entropy_state[c];
    if ((state & entropy_values_pending) == 0) continue;  // (failed in the warp decoder, or decoded whole there)
    const errc e = entropy_warp_values<W>(mode, data0 + off, bytes, n, state, p.frame, frame_end, p.stage_pos + at, p.stage_val + at);
    if (e != errc::ok)
      fail(&p.info->decode_status, e);
    else
      p.entropy_state[c] = state | entropy_values_read;
  }
}

// The checks that finish those chunks, a warp per chunk (entropy_warp_check_values). Bounded to 64 registers so
// that 8 blocks (32 warps) fit an SM, not 6 at its 80 (session 16, call M, verified apply at 7e9 on an H100: 35.26 /
// 35.14 -> 34.81 / 34.75 ms; 7 blocks: 35.00 / 35.10).
inline constexpr int entropy_check_warps = 4;

template <class W>
SPARSESYNC_DEVICE void entropy_warp_check_chunks(const apply_params& p, const bucket_info& I, entropy_check_smem& s) {
  const auto mode = static_cast<value_mode>(I.mode);
  const unsigned char* data0 = p.frame + I.data_off;
  const unsigned warp = threadIdx.x / 32;
  for (std::uint64_t c = blockIdx.x * std::uint64_t{entropy_check_warps} + warp; c < I.C; c += std::uint64_t{gridDim.x} * entropy_check_warps) {
    const auto [n, bytes, numel_c, off, at, fits] = read_chunk_slot(p, I, c);
    if (!fits || !entropy_warp_decodes(n, bytes, bytes ? data0[off] : 0u, numel_c)) continue;
    const std::uint32_t state = p.entropy_state[c];
    if ((state & entropy_values_read) == 0) continue;
    const errc e = entropy_warp_check_values<W>(s, mode, bytes, n, state, p.stage_pos + at, p.stage_val + at);
    if (e != errc::ok && lane_id() == 0) fail(&p.info->decode_status, e);
    __syncwarp();  // (the next chunk reuses s)
  }
}

template <class P>
SPARSESYNC_KERNEL void __launch_bounds__(decode_threads) apply_entropy_values_kernel(apply_params p) {
  const bucket_info& I = *p.info;
  if (I.status != 0 || static_cast<encoder_id>(I.enc) != encoder_id::entropy) return;
  if (p.commit_phase && p.state->status != 0) return;
  switch (size_of(static_cast<sparsesync::dtype>(I.dtype))) {
    case 1: entropy_warp_values_chunks<std::uint8_t>(p, I); break;
    case 2: entropy_warp_values_chunks<std::uint16_t>(p, I); break;
    default: entropy_warp_values_chunks<std::uint32_t>(p, I); break;
  }
}

template <class P>
SPARSESYNC_KERNEL void __launch_bounds__(32 * entropy_check_warps, 8) apply_entropy_check_kernel(apply_params p) {
  __shared__ entropy_check_smem s[entropy_check_warps];
  entropy_check_smem& mine = s[threadIdx.x / 32];
  const bucket_info& I = *p.info;
  if (I.status != 0 || static_cast<encoder_id>(I.enc) != encoder_id::entropy) return;
  if (p.commit_phase && p.state->status != 0) return;
  switch (size_of(static_cast<sparsesync::dtype>(I.dtype))) {
    case 1: entropy_warp_check_chunks<std::uint8_t>(p, I, mine); break;
    case 2: entropy_warp_check_chunks<std::uint16_t>(p, I, mine); break;
    default: entropy_warp_check_chunks<std::uint32_t>(p, I, mine); break;
  }
}

// Passes 2 and 3, a block per chunk over its staged changes, thread j on change j: consecutive threads touch
// neighbouring elements. Verify: old values, no-op check, checksum deltas, and the new bit patterns replace
// the coded values in the staging list (the old ones kept beside them). Commit: those new bit patterns are
// written in place (a pure scatter). Undo: the old bit patterns are written back (a committed bucket of a
// version refused later), from the verify's staging or, for ULP-coded frames, by decoding the frame again and
// stepping each element back by its delta. A chunk inside one segment (the usual case) resolves its address
// once instead of searching per change.
enum class process_pass { verify, commit, undo, undo_ulp };

template <class W, process_pass Pass>
SPARSESYNC_DEVICE void process_chunks(const apply_params& p, const bucket_info& I) {
  const auto mode = static_cast<value_mode>(I.mode);
  const unsigned char* table = p.frame + I.table_off;
  const std::uint32_t S = I.S;
  std::uint64_t delta = 0;
  for (std::uint64_t c = blockIdx.x; c < I.C; c += gridDim.x) {
    const std::uint32_t n = ld32(table + chunk_entry_bytes * c);
    const std::uint32_t numel_c = chunk_len(I.N, I.log2_chunk, c);
    const std::uint64_t at = p.change_off[c];
    if (n == 0 || n > numel_c || at > p.stage_cap || n > p.stage_cap - at) continue;  // (refused by the decode pass)
    const std::uint64_t chunk_first = c << I.log2_chunk;
    const std::uint32_t s0 = find_segment(p.segs, 0, S, chunk_first);
    const resolved_segment& seg0 = p.segs[s0];
    const bool one_segment = chunk_first + numel_c <= seg0.bucket_first + seg0.count;
    for (std::uint32_t j = threadIdx.x; j < n; j += blockDim.x) {
      const std::uint32_t pos = p.stage_pos[at + j];
      if (pos >= numel_c) continue;  // (never index past the chunk)
      const std::uint64_t ge = chunk_first + pos;
      const resolved_segment& sg = one_segment ? seg0 : p.segs[find_segment(p.segs, s0, S, ge)];
      const std::uint64_t rel = ge - sg.bucket_first;
      W* ptr = const_cast<W*>(static_cast<const W*>(sg.a)) + rel;
      if constexpr (Pass == process_pass::commit) {
        *ptr = static_cast<W>(p.stage_val[at + j]);
      } else if constexpr (Pass == process_pass::undo_ulp) {
        *ptr = apply_ulp_delta<W>(*ptr, static_cast<W>(W(0) - static_cast<W>(p.stage_val[at + j])));
      } else if constexpr (Pass == process_pass::undo) {
        if constexpr (sizeof(W) < 4)
          *ptr = static_cast<W>(p.stage_val[at + j] >> (8 * sizeof(W)));
        else
          *ptr = static_cast<W>(p.stage_old[at + j]);
      } else {
        const W old = *ptr;
        const W nw = decode_value<W>(mode, old, static_cast<W>(p.stage_val[at + j]));
        if (nw == old) fail(&p.info->decode_status, errc::non_canonical);
        const std::uint64_t flat = sg.flat_first + rel;
        delta += element_hash(flat, nw) - element_hash(flat, old);
        if constexpr (sizeof(W) < 4) {
          p.stage_val[at + j] = static_cast<std::uint32_t>(nw) | (static_cast<std::uint32_t>(old) << (8 * sizeof(W)));
        } else {
          p.stage_val[at + j] = nw;
          if (p.stage_old) p.stage_old[at + j] = old;
        }
      }
    }
  }
  if constexpr (Pass == process_pass::verify) {
    delta = warp_sum(delta);
    if ((threadIdx.x & 31u) == 0 && delta) {
      const unsigned slot = (blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) % hash_slots;
      atomicAdd(reinterpret_cast<unsigned long long*>(p.info->delta + slot), static_cast<unsigned long long>(delta));
    }
  }
}

template <process_pass Pass>
SPARSESYNC_KERNEL void __launch_bounds__(process_threads) apply_process_kernel(apply_params p) {
  const bucket_info& I = *p.info;
  if (I.status != 0 || I.decode_status != 0) return;  // refused: nothing staged is trusted
  if constexpr (Pass == process_pass::commit) {
    if (p.state->status != 0) return;  // some bucket of the version was refused: write nothing
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      p.info->written = 1;
      if (p.commit_counts) atomicAdd(reinterpret_cast<unsigned long long*>(&p.state->committed), 1ull);
    }
  }
  if constexpr (Pass == process_pass::undo) {
    if (!I.written) return;
  }
  if constexpr (Pass == process_pass::undo_ulp) {
    // (The caller checked: never step by absolute values, nor by an entropy bucket's, whose decode read the
    // classes from weights the commit has since changed.)
    if (static_cast<value_mode>(I.mode) != value_mode::ulp || static_cast<encoder_id>(I.enc) == encoder_id::entropy) {
      fail(&p.info->decode_status, errc::invalid_argument);
      return;
    }
  }
  switch (size_of(static_cast<sparsesync::dtype>(I.dtype))) {
    case 1: process_chunks<std::uint8_t, Pass>(p, I); break;
    case 2: process_chunks<std::uint16_t, Pass>(p, I); break;
    default: process_chunks<std::uint32_t, Pass>(p, I); break;
  }
}

template <class P>
SPARSESYNC_KERNEL void __launch_bounds__(P::detect_threads, P::detect_min_blocks) apply_base_hash_kernel(apply_params p) {
  const bucket_info& I = *p.info;
  if (I.status != 0) return;
  const unsigned width = size_of(static_cast<sparsesync::dtype>(I.dtype));
  hash_params hp{p.segs, &I.S, &I.N, 0, p.info->base, &I.status};
  if (width == 1) {
    hp.tile_log2 = tile_traits<std::uint8_t, P::detect_threads, P::detect_iters>::max_tile_log2;
    hash_elements<std::uint8_t, P>(hp);
  } else if (width == 2) {
    hp.tile_log2 = tile_traits<std::uint16_t, P::detect_threads, P::detect_iters>::max_tile_log2;
    hash_elements<std::uint16_t, P>(hp);
  } else {
    hp.tile_log2 = tile_traits<std::uint32_t, P::detect_threads, P::detect_iters>::max_tile_log2;
    hash_elements<std::uint32_t, P>(hp);
  }
}

SPARSESYNC_DEVICE std::uint64_t slot_sum(const std::uint64_t* s) {
  std::uint64_t v = 0;
  for (int i = 0; i < hash_slots; ++i) v += s[i];
  return v;
}

template <class P>
SPARSESYNC_KERNEL void apply_finish_kernel(apply_params p) {
  const bucket_info& I = *p.info;
  apply_state& st = *p.state;
  std::int32_t e = I.status;
  // The join of an unordered verify: after a refusal nothing more is counted (as an ordered parse skips the
  // buckets after it), and the bucket must be the patch's next one, starting where the last one ended.
  if (!p.commit_phase && p.unordered) {
    if (st.status != 0) return;
    if (e == 0 && (I.index != st.buckets || I.first_tensor != st.cursor_tensor || I.first_offset != st.cursor_offset))
      e = static_cast<std::int32_t>(errc::malformed);
  }
  if (p.commit_phase) {
    if (e == 0 && st.status == 0) {
      if (I.decode_status != 0)
        e = I.decode_status;  // the frame changed between verify and commit: the model may be partly written
      else
        ++st.committed;
    }
  } else if (e == 0) {
    if (I.data_total != I.D || slot_sum(I.changes) != I.changed)
      e = static_cast<std::int32_t>(errc::malformed);
    else if (I.seg_hash + slot_sum(I.payload) != I.payload_cs)
      e = static_cast<std::int32_t>(errc::payload_checksum);
    else if (I.decode_status != 0)
      e = I.decode_status;
    else if (p.compute_base && slot_sum(I.base) != I.base_cs)
      e = static_cast<std::int32_t>(errc::base_mismatch);
    else if (I.base_cs + slot_sum(I.delta) != I.target_cs)
      e = static_cast<std::int32_t>(errc::target_mismatch);
  }
  if (e != 0) {
    if (st.status == 0) {
      st.status = e;
      st.failed_bucket = st.buckets;
    }
    return;
  }
  if (!p.commit_phase) {
    ++st.buckets;
    st.cursor_tensor = I.end_tensor;
    st.cursor_offset = I.end_offset;
    st.numel += I.N;
    st.changed += I.changed;
    st.base_checksum += I.base_cs;
    st.target_checksum += I.target_cs;
  }
}

template <int = 0>  // (a template only for its linkage: see SPARSESYNC_KERNEL)
SPARSESYNC_KERNEL void apply_reset_kernel(apply_state* st, std::uint32_t first_nonempty) {
  *st = apply_state{};
  st->cursor_tensor = first_nonempty;
}

struct patch_totals {
  std::uint32_t bucket_count;
  std::uint64_t numel, base_checksum, target_checksum;
  bool check_known_base;
  std::uint64_t known_base_checksum;
};

template <int = 0>  // (a template only for its linkage: see SPARSESYNC_KERNEL)
SPARSESYNC_KERNEL void apply_check_patch_kernel(apply_state* st, patch_totals t, std::uint32_t tensor_count) {
  if (st->status != 0) return;
  errc e = errc::ok;
  if (st->cursor_tensor != tensor_count || st->buckets != t.bucket_count || st->numel != t.numel)
    e = errc::malformed;  // the buckets do not cover the layout
  else if (st->base_checksum != t.base_checksum || st->target_checksum != t.target_checksum)
    e = errc::malformed;  // bucket checksums do not add up to the patch header's
  else if (t.check_known_base && t.known_base_checksum != t.base_checksum)
    e = errc::base_mismatch;
  if (e != errc::ok) {
    st->status = static_cast<std::int32_t>(e);
    st->failed_bucket = st->buckets;
  }
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
