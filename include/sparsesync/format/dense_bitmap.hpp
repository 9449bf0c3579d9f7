// Full transfers at memory speed: the bitmap frame (absolute values) of a bucket from the all-zero model, built
// and read 64 elements at a time. Every element of a full transfer is a change unless it is zero, so a chunk is
// a mask of the nonzero elements and their bits in order: where a block of 64 is all nonzero (nearly always),
// its values are its words as they are. This is the frame encode_bucket<bitmap> writes for the same bucket,
// byte for byte (no format change: FORMAT.md §3.4 `bitmap`, §3.5 absolute), without position and value lists:
// a copy and a hash per element on each side.
#pragma once

#include <sparsesync/codec/bitmap.hpp>
#include <sparsesync/core/hash.hpp>
#include <sparsesync/core/hash_x86.hpp>
#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/format/diff_scan.hpp>
#include <sparsesync/format/model_access.hpp>
#include <sparsesync/format/wire.hpp>

#include <bit>
#include <cstring>
#include <optional>
#include <vector>

SPARSESYNC_NS_BEGIN

// A bucket's content checksums (FORMAT.md §5): of its base (here the all-zero model) and of its target.
struct bucket_checksums {
  std::uint64_t base = 0;
  std::uint64_t target = 0;
};

namespace detail {

// Adds the content checksums of `count` elements at flat index `first` to `sums`: of the zero model (base)
// and of `bits` (target), in one pass (eight elements at a time where the CPU has AVX-512: hash_x86.hpp).
template <element_word W>
void add_dense_checksums(const W* bits, std::uint64_t count, std::uint64_t first, bucket_checksums& sums) {
  add_zero_and_content_checksums(bits, count, first, sums.base, sums.target);
}

// ORs the 64 bits of `m` into the bit array at `p`, starting at bit `bit` (LSB first). Touches 9 bytes from
// p + bit / 8: the caller leaves slack after the array.
inline void or_bits64(unsigned char* p, std::uint64_t bit, std::uint64_t m) {
  unsigned char* b = p + bit / 8;
  const unsigned s = static_cast<unsigned>(bit % 8);
  store_le<std::uint64_t>(b, load_le<std::uint64_t>(b) | (m << s));
  if (s != 0) b[8] |= static_cast<unsigned char>(m >> (64 - s));
}

// The `count` (≤ 64) bits at bit `bit` of the `bytes`-byte array at `p` (reads nothing past it).
inline std::uint64_t load_bits64(const unsigned char* p, std::size_t bytes, std::uint64_t bit, unsigned count) {
  const std::size_t at = static_cast<std::size_t>(bit / 8);
  const unsigned s = static_cast<unsigned>(bit % 8);
  std::uint64_t v;
  if (at + 9 <= bytes) {
    v = load_le<std::uint64_t>(p + at) >> s;
    if (s != 0) v |= std::uint64_t{p[at + 8]} << (64 - s);
  } else {
    unsigned char tmp[16] = {};
    std::memcpy(tmp, p + at, std::min<std::size_t>(bytes - at, 9));
    v = load_le<std::uint64_t>(tmp) >> s;
    if (s != 0) v |= std::uint64_t{tmp[8]} << (64 - s);
  }
  return count == 64 ? v : v & ((std::uint64_t{1} << count) - 1);
}

// Bit i set iff bits[i] != 0, for the `count` (≤ 64) elements at `bits`.
template <element_word W>
std::uint64_t nonzero_mask(const W* bits, unsigned count) {
  return count == diff_block ? diff_mask<W, false>(bits, nullptr) : diff_mask_scalar<W>(bits, nullptr, count);
}

// Stores the words of `bits` whose bit is set in `m` at `out` (little-endian); returns how many.
template <element_word W>
std::size_t put_nonzero(const W* bits, unsigned count, std::uint64_t m, unsigned char* out) {
  if (count == 64 && m == ~std::uint64_t{0} && std::endian::native == std::endian::little) {
    std::memcpy(out, bits, 64 * sizeof(W));
    return 64;
  }
  std::size_t k = 0;
  for (; m; m &= m - 1) store_le<W>(out + sizeof(W) * k++, bits[std::countr_zero(m)]);
  return k;
}

// Upper bound of the frame write_dense_bucket writes for `plan`, plus the slack it needs.
inline std::size_t dense_frame_bound(const bucket_plan& plan, unsigned log2_chunk) {
  const std::uint64_t n = plan.numel();
  const std::uint64_t chunk = std::uint64_t{1} << log2_chunk;
  const std::uint64_t chunks = (n + chunk - 1) / chunk;
  return bucket_header_bytes + segment_entry_bytes * plan.segments.size() + chunk_entry_bytes * chunks + (n + 7) / 8 + chunks +
         n * size_of(plan.dtype) + 16;
}

// Writes bucket `index`'s full-transfer frame (bitmap, absolute values; the base is the all-zero model) of
// `target` at `out`, which has room for dense_frame_bound(plan, log2_chunk) bytes; returns the frame's length.
// `known`: the bucket's checksums as the caller knows them (a sender's record of its snapshot, trusted: the
// receivers check the elements against them); without them they are computed, and returned in `sums`.
template <element_word W>
std::size_t write_dense_bucket(const model_layout& layout, const bucket_plan& plan, std::uint32_t index,
                               std::span<const const_tensor_view> target, unsigned log2_chunk, const std::optional<bucket_checksums>& known,
                               unsigned char* out, bucket_checksums* sums = nullptr, std::uint64_t* changed_out = nullptr) {
  const std::uint64_t numel = plan.numel();
  const std::uint64_t chunk = std::uint64_t{1} << log2_chunk;
  const std::size_t chunks = static_cast<std::size_t>((numel + chunk - 1) / chunk);
  const std::size_t seg_at = bucket_header_bytes;
  const std::size_t table_at = seg_at + segment_entry_bytes * plan.segments.size();
  const std::size_t data_at = table_at + chunk_entry_bytes * chunks;
  for (std::size_t s = 0; s < plan.segments.size(); ++s) {
    unsigned char* p = out + seg_at + segment_entry_bytes * s;
    store_le<std::uint32_t>(p, plan.segments[s].tensor);
    store_le<std::uint32_t>(p + 4, 0);
    store_le<std::uint64_t>(p + 8, plan.segments[s].offset);
    store_le<std::uint64_t>(p + 16, plan.segments[s].count);
  }
  std::uint64_t payload = stream_hash(out + seg_at, table_at - seg_at, 0);
  const auto starts = segment_starts(plan.segments);
  bucket_checksums computed;
  std::uint64_t changed = 0;
  std::size_t at = data_at;
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::uint64_t first = c * chunk;
    const std::uint64_t n = std::min(chunk, numel - first);
    const std::size_t mb = bitmap::mask_bytes(static_cast<std::uint32_t>(n));
    unsigned char* mask = out + at;
    unsigned char* values = mask + mb;
    std::memset(mask, 0, mb + 9);  // the mask, and or_bits64's slack past it (values overwrite that)
    std::uint64_t k = 0;
    for_each_run(layout, plan.segments, starts, first, n, [&](const bucket_run& r) {
      const W* t = word_ptr<W>(target[r.tensor]) + r.tensor_offset;
      if (!known) add_dense_checksums<W>(t, r.count, r.flat_index, computed);
      const std::uint64_t rel = r.bucket_first - first;
      for (std::uint64_t j = 0; j < r.count; j += diff_block) {
        const auto len = static_cast<unsigned>(std::min<std::uint64_t>(diff_block, r.count - j));
        const std::uint64_t m = nonzero_mask<W>(t + j, len);
        or_bits64(mask, rel + j, m);
        k += put_nonzero<W>(t + j, len, m, values + sizeof(W) * k);
      }
    });
    const std::size_t bytes = k == 0 ? 0 : mb + sizeof(W) * k;  // a chunk without changes has no data
    unsigned char* entry = out + table_at + chunk_entry_bytes * c;
    store_le<std::uint32_t>(entry, static_cast<std::uint32_t>(k));
    store_le<std::uint32_t>(entry + 4, static_cast<std::uint32_t>(bytes));
    stream_hasher h(c);
    h.update(entry, chunk_entry_bytes);
    h.update(out + at, bytes);
    payload += h.digest();
    at += bytes;
    changed += k;
  }
  const bucket_checksums sum = known ? *known : computed;
  bucket_header hdr;
  hdr.index = index;
  hdr.encoder = encoder_id::bitmap;
  hdr.mode = value_mode::absolute;
  hdr.dtype = plan.dtype;
  hdr.log2_chunk = static_cast<std::uint8_t>(log2_chunk);
  hdr.segment_count = static_cast<std::uint32_t>(plan.segments.size());
  hdr.numel = numel;
  hdr.changed = changed;
  hdr.chunk_count = static_cast<std::uint32_t>(chunks);
  hdr.data_bytes = at - data_at;
  hdr.base_checksum = sum.base;
  hdr.target_checksum = sum.target;
  hdr.payload_checksum = payload;
  write_bucket_header(out, hdr);
  if (sums) *sums = sum;
  if (changed_out) *changed_out = changed;
  return at;
}

