// The content checksum of a chunk's base in the passes of the entropy codec that read every base element
// anyway (the decoder's class count, the encoder's scan: codec/entropy.hpp), for 16-bit words with AVX-512:
// the base is read once for both instead of twice, and the checksum's vector work runs beside the passes'
// scalar counting on other units of the core, so the pair costs little more than the checksum alone.
// Checked once at run time (hash_x86.hpp); the same sums as content_checksum (tests/core/entropy_test.cpp).
// Also the decoder's placing walk for 16-bit words with AVX-512 VBMI (entropy_place_avx512, below).
#pragma once

#include <sparsesync/codec/entropy_params.hpp>
#include <sparsesync/core/hash_x86.hpp>

#include <algorithm>
#include <array>
#include <cstdint>

SPARSESYNC_NS_BEGIN
namespace detail {

#if SPARSESYNC_HASH_AVX512
#define SPARSESYNC_ENTROPY_HASH_TARGET __attribute__((target("avx512f,avx512dq,avx512bw")))

// Hashes the rows of the entropy passes' four lanes (lane l at offset l * q): row i is four 16-bit elements
// of each lane, at flat indices first + l * q + i .. + 3, given as each lane's 8 bytes.
struct entropy_row_hash {
  element_hash8 hash;
  __m512i index01, index23, sum01, sum23;

  SPARSESYNC_ENTROPY_HASH_TARGET entropy_row_hash(std::uint64_t first, std::uint64_t q)
      : index01(_mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first)),
                                 _mm512_setr_epi64(0, 1, 2, 3, static_cast<long long>(q), static_cast<long long>(q + 1),
                                                   static_cast<long long>(q + 2), static_cast<long long>(q + 3)))),
        index23(_mm512_add_epi64(index01, _mm512_set1_epi64(static_cast<long long>(2 * q)))),
        sum01(_mm512_setzero_si512()),
        sum23(_mm512_setzero_si512()) {}

  // Rows in increasing order from row 0 (the indices advance by four per row).
  SPARSESYNC_ENTROPY_HASH_TARGET void add(const std::array<std::uint64_t, 4>& v) {
    const __m512i bits01 = _mm512_cvtepu16_epi64(_mm_set_epi64x(static_cast<long long>(v[1]), static_cast<long long>(v[0])));
    const __m512i bits23 = _mm512_cvtepu16_epi64(_mm_set_epi64x(static_cast<long long>(v[3]), static_cast<long long>(v[2])));
    sum01 = _mm512_add_epi64(sum01, hash.of(hash.at(index01), bits01));
    sum23 = _mm512_add_epi64(sum23, hash.of(hash.at(index23), bits23));
    const __m512i four = _mm512_set1_epi64(4);
    index01 = _mm512_add_epi64(index01, four);
    index23 = _mm512_add_epi64(index23, four);
  }

  SPARSESYNC_ENTROPY_HASH_TARGET std::uint64_t sum() const { return lane_sum(sum01) + lane_sum(sum23); }
};

// The decoder's placing walk (entropy::place_changes) over one lane of 16-bit words, 64 elements a step: the
// step's classes (entropy_params::class_of) become group bytes by a 256-entry table lookup (two two-table byte permutes and a
// blend), and each group that still has a change to place counts its elements in the step by a compare mask:
// where its countdown runs out inside the step, the change is the countdown-th set bit of the mask. The scalar
// walk decrements a counter in memory per element (a load, a store and a table load: ~34% of an apply at 1% on
// a Zen 4); here a step costs a few instructions per group still placing. The same positions and groups as the
// scalar walk over [from, to) (tests/core/entropy_test.cpp compares them), and the same counters for every group
// still placing: `countdown`, `cursor`, `last`, `rank` and `at` as there; the caller walks the elements past the
// last whole step.
#define SPARSESYNC_ENTROPY_WALK_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,bmi,bmi2,popcnt")))

inline bool cpu_has_avx512_walk() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
  }();
  return has;
}

// Returns the index where the scalar walk takes over (from + a multiple of 64).
SPARSESYNC_ENTROPY_WALK_TARGET inline std::size_t entropy_place_avx512(const std::uint16_t* base, std::size_t from, std::size_t to,
                                                                      const std::uint8_t* of_class, unsigned groups, std::uint32_t* countdown,
                                                                      std::uint32_t* cursor, const std::uint32_t* last, const std::uint32_t* rank,
                                                                      std::uint32_t* pos, std::uint8_t* grp, std::uint32_t& at) {
  constexpr unsigned shift = entropy_params::class_shift<std::uint16_t>;
  static_assert(entropy_params::class_count<std::uint16_t> == 256 && shift + 8 <= 16, "a class is the byte at bit `shift`");
  constexpr std::uint32_t none = ~std::uint32_t{0};
  std::array<std::uint8_t, 256> active;  // groups with a change left to place in this lane
  unsigned n_active = 0;
  for (unsigned g = 0; g < groups; ++g)
    if (countdown[g] != none) active[n_active++] = static_cast<std::uint8_t>(g);
  const __m512i t0 = _mm512_loadu_si512(of_class), t1 = _mm512_loadu_si512(of_class + 64);
  const __m512i t2 = _mm512_loadu_si512(of_class + 128), t3 = _mm512_loadu_si512(of_class + 192);
  std::array<std::uint64_t, 64> found;  // (index in the step << 8 | group) of the step's changes
  std::size_t i = from;
  for (; n_active > 0 && i + 64 <= to; i += 64) {
    const __m512i c0 = _mm512_srli_epi16(_mm512_loadu_si512(base + i), shift);
    const __m512i c1 = _mm512_srli_epi16(_mm512_loadu_si512(base + i + 32), shift);
    const __m512i cls = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(c0)), _mm512_cvtepi16_epi8(c1), 1);
    const __m512i low = _mm512_permutex2var_epi8(t0, cls, t1), high = _mm512_permutex2var_epi8(t2, cls, t3);
    const __m512i group = _mm512_mask_blend_epi8(_mm512_movepi8_mask(cls), low, high);
    unsigned n_found = 0;
    for (unsigned a = 0; a < n_active;) {
      const unsigned g = active[a];
      std::uint64_t m = _mm512_cmpeq_epi8_mask(group, _mm512_set1_epi8(static_cast<char>(g)));
      auto c = static_cast<std::uint32_t>(_mm_popcnt_u64(m));
      std::uint32_t d = countdown[g];
      while (c >= d) {  // the d-th element of g in this step is its next change
        const auto at_bit = static_cast<unsigned>(_tzcnt_u64(_pdep_u64(std::uint64_t{1} << (d - 1), m)));
        found[n_found++] = std::uint64_t{at_bit} << 8 | g;
        m &= at_bit == 63 ? 0 : ~std::uint64_t{0} << (at_bit + 1);
        c = static_cast<std::uint32_t>(_mm_popcnt_u64(m));
        const std::uint32_t e = ++cursor[g];
        d = e < last[g] ? rank[e] - rank[e - 1] : none;
      }
      countdown[g] = d == none ? none : d - c;
      if (d == none) active[a] = active[--n_active];  // (the order of the active groups does not matter)
      else ++a;
    }
    if (n_found > 1) std::sort(found.begin(), found.begin() + n_found);
    for (unsigned k = 0; k < n_found; ++k) {
      pos[at] = static_cast<std::uint32_t>(i + (found[k] >> 8));
      grp[at++] = static_cast<std::uint8_t>(found[k]);
    }
  }
  return n_active == 0 ? to : i;
}
#endif

}  // namespace detail
SPARSESYNC_NS_END
