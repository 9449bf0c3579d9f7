// The entropy decoder's class count fused with the content checksum of the same base elements (AVX-512, BF16
// and FP16 words): a receiver that verifies its base reads each element once for both instead of twice. The
// checksum's vector work and the count's scalar increments use different units of a core, so the pair costs
// little more than the checksum alone. Same counts as entropy_count_classes and the same sum as
// content_checksum (tests/core/entropy_test.cpp); checked once at run time (hash_x86.hpp).
#pragma once

#include <sparsesync/core/hash_x86.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <span>

SPARSESYNC_NS_BEGIN
namespace detail {

#if SPARSESYNC_HASH_AVX512
// Counts as entropy_count_classes (lanes of length q, 9-bit keys) into h, which the caller zeroed, and
// returns sum over i < n of element_hash(first + i, b[i]).
__attribute__((target("avx512f,avx512dq,avx512bw"))) inline std::uint64_t entropy_count_and_hash_avx512(
    const std::uint16_t* b, std::size_t n, std::size_t q, std::array<std::array<std::uint32_t, 512>, 4>& h, std::uint64_t first) {
  const element_hash8 hash;
  // Each row: four elements (8 bytes) of each of the four lanes; lanes 0 and 1 hashed together, 2 and 3.
  __m512i index01 = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first)),
                                     _mm512_setr_epi64(0, 1, 2, 3, static_cast<long long>(q), static_cast<long long>(q + 1),
                                                       static_cast<long long>(q + 2), static_cast<long long>(q + 3)));
  __m512i index23 = _mm512_add_epi64(index01, _mm512_set1_epi64(static_cast<long long>(2 * q)));
  const __m512i four = _mm512_set1_epi64(4);
  __m512i sum01 = _mm512_setzero_si512(), sum23 = _mm512_setzero_si512();
  for (std::size_t i = 0; i < q; i += 4) {
    std::uint64_t v[4];
    for (unsigned l = 0; l < 4; ++l) std::memcpy(&v[l], b + l * q + i, 8);
    sum01 = _mm512_add_epi64(sum01, hash.of(hash.at(index01), _mm512_cvtepu16_epi64(_mm_set_epi64x(static_cast<long long>(v[1]), static_cast<long long>(v[0])))));
    sum23 = _mm512_add_epi64(sum23, hash.of(hash.at(index23), _mm512_cvtepu16_epi64(_mm_set_epi64x(static_cast<long long>(v[3]), static_cast<long long>(v[2])))));
    index01 = _mm512_add_epi64(index01, four);
    index23 = _mm512_add_epi64(index23, four);
    for (unsigned t = 0; t < 4; ++t)
      for (unsigned l = 0; l < 4; ++l) ++h[l][static_cast<unsigned>(v[l] >> (16 * t + 7)) & 511u];
  }
  std::uint64_t sum = lane_sum(sum01) + lane_sum(sum23);
  for (std::size_t i = 4 * q; i < n; ++i) {
    ++h[3][static_cast<unsigned>(b[i]) >> 7];
    sum += element_hash(first + i, b[i]);
  }
  return sum;
}
#endif

}  // namespace detail
SPARSESYNC_NS_END