// What write_dense_bucket would write for `plan`, without writing it: the frame's length, its change count
// and its checksums (one pass: count the nonzero elements per chunk and hash them).
struct dense_bucket_summary {
  std::size_t frame_bytes = 0;
  std::uint64_t changed = 0;
  bucket_checksums sums;
};

template <element_word W>
dense_bucket_summary summarize_dense_bucket(const model_layout& layout, const bucket_plan& plan, std::span<const const_tensor_view> target,
                                            unsigned log2_chunk) {
  dense_bucket_summary out;
  const std::uint64_t numel = plan.numel();
  const std::uint64_t chunk = std::uint64_t{1} << log2_chunk;
  const std::size_t chunks = static_cast<std::size_t>((numel + chunk - 1) / chunk);
  out.frame_bytes = bucket_header_bytes + segment_entry_bytes * plan.segments.size() + chunk_entry_bytes * chunks;
  const auto starts = segment_starts(plan.segments);
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::uint64_t first = c * chunk;
    const std::uint64_t n = std::min(chunk, numel - first);
    std::uint64_t k = 0;
    for_each_run(layout, plan.segments, starts, first, n, [&](const bucket_run& r) {
      const W* t = word_ptr<W>(target[r.tensor]) + r.tensor_offset;
      add_dense_checksums<W>(t, r.count, r.flat_index, out.sums);
      for (std::uint64_t j = 0; j < r.count; j += diff_block) {
        const auto len = static_cast<unsigned>(std::min<std::uint64_t>(diff_block, r.count - j));
        k += static_cast<unsigned>(std::popcount(nonzero_mask<W>(t + j, len)));
      }
    });
    if (k) out.frame_bytes += bitmap::mask_bytes(static_cast<std::uint32_t>(n)) + sizeof(W) * k;
    out.changed += k;
  }
  return out;
}

