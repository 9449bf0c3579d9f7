// The content checksum of a chunk's base in the passes of the entropy codec that read every base element
// anyway (the decoder's class count, the encoder's scan: codec/entropy.hpp), for 16-bit words with AVX-512:
// the base is read once for both instead of twice, and the checksum's vector work runs beside the passes'
// scalar counting on other units of the core, so the pair costs little more than the checksum alone.
// Checked once at run time (hash_x86.hpp); the same sums as content_checksum (tests/core/entropy_test.cpp).
#pragma once

#include <sparsesync/core/hash_x86.hpp>

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
#endif

}  // namespace detail
SPARSESYNC_NS_END
