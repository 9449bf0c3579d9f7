// element_hash (hash.hpp) eight elements at a time with AVX-512, for the loops that hash every element (a full
// transfer, a model's or a base's content checksum): the same values, bit for bit, as the scalar function
// (tests/core/hash_test.cpp). x86-64
// builds by GCC or Clang only (not nvcc, whose front end does not take these intrinsics); used where the CPU
// has AVX-512 F, DQ and BW, checked once at run time, so the binary still runs anywhere.
//
// The scalar hash spends its time in two 64-bit multiplies per element (the 128-bit product of XXH3's 9-16
// byte path and the avalanche), on one multiplier. Here the 128-bit product is four 32x32 multiplies per lane;
// an element's bits are below 2^32, so the high half of XXH3's `hi` word is a constant and two of the four
// products are shared by the zero model's hash and the target's at the same index. Over consecutive indices
// that share their high 32 bits (runs of up to 2^32), the high half of `lo` is a constant too, and so is a
// third product. The loops over consecutive indices also hash two elements a round with the scalar function:
// the vector loop is bound by the vector pipes' throughput, which leaves the scalar multiplier and ALUs idle
// (on this project's Zen 4 VM: 3.0 GB/s of BF16 before, 4.4 after; bench/results/cpu-s30/).
#pragma once

#include <sparsesync/core/hash.hpp>

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#include <immintrin.h>
#define SPARSESYNC_HASH_AVX512 1
#endif

SPARSESYNC_NS_BEGIN
namespace detail {

#if SPARSESYNC_HASH_AVX512
#define SPARSESYNC_AVX512_TARGET __attribute__((target("avx512f,avx512dq,avx512bw")))

inline bool cpu_has_avx512_hash() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
  }();
  return has;
}

// The fold (low ^ high 64 bits) of the 128-bit products a * b per lane, given the shared partial products
// a * b_hi (p01) and a_hi * b_hi (p11) (b_hi: b's high 32 bits, the same for every lane). Schoolbook with the
// carries taken in two 64-bit sums (t, u), none of which can overflow.
SPARSESYNC_ALWAYS_INLINE SPARSESYNC_AVX512_TARGET __m512i fold_product(__m512i a, __m512i a_hi, __m512i b, __m512i p01, __m512i p11) {
  const __m512i m32 = _mm512_set1_epi64(0xFFFFFFFF);
  const __m512i p00 = _mm512_mul_epu32(a, b);
  const __m512i p10 = _mm512_mul_epu32(a_hi, b);
  const __m512i t = _mm512_add_epi64(p10, _mm512_srli_epi64(p00, 32));
  const __m512i u = _mm512_add_epi64(p01, _mm512_and_si512(t, m32));
  const __m512i high = _mm512_add_epi64(_mm512_add_epi64(p11, _mm512_srli_epi64(t, 32)), _mm512_srli_epi64(u, 32));
  // low = (u << 32) | (p00 & m32): each odd 32-bit word of p00 replaced by the even word of u below it.
  const __m512i low = _mm512_mask_shuffle_epi32(p00, 0xAAAA, u, _MM_PERM_CCAA);
  return _mm512_xor_si512(low, high);
}

// XXH3's 9-16 byte avalanche.
SPARSESYNC_ALWAYS_INLINE SPARSESYNC_AVX512_TARGET __m512i xxh3_avalanche(__m512i acc) {
  acc = _mm512_xor_si512(acc, _mm512_srli_epi64(acc, 37));
  acc = _mm512_mullo_epi64(acc, _mm512_set1_epi64(static_cast<long long>(0x165667919E3779F9ULL)));
  return _mm512_xor_si512(acc, _mm512_srli_epi64(acc, 32));
}

// The sum of the eight lanes modulo 2^64. (_mm512_reduce_add_epi64 adds them as signed long long in GCC's header:
// an overflow there is undefined behaviour, which UBSan reports.)
SPARSESYNC_AVX512_TARGET inline std::uint64_t lane_sum(__m512i v) {
  alignas(64) std::uint64_t lanes[8];
  _mm512_store_si512(lanes, v);
  std::uint64_t sum = 0;
  for (const auto x : lanes) sum += x;
  return sum;
}

// Eight words of `bits` zero-extended to 64-bit lanes.
template <class W>
SPARSESYNC_ALWAYS_INLINE SPARSESYNC_AVX512_TARGET __m512i load8_widened(const W* bits) {
  if constexpr (sizeof(W) == 1) return _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bits)));
  else if constexpr (sizeof(W) == 2) return _mm512_cvtepu16_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits)));
  else return _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits)));
}

// element_hash at eight consecutive indices. The index-dependent half (`lanes`) is shared by the hashes of
// several bit patterns at the same indices (the zero model's and the target's in a full transfer).
struct element_hash8 {
  // The parts of element_hash that depend on the index only: XXH3's `lo` word, its high half, its byte swap, and
  // the partial products of lo with the high half of `hi` (the same for every element: bits fit in 32 bits).
  struct lanes {
    __m512i lo, lo_hi, swapped, p01, p11;
  };

