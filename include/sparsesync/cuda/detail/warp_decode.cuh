// Warp-cooperative decoding of one chunk's data (apply's decode pass), for the byte-aligned encoders:
// raw_index32 (fixed-width fields), bitmap (mask words: population counts and a warp scan) and delta_varint
// (LEB128 streams: 32 bytes per step, varint ends found with a ballot, values assembled by shuffles, gap
// prefix sums by a warp scan). Same acceptance rules as the host decoders (codec/*.hpp); the GPU tests
// compare verdicts on mutated payloads. Rice is inherently sequential: chunk_decoder, one thread per chunk.
// Every function here must be called by all 32 lanes of a warp with the same arguments.
#pragma once

#include <sparsesync/cuda/detail/chunk_codec.cuh>
#include <sparsesync/cuda/types.cuh>
#include <type_traits>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

inline constexpr unsigned full_warp = 0xFFFFFFFFu;

SPARSESYNC_DEVICE unsigned lane_id() { return threadIdx.x & 31u; }
SPARSESYNC_DEVICE unsigned lanes_below() { return (1u << lane_id()) - 1u; }

// Inclusive prefix sum over the warp's lanes in T (64 bits unless asked: a 32-bit sum where the caller knows the
// total fits takes half the shuffles). T is never deduced, so an int argument still sums in 64 bits.
template <class T = std::uint64_t>
SPARSESYNC_DEVICE T warp_inclusive_sum(std::type_identity_t<T> v) {
  const unsigned lane = lane_id();
#pragma unroll
  for (unsigned d = 1; d < 32; d *= 2) {
    const T t = __shfl_up_sync(full_warp, v, d);
    if (lane >= d) v += t;
  }
  return v;
}

// Little-endian value of `n` (<= 8) bytes at p, byte loads (p may have any alignment).
SPARSESYNC_DEVICE std::uint64_t load_bytes_le(const unsigned char* p, unsigned n) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

// The 8 bytes at p (any alignment; little-endian) from three aligned 4-byte loads, where those stay below `end`
// (else byte by byte): a chunk's data starts at any byte, and byte loads bound the hashing passes.
SPARSESYNC_DEVICE std::uint64_t load8_le(const unsigned char* p, const unsigned char* end) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const auto* q = reinterpret_cast<const std::uint32_t*>(a & ~std::uintptr_t{3});
  if (reinterpret_cast<const unsigned char*>(q + 3) > end) return load_bytes_le(p, 8);
  const unsigned sh = static_cast<unsigned>(a & 3u) * 8u;
  const std::uint32_t w0 = q[0], w1 = q[1], w2 = q[2];
  return static_cast<std::uint64_t>(__funnelshift_r(w0, w1, sh)) | (static_cast<std::uint64_t>(__funnelshift_r(w1, w2, sh)) << 32);
}

// The end of XXH64(seed, entry || data[0, n)) whose whole 32-byte stripes ran in four accumulators v1..v4
// elsewhere (warp_hash_chunk, chunk_hash_kernel): the tail of under 32 bytes, one thread, and the digest.
SPARSESYNC_DEVICE std::uint64_t xxh64_chunk_digest(xxh64_state& h, std::uint64_t v1, std::uint64_t v2, std::uint64_t v3, std::uint64_t v4,
                                                   std::uint64_t entry, const unsigned char* data, std::uint64_t n) {
  const std::uint64_t total = 8 + n;
  std::uint64_t o = total / 32 * 32;  // stream offset of the tail
  h.resume(v1, v2, v3, v4, o);
  for (; o + 8 <= total; o += 8) h.update_word(o == 0 ? entry : load_bytes_le(data + o - 8, 8));
  for (; o < total; ++o) h.update_byte(data[o - 8]);  // o >= 8 here: the entry is a whole word
  return h.digest();
}

