// Finding the elements where two arrays differ at close to memory speed. At RL densities (~1%) about half
// of all 64-element blocks hold a change, at unpredictable places, so the scan avoids branching on the data:
// each block becomes a 64-bit mask of differing elements (SSE2 compares where available), and the first two
// set bits of every mask are stored unconditionally; only a block with three or more changes loops.
#pragma once

#include <sparsesync/core/dtype.hpp>

#include <bit>
#include <cstdint>

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#define SPARSESYNC_DIFF_SSE2 1
#endif

SPARSESYNC_NS_BEGIN
namespace detail {

inline constexpr std::uint64_t diff_block = 64;  // elements per mask

// Bit i set iff a[i] != b[i] for the 64 elements at a and b (b null: compared with zero). Portable form.
template <element_word W>
std::uint64_t diff_mask_scalar(const W* a, const W* b, std::uint64_t n = diff_block) {
  std::uint64_t m = 0;
  for (std::uint64_t i = 0; i < n; ++i) m |= std::uint64_t{a[i] != (b ? b[i] : W{0})} << i;
  return m;
}

#if SPARSESYNC_DIFF_SSE2
inline __m128i load16(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// 16 bits (one per element) of "equal" for the 16 elements at a and b; 16 / sizeof(W) elements per load.
template <element_word W, bool HasB>
unsigned equal_mask16(const W* a, const W* b) {
  constexpr unsigned per = 16 / sizeof(W);
  __m128i e[sizeof(W)];
  for (unsigned v = 0; v < sizeof(W); ++v) {
    const __m128i x = load16(a + v * per);
    const __m128i y = HasB ? load16(b + v * per) : _mm_setzero_si128();
    if constexpr (sizeof(W) == 1) e[v] = _mm_cmpeq_epi8(x, y);
    else if constexpr (sizeof(W) == 2) e[v] = _mm_cmpeq_epi16(x, y);
    else e[v] = _mm_cmpeq_epi32(x, y);
  }
  // Narrow the all-ones / all-zeros lanes to bytes (signed saturation keeps -1 and 0), then one bit each.
  __m128i bytes;
  if constexpr (sizeof(W) == 1) bytes = e[0];
  else if constexpr (sizeof(W) == 2) bytes = _mm_packs_epi16(e[0], e[1]);
  else bytes = _mm_packs_epi16(_mm_packs_epi32(e[0], e[1]), _mm_packs_epi32(e[2], e[3]));
  return static_cast<unsigned>(_mm_movemask_epi8(bytes));
}

template <element_word W, bool HasB>
std::uint64_t diff_mask(const W* a, const W* b) {
  std::uint64_t eq = 0;
  for (unsigned q = 0; q < 4; ++q) eq |= std::uint64_t{equal_mask16<W, HasB>(a + 16 * q, HasB ? b + 16 * q : nullptr)} << (16 * q);
  return ~eq;
}
#else
template <element_word W, bool HasB>
std::uint64_t diff_mask(const W* a, const W* b) {
  return diff_mask_scalar<W>(a, HasB ? b : nullptr);
}
#endif

// Stores first + (index of each set bit of m) at out; returns the end. `out` has room for popcount(m) + 2.
inline std::uint32_t* store_set_bits(std::uint64_t m, std::uint32_t first, std::uint32_t* out) {
  // Two stores without a branch cover most blocks; std::countr_zero(0) = 64 makes a harmless dummy store.
  out[0] = first + static_cast<std::uint32_t>(std::countr_zero(m));
  out += m != 0;
  m &= m - 1;
  out[0] = first + static_cast<std::uint32_t>(std::countr_zero(m));
  out += m != 0;
  m &= m - 1;
  for (; m; m &= m - 1) *out++ = first + static_cast<std::uint32_t>(std::countr_zero(m));
  return out;
}

template <bool HasB, element_word W>
std::uint32_t* scan_blocks(const W* a, const W* b, std::uint64_t n, std::uint32_t* out) {
  for (std::uint64_t i = 0; i + diff_block <= n; i += diff_block)
    out = store_set_bits(diff_mask<W, HasB>(a + i, HasB ? b + i : nullptr), static_cast<std::uint32_t>(i), out);
  return out;
}

// Writes every i in [0, n) with a[i] != b[i] (b null: with a[i] != 0) to `out`, increasing; returns the end.
// `out` has room for n + 2 entries (n < 2^32). No alignment is assumed.
template <element_word W>
std::uint32_t* find_differences(const W* a, const W* b, std::uint64_t n, std::uint32_t* out) {
  out = b ? scan_blocks<true>(a, b, n, out) : scan_blocks<false>(a, b, n, out);
  const std::uint64_t tail = n - n % diff_block;
  const W* bt = b ? b + tail : nullptr;
  return store_set_bits(diff_mask_scalar<W>(a + tail, bt, n - tail), static_cast<std::uint32_t>(tail), out);
}

}  // namespace detail
SPARSESYNC_NS_END