// Reads one chunk of a dense frame (bitmap, absolute values, from the all-zero model) straight into the
// receiver's memory: every element of the chunk is written (zeros where the mask is clear). Checks what
// bitmap::decode checks (mask bits past the chunk, set bits = `changes`, exact length) and that no value is
// zero (a no-op change), and adds the elements' checksums to `sums`. `out_run(r)` is the run's memory.
template <element_word W, class Runs, class OutRun>
status read_dense_chunk(std::span<const unsigned char> data, std::uint32_t numel, std::uint32_t changes, Runs&& for_runs, OutRun&& out_run,
                        bucket_checksums& sums) {
  const std::size_t mb = bitmap::mask_bytes(numel);
  const unsigned char* mask = data.data();
  if (changes == 0) {
    if (!data.empty()) return {errc::malformed, "data present for a chunk without changes"};
  } else {
    if (data.size() < mb) return {errc::truncated, "bitmap"};
    if (numel % 8 != 0 && (mask[mb - 1] >> (numel % 8)) != 0)
      return {errc::index_out_of_range, "bitmap marks elements past the end of the chunk"};
    std::uint64_t set = 0;
    std::size_t b = 0;
    for (; b + 8 <= mb; b += 8) set += static_cast<unsigned>(std::popcount(load_le<std::uint64_t>(mask + b)));
    for (; b < mb; ++b) set += static_cast<unsigned>(std::popcount(static_cast<unsigned>(mask[b])));
    if (set > changes) return {errc::malformed, "bitmap has more set bits than the chunk's change count"};
    if (set < changes) return {errc::malformed, "bitmap has fewer set bits than the chunk's change count"};
    if (data.size() - mb < std::size_t{changes} * sizeof(W)) return {errc::truncated, "values section"};
    if (data.size() - mb > std::size_t{changes} * sizeof(W)) return {errc::malformed, "trailing bytes after the values section"};
  }
  const unsigned char* values = data.data() + mb;
  std::size_t k = 0;
  status st;
  for_runs([&](const bucket_run& r, std::uint64_t rel) {
    if (!st) return;
    W* o = out_run(r);
    if (changes == 0) {
      std::memset(o, 0, r.count * sizeof(W));
    } else {
      for (std::uint64_t j = 0; j < r.count; j += diff_block) {
        const auto len = static_cast<unsigned>(std::min<std::uint64_t>(diff_block, r.count - j));
        const std::uint64_t m = load_bits64(mask, mb, rel + j, len);
        W* blk = o + j;
        if (len == 64 && m == ~std::uint64_t{0} && std::endian::native == std::endian::little) {
          std::memcpy(blk, values + sizeof(W) * k, 64 * sizeof(W));
          k += 64;
        } else {
          std::memset(blk, 0, len * sizeof(W));
          for (std::uint64_t x = m; x; x &= x - 1) blk[std::countr_zero(x)] = load_le<W>(values + sizeof(W) * k++);
        }
        // A zero value is a change that leaves its element (zero) as it was: not a canonical encoding.
        if (nonzero_mask<W>(blk, len) != m) {
          st = {errc::non_canonical, "a change leaves its element unchanged (a zero value from the zero model)"};
          return;
        }
      }
    }
    add_dense_checksums<W>(o, r.count, r.flat_index, sums);
  });
  return st;
}

}  // namespace detail

SPARSESYNC_NS_END