// XXH64(seed, entry || data[0, n)): lanes 0..3 run the four stripe accumulators, then every lane finishes
// the (< 32 byte) tail; the result is in every lane. The stripes are read 8 at a time by the whole warp (lane i
// loads word i of the 256 bytes, all loads in flight together) and handed to the accumulators by shuffles:
// an accumulator lane loading its own words would wait for one load per stripe.
SPARSESYNC_DEVICE std::uint64_t warp_hash_chunk(std::uint64_t seed, std::uint64_t entry, const unsigned char* data, std::uint64_t n) {
  const unsigned lane = lane_id();
  const std::uint64_t total = 8 + n;
  const std::uint64_t stripes = total / 32;
  xxh64_state h(seed);
  std::uint64_t v = h.lane_init(lane & 3u);  // lanes 4..31 shadow lanes 0..3 (same inputs, unused results)
  for (std::uint64_t s0 = 0; s0 < stripes; s0 += 8) {
    const std::uint64_t k = 4 * s0 + lane;  // word of the stream entry || data that this lane loads
    std::uint64_t w = 0;
    if (k < 4 * stripes) w = k == 0 ? entry : load_bytes_le(data + 8 * (k - 1), 8);
    const std::uint64_t steps = stripes - s0 < 8 ? stripes - s0 : 8;
    for (unsigned j = 0; j < steps; ++j) v = xxh64_round(v, __shfl_sync(full_warp, w, 4 * j + (lane & 3u)));
  }
  const std::uint64_t v1 = __shfl_sync(full_warp, v, 0), v2 = __shfl_sync(full_warp, v, 1);
  const std::uint64_t v3 = __shfl_sync(full_warp, v, 2), v4 = __shfl_sync(full_warp, v, 3);
  return xxh64_chunk_digest(h, v1, v2, v3, v4, entry, data, n);
}

// Decodes `count` LEB128 varints of at most `max_bits` from data[at, len), 32 bytes per step, each step
// starting at a varint's first byte. After each step all lanes call step(used, index, value) (collective;
// `used`: this lane holds the end of varint `index`), which returns errc::ok to go on. On success `at` is
// just past the last varint. Rejects what codec/varint.hpp rejects: truncation, overflow (reported as
// `overflow`), overlong encodings (non_canonical).
template <class Step>
SPARSESYNC_DEVICE errc warp_varints(const unsigned char* data, std::uint64_t len, std::uint64_t& at, std::uint32_t count,
                                    unsigned max_bits, errc overflow, Step&& step) {
  const unsigned lane = lane_id();
  const unsigned max_bytes = (max_bits + 6) / 7;
  std::uint32_t r = 0;
  while (r < count) {
    if (at >= len) return errc::truncated;
    const std::uint64_t i = at + lane;
    const bool has = i < len;
    const unsigned b = has ? data[i] : 0u;
    const unsigned term = __ballot_sync(full_warp, has && (b & 0x80u) == 0);
    if (term == 0) return at + 32 > len ? errc::truncated : overflow;
    unsigned use = term;
    const std::uint32_t left = count - r;
    if (static_cast<std::uint32_t>(__popc(term)) > left) {  // keep the lowest `left` ends
      unsigned beyond = term;
      for (std::uint32_t k = 0; k < left; ++k) beyond &= beyond - 1;
      use = term & ~beyond;
    }
    const bool used = (use >> lane) & 1u;
    const unsigned below = term & lanes_below();
    const unsigned start = below ? 32u - static_cast<unsigned>(__clz(static_cast<int>(below))) : 0u;
    const unsigned length = lane - start + 1;
    bool bad = used && length > max_bytes;
    std::uint64_t v = 0;
#pragma unroll
    for (unsigned k = 0; k < 5; ++k) {  // byte `length - 1 - k` of this lane's varint sits k lanes down
      const unsigned bk = __shfl_up_sync(full_warp, b, k);
      if (used && !bad && k < length) {
        const unsigned shift = 7 * (length - 1 - k);
        const std::uint64_t group = bk & 0x7Fu;
        if (shift > 0 && max_bits - shift < 7 && (group >> (max_bits - shift)) != 0) bad = true;
        v |= group << shift;
      }
    }
    const bool overlong = used && length > 1 && (b & 0x7Fu) == 0;
    if (__any_sync(full_warp, bad)) return overflow;
    if (__any_sync(full_warp, overlong)) return errc::non_canonical;
    const std::uint32_t index = r + static_cast<std::uint32_t>(__popc(use & lanes_below()));
    if (const errc e = step(used, index, v); e != errc::ok) return e;
    at += 32u - static_cast<unsigned>(__clz(static_cast<int>(use)));  // past the last used end
    r += static_cast<std::uint32_t>(__popc(use));
  }
  return errc::ok;
}