  SPARSESYNC_ALWAYS_INLINE SPARSESYNC_AVX512_TARGET element_hash8()
      : flip1(_mm512_set1_epi64(static_cast<long long>(bitflip1))),
        flip2(_mm512_set1_epi64(static_cast<long long>(bitflip2))),
        flip2_hi(_mm512_set1_epi64(static_cast<long long>(bitflip2 >> 32))),
        sixteen(_mm512_set1_epi64(16)),
        // Reverses the bytes of each 64-bit lane (vpshufb works within 128-bit lanes).
        bswap(_mm512_broadcast_i32x4(_mm_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8))) {}

  SPARSESYNC_ALWAYS_INLINE SPARSESYNC_AVX512_TARGET lanes at(__m512i index) const {
    lanes x;
    x.lo = _mm512_xor_si512(index, flip1);
    x.lo_hi = _mm512_srli_epi64(x.lo, 32);
    x.swapped = _mm512_shuffle_epi8(x.lo, bswap);
    x.p01 = _mm512_mul_epu32(x.lo, flip2_hi);
    x.p11 = _mm512_mul_epu32(x.lo_hi, flip2_hi);
    return x;
  }
  // The parts of `at` that are the same for every index whose high 32 bits are those of `index`.
  struct run {
    __m512i lo_hi, p11;
  };
  SPARSESYNC_ALWAYS_INLINE SPARSESYNC_AVX512_TARGET run run_of(std::uint64_t index) const {
    const std::uint64_t lo_hi = (index ^ bitflip1) >> 32;
    return {_mm512_set1_epi64(static_cast<long long>(lo_hi)), _mm512_set1_epi64(static_cast<long long>(lo_hi * (bitflip2 >> 32)))};
  }
  // at(index) for eight indices of run r.
  SPARSESYNC_ALWAYS_INLINE SPARSESYNC_AVX512_TARGET lanes at(__m512i index, const run& r) const {
    lanes x;
    x.lo = _mm512_xor_si512(index, flip1);
    x.lo_hi = r.lo_hi;
    x.swapped = _mm512_shuffle_epi8(x.lo, bswap);
    x.p01 = _mm512_mul_epu32(x.lo, flip2_hi);
    x.p11 = r.p11;
    return x;
  }
  // element_hash(index, bits) per lane, for the eight bit patterns `bits` (zero-extended) at x's indices.
  SPARSESYNC_ALWAYS_INLINE SPARSESYNC_AVX512_TARGET __m512i of(const lanes& x, __m512i bits) const {
    const __m512i hi = _mm512_xor_si512(bits, flip2);
    const __m512i fold = fold_product(x.lo, x.lo_hi, hi, x.p01, x.p11);
    return xxh3_avalanche(_mm512_add_epi64(_mm512_add_epi64(x.swapped, _mm512_add_epi64(hi, sixteen)), fold));
  }
  // The indices first .. first + 7, and the step to the next eight.
  SPARSESYNC_ALWAYS_INLINE SPARSESYNC_AVX512_TARGET static __m512i first_indices(std::uint64_t first) {
    return _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first)), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
  }

  static constexpr std::uint64_t bitflip1 = xxh3_secret_24 ^ xxh3_secret_32;
  static constexpr std::uint64_t bitflip2 = xxh3_secret_40 ^ xxh3_secret_48;
  __m512i flip1, flip2, flip2_hi, sixteen, bswap;
};

// How many of the `left` consecutive indices from `index` share its high 32 bits (indices wrap modulo 2^64, as
// the scalar function's do).
inline std::uint64_t index_run_length(std::uint64_t index, std::uint64_t left) {
  return std::min<std::uint64_t>(left, (std::uint64_t{1} << 32) - (index & 0xFFFFFFFFu));
}

// Elements a round hashed by the vector loop and by the scalar function beside it (two scalar ones: faster than
// one or three on the Zen 4 VM).
inline constexpr std::uint64_t vector_elements_a_round = 8, scalar_elements_a_round = 2;

// The content checksums of the indices first .. first + n - 1, which share their high 32 bits: of `bits`, and
// with Zero of the all-zero model too. (Sums are returned rather than vector accumulators passed by reference:
// GCC 12 at -O3 dropped such an accumulator's stores for 32-bit words, found against the scalar function.)
struct run_checksums {
  std::uint64_t zero = 0, target = 0;
};
template <bool Zero, class W>
SPARSESYNC_AVX512_TARGET run_checksums checksums_of_run(const element_hash8& h, const W* bits, std::uint64_t n, std::uint64_t first) {
  const auto r = h.run_of(first);
  const std::uint64_t rounds = n / (vector_elements_a_round + scalar_elements_a_round);
  const std::uint64_t vectored = rounds * vector_elements_a_round;
  const __m512i step = _mm512_set1_epi64(8);
  __m512i index = element_hash8::first_indices(first);
  __m512i zsum = _mm512_setzero_si512(), tsum = _mm512_setzero_si512();
  std::uint64_t z = 0, t = 0;
  for (std::uint64_t k = 0; k < rounds; ++k) {
    const auto x = h.at(index, r);
    if constexpr (Zero) zsum = _mm512_add_epi64(zsum, h.of(x, _mm512_setzero_si512()));
    tsum = _mm512_add_epi64(tsum, h.of(x, load8_widened(bits + k * vector_elements_a_round)));
    index = _mm512_add_epi64(index, step);
    for (std::uint64_t i = vectored + k * scalar_elements_a_round, e = i + scalar_elements_a_round; i < e; ++i) {
      if constexpr (Zero) z += element_hash(first + i, 0);
      t += element_hash(first + i, bits[i]);
    }
  }
  for (std::uint64_t i = rounds * (vector_elements_a_round + scalar_elements_a_round); i < n; ++i) {
    if constexpr (Zero) z += element_hash(first + i, 0);
    t += element_hash(first + i, bits[i]);
  }
  return {lane_sum(zsum) + z, lane_sum(tsum) + t};
}

