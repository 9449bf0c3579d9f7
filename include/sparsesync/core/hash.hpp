// Checksums of the wire format (docs/FORMAT.md, "Checksums").
//
// * Byte streams (headers, tables, chunk data, the layout) use XXH64 with a stated seed.
// * Tensor contents use an additive hash: the sum, modulo 2^64, of XXH3-64 of a 16-byte record
//   (u64 flat element index, u64 zero-extended bit pattern) over every element. The sum makes the hash
//   of a model the sum of the hashes of its buckets, lets a GPU compute it as a plain reduction, and lets
//   a holder of a checksum update it after a patch by touching only the changed elements:
//   new = old - h(i, old_bits) + h(i, new_bits).
#pragma once

#include <sparsesync/core/config.hpp>

#include <cstddef>
#include <cstdint>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

SPARSESYNC_NS_BEGIN
namespace detail {

// Bytes 24..55 of XXH3's default secret (XXH3_kSecret), the part its 9-16 byte path reads.
// tests/core/hash_test.cpp checks element_hash against the library's XXH3_64bits.
inline constexpr std::uint64_t xxh3_secret_24 = 0x1f67b3b7a4a44072ULL;
inline constexpr std::uint64_t xxh3_secret_32 = 0x78e5c0cc4ee679cbULL;
inline constexpr std::uint64_t xxh3_secret_40 = 0x2172ffcc7dd05a82ULL;
inline constexpr std::uint64_t xxh3_secret_48 = 0x8e2443f7744608b8ULL;

SPARSESYNC_HD std::uint64_t bswap64(std::uint64_t x) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(static_cast<unsigned>(x >> 32), 0, 0x0123) |
         (static_cast<std::uint64_t>(__byte_perm(static_cast<unsigned>(x), 0, 0x0123)) << 32);
#else
  return __builtin_bswap64(x);
#endif
}

SPARSESYNC_HD std::uint64_t mul128_fold64(std::uint64_t a, std::uint64_t b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#else
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<std::uint64_t>(p) ^ static_cast<std::uint64_t>(p >> 64);
#endif
}

}  // namespace detail

// XXH3_64bits(record, 16) for record = le64(index) || le64(bits): one element's share of a content checksum.
SPARSESYNC_HD std::uint64_t element_hash(std::uint64_t index, std::uint64_t bits) {
  constexpr std::uint64_t bitflip1 = detail::xxh3_secret_24 ^ detail::xxh3_secret_32;
  constexpr std::uint64_t bitflip2 = detail::xxh3_secret_40 ^ detail::xxh3_secret_48;
  const std::uint64_t lo = index ^ bitflip1;
  const std::uint64_t hi = bits ^ bitflip2;
  std::uint64_t acc = 16 + detail::bswap64(lo) + hi + detail::mul128_fold64(lo, hi);
  acc ^= acc >> 37;
  acc *= 0x165667919E3779F9ULL;
  acc ^= acc >> 32;
  return acc;
}

// Additive content checksum of `count` elements whose flat indices start at `first_index`.
template <class W>
std::uint64_t content_checksum(const W* bits, std::uint64_t count, std::uint64_t first_index) {
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < count; ++i) sum += element_hash(first_index + i, bits[i]);
  return sum;
}

// XXH64 of a byte range; the one hash for every byte stream in the format.
inline std::uint64_t stream_hash(const void* data, std::size_t size, std::uint64_t seed) {
  return XXH64(data, size, seed);
}

// Incremental XXH64 (chunk hash = XXH64 over entry bytes then data bytes, see FORMAT.md).
class stream_hasher {
 public:
  explicit stream_hasher(std::uint64_t seed) { XXH64_reset(&state_, seed); }
  void update(const void* data, std::size_t size) { XXH64_update(&state_, data, size); }
  [[nodiscard]] std::uint64_t digest() const { return XXH64_digest(&state_); }

 private:
  XXH64_state_t state_{};
};

SPARSESYNC_NS_END