// Decodes one raw_index32 / bitmap / delta_varint chunk into spos[0, n) (chunk-relative positions) and
// sval[0, n) (coded values, zero-extended).
template <class W>
SPARSESYNC_DEVICE errc warp_decode_chunk(encoder_id enc, value_mode mode, const unsigned char* data, std::uint64_t len,
                                         std::uint32_t numel, std::uint32_t n, std::uint32_t* spos, std::uint32_t* sval) {
  static_assert(device_encoder_count == 5,
                "sparsesync: encoder_table (codec/encoder_table.hpp) gained a row: decode it here if it is byte-aligned (and leave it out of apply_rice_kernel), or in apply_rice_kernel");
  const unsigned lane = lane_id();
  if (n == 0) return len == 0 ? errc::ok : errc::malformed;
  std::uint64_t vstart = 0;
  if (enc == encoder_id::raw_index32) {
    if (len / 4 < n) return errc::truncated;
    std::uint32_t carry = 0;
    for (std::uint32_t base = 0; base < n; base += 32) {
      const std::uint32_t r = base + lane;
      const bool act = r < n;
      const auto pos = act ? static_cast<std::uint32_t>(load_bytes_le(data + 4ull * r, 4)) : 0u;
      const std::uint32_t up = __shfl_up_sync(full_warp, pos, 1);
      const std::uint32_t prev = lane == 0 ? carry : up;
      const bool out = act && pos >= numel;
      const bool order = act && r > 0 && pos <= prev;
      carry = __shfl_sync(full_warp, pos, 31);
      if (__any_sync(full_warp, out)) return errc::index_out_of_range;
      if (__any_sync(full_warp, order)) return errc::malformed;
      if (act) spos[r] = pos;
    }
    vstart = 4ull * n;
  } else if (enc == encoder_id::bitmap) {
    const std::uint64_t mb = (std::uint64_t{numel} + 7) / 8;
    if (len < mb) return errc::truncated;
    std::uint32_t rank = 0;
    for (std::uint64_t b0 = 0; b0 < mb; b0 += 128) {
      const std::uint64_t bb = b0 + 4ull * lane;
      std::uint32_t w = 0;
      for (unsigned k = 0; k < 4; ++k)
        if (bb + k < mb) w |= static_cast<std::uint32_t>(data[bb + k]) << (8 * k);
      const std::uint64_t first = 8 * bb;  // element of bit 0
      const bool out = bb < mb && first + 32 > numel && (static_cast<std::uint64_t>(w) >> (numel - first)) != 0;
      if (__any_sync(full_warp, out)) return errc::index_out_of_range;
      const auto cnt = static_cast<std::uint32_t>(__popc(w));
      const auto incl = static_cast<std::uint32_t>(warp_inclusive_sum(cnt));
      std::uint32_t r = rank + incl - cnt;
      while (w) {
        const unsigned bit = static_cast<unsigned>(__ffs(static_cast<int>(w)) - 1);
        w &= w - 1;
        if (r < n) spos[r] = static_cast<std::uint32_t>(first + bit);
        ++r;
      }
      rank += __shfl_sync(full_warp, incl, 31);
    }
    if (rank != n) return errc::malformed;
    vstart = mb;
  } else if (enc == encoder_id::delta_varint) {
    if (len < n) return errc::truncated;
    std::uint64_t next = 0, at = 0;
    const errc e = warp_varints(data, len, at, n, 32, errc::index_out_of_range, [&](bool used, std::uint32_t idx, std::uint64_t g) {
      const std::uint64_t incl = warp_inclusive_sum(used ? g + 1 : 0);
      const std::uint64_t pos = next + incl - 1;
      next += __shfl_sync(full_warp, incl, 31);
      if (__any_sync(full_warp, used && pos >= numel)) return errc::index_out_of_range;
      if (used) spos[idx] = static_cast<std::uint32_t>(pos);
      return errc::ok;
    });
    if (e != errc::ok) return e;
    vstart = at;
  } else {
    return errc::malformed;
  }
  constexpr unsigned w = sizeof(W);
  if (mode == value_mode::absolute) {
    if ((len - vstart) / w < n) return errc::truncated;
    if (vstart + std::uint64_t{n} * w != len) return errc::malformed;
    for (std::uint32_t r = lane; r < n; r += 32) sval[r] = static_cast<std::uint32_t>(load_bytes_le(data + vstart + std::uint64_t{w} * r, w));
    return errc::ok;
  }
  std::uint64_t at = vstart;
  const errc e = warp_varints(data, len, at, n, 8 * w, errc::malformed, [&](bool used, std::uint32_t idx, std::uint64_t code) {
    if (__any_sync(full_warp, used && code == 0)) return errc::non_canonical;
    if (used) sval[idx] = static_cast<std::uint32_t>(unzigzag<W>(static_cast<W>(code)));
    return errc::ok;
  });
  if (e != errc::ok) return e;
  return at == len ? errc::ok : errc::malformed;
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