// The content checksums of the n elements at flat indices first .. first + n - 1 (of `bits`, and with Zero of
// the all-zero model too), run by run. The base checksum of every patch, the verification of a receiver's base
// and a full transfer's checksums read the whole model through this: it sets the CPU speed of every encoder end
// to end.
template <bool Zero, class W>
SPARSESYNC_AVX512_TARGET run_checksums checksums_avx512(const W* bits, std::uint64_t n, std::uint64_t first) {
  static_assert(sizeof(W) <= 4, "an element's bits must fit in 32 bits (the high half of `hi` is then constant)");
  const element_hash8 h;
  run_checksums sum;
  for (std::uint64_t done = 0, count = 0; done < n; done += count) {
    count = index_run_length(first + done, n - done);
    const auto s = checksums_of_run<Zero>(h, bits + done, count, first + done);
    sum.zero += s.zero;
    sum.target += s.target;
  }
  return sum;
}

// Adds sum over i < n of element_hash(index[i], after[i]) - element_hash(index[i], before[i]) to `delta` for the
// first n - n % 8 elements (the checksum change of scattered changed elements); returns how many it did.
SPARSESYNC_AVX512_TARGET inline std::uint64_t hash_deltas_avx512(const std::uint64_t* index, const std::uint32_t* after, const std::uint32_t* before,
                                                                std::uint64_t n, std::uint64_t& delta) {
  const element_hash8 h;
  __m512i sum = _mm512_setzero_si512();
  const std::uint64_t whole = n - n % 8;
  for (std::uint64_t i = 0; i < whole; i += 8) {
    const auto x = h.at(_mm512_loadu_si512(index + i));
    const __m512i a = _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(after + i)));
    const __m512i b = _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(before + i)));
    sum = _mm512_add_epi64(sum, _mm512_sub_epi64(h.of(x, a), h.of(x, b)));
  }
  delta += lane_sum(sum);
  return whole;
}
#undef SPARSESYNC_AVX512_TARGET
#endif

// content_checksum (hash.hpp, the specification), eight elements at a time where the CPU has AVX-512: the same
// value, bit for bit.
template <class W>
std::uint64_t content_checksum_fast(const W* bits, std::uint64_t count, std::uint64_t first) {
#if SPARSESYNC_HASH_AVX512
  if (count >= 8 && cpu_has_avx512_hash()) return checksums_avx512<false>(bits, count, first).target;
#endif
  return content_checksum(bits, count, first);
}

// Sum over i < n of element_hash(index[i], after[i]) - element_hash(index[i], before[i]), modulo 2^64: what n
// changed elements add to a content checksum. Eight at a time where the CPU has AVX-512.
inline std::uint64_t hash_deltas_fast(const std::uint64_t* index, const std::uint32_t* after, const std::uint32_t* before, std::uint64_t n) {
  std::uint64_t done = 0, delta = 0;
#if SPARSESYNC_HASH_AVX512
  if (n >= 8 && cpu_has_avx512_hash()) done = hash_deltas_avx512(index, after, before, n, delta);
#endif
  for (std::uint64_t i = done; i < n; ++i) delta += element_hash(index[i], after[i]) - element_hash(index[i], before[i]);
  return delta;
}

// Adds the content checksums of `count` elements at flat index `first` to `zero` (of the all-zero model) and
// `target` (of `bits`): sum of element_hash(first + i, 0) and of element_hash(first + i, bits[i]).
template <class W>
void add_zero_and_content_checksums(const W* bits, std::uint64_t count, std::uint64_t first, std::uint64_t& zero, std::uint64_t& target) {
#if SPARSESYNC_HASH_AVX512
  if (count >= 8 && cpu_has_avx512_hash()) {
    const auto s = checksums_avx512<true>(bits, count, first);
    zero += s.zero;
    target += s.target;
    return;
  }
#endif
  std::uint64_t z = 0, t = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    z += element_hash(first + i, 0);
    t += element_hash(first + i, bits[i]);
  }
  zero += z;
  target += t;
}

}  // namespace detail
SPARSESYNC_NS_END
