// XXH64 (xxHash 0.8) as host/device code: the payload and header checksums of the wire format computed on
// the GPU. A streaming state fed with whole 8-byte little-endian words (the common case: chunk entry and data
// are produced word by word) and with single bytes at the end. Registers only: no runtime-indexed arrays, so
// nothing spills to local memory. tests/cuda checks it against libxxhash.
#pragma once

#include <sparsesync/cuda/config.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

inline constexpr std::uint64_t xxh_p1 = 0x9E3779B185EBCA87ULL;
inline constexpr std::uint64_t xxh_p2 = 0xC2B2AE3D27D4EB4FULL;
inline constexpr std::uint64_t xxh_p3 = 0x165667B19E3779F9ULL;
inline constexpr std::uint64_t xxh_p4 = 0x85EBCA77C2B2AE63ULL;
inline constexpr std::uint64_t xxh_p5 = 0x27D4EB2F165667C5ULL;

SPARSESYNC_HD std::uint64_t rotl64(std::uint64_t x, unsigned r) { return (x << r) | (x >> (64 - r)); }

SPARSESYNC_HD std::uint64_t xxh64_round(std::uint64_t acc, std::uint64_t input) {
  acc += input * xxh_p2;
  acc = rotl64(acc, 31);
  return acc * xxh_p1;
}

SPARSESYNC_HD std::uint64_t xxh64_merge(std::uint64_t acc, std::uint64_t v) {
  acc ^= xxh64_round(0, v);
  return acc * xxh_p1 + xxh_p4;
}

SPARSESYNC_HD std::uint64_t xxh64_avalanche(std::uint64_t h) {
  h ^= h >> 33;
  h *= xxh_p2;
  h ^= h >> 29;
  h *= xxh_p3;
  h ^= h >> 32;
  return h;
}

// Streaming XXH64. Words are consumed in stripes of four; up to three complete words and one partial word
// wait in a shift register, because the final tail (len % 32 bytes) is hashed differently.
class xxh64_state {
 public:
  SPARSESYNC_HD explicit xxh64_state(std::uint64_t seed)
      : seed_(seed), v1_(seed + xxh_p1 + xxh_p2), v2_(seed + xxh_p2), v3_(seed), v4_(seed - xxh_p1) {}

  // Appends 8 bytes (little-endian word). Requires that no partial word is pending (bytes() % 8 == 0).
  SPARSESYNC_HD void update_word(std::uint64_t w) {
    len_ += 8;
    push_word(w);
  }

  SPARSESYNC_HD void update_byte(unsigned char b) {
    part_ |= static_cast<std::uint64_t>(b) << (8 * part_bytes_);
    ++len_;
    if (++part_bytes_ == 8) {
      push_word(part_);
      part_ = 0;
      part_bytes_ = 0;
    }
  }

  // Appends the low `n` bytes (0..8) of w, least significant first.
  SPARSESYNC_HD void update_bytes(std::uint64_t w, unsigned n) {
    if (n == 8 && part_bytes_ == 0) {
      update_word(w);
      return;
    }
    for (unsigned i = 0; i < n; ++i) update_byte(static_cast<unsigned char>(w >> (8 * i)));
  }

  [[nodiscard]] SPARSESYNC_HD std::uint64_t bytes() const { return len_; }

  // Continues a hash whose first `len` bytes (a multiple of 32) were consumed elsewhere, leaving the four
  // accumulators v1..v4 (the warp-cooperative hash: lane i ran accumulator i over the stripes).
  SPARSESYNC_HD void resume(std::uint64_t v1, std::uint64_t v2, std::uint64_t v3, std::uint64_t v4, std::uint64_t len) {
    v1_ = v1;
    v2_ = v2;
    v3_ = v3;
    v4_ = v4;
    len_ = len;
    pending_ = 0;
    part_ = 0;
    part_bytes_ = 0;
  }
  [[nodiscard]] SPARSESYNC_HD std::uint64_t lane_init(unsigned lane) const {
    return lane == 0 ? v1_ : lane == 1 ? v2_ : lane == 2 ? v3_ : v4_;
  }

  [[nodiscard]] SPARSESYNC_HD std::uint64_t digest() const {
    std::uint64_t h;
    if (len_ >= 32) {
      h = rotl64(v1_, 1) + rotl64(v2_, 7) + rotl64(v3_, 12) + rotl64(v4_, 18);
      h = xxh64_merge(h, v1_);
      h = xxh64_merge(h, v2_);
      h = xxh64_merge(h, v3_);
      h = xxh64_merge(h, v4_);
    } else {
      h = seed_ + xxh_p5;
    }
    h += len_;
    // The tail: pending whole words in arrival order, then the partial word.
    if (pending_ > 0) h = tail_word(h, w0_);
    if (pending_ > 1) h = tail_word(h, w1_);
    if (pending_ > 2) h = tail_word(h, w2_);
    std::uint64_t p = part_;
    unsigned n = part_bytes_;
    if (n >= 4) {
      h ^= (p & 0xFFFFFFFFULL) * xxh_p1;
      h = rotl64(h, 23) * xxh_p2 + xxh_p3;
      p >>= 32;
      n -= 4;
    }
    for (; n > 0; --n) {
      h ^= (p & 0xFF) * xxh_p5;
      h = rotl64(h, 11) * xxh_p1;
      p >>= 8;
    }
    return xxh64_avalanche(h);
  }

 private:
  SPARSESYNC_HD void push_word(std::uint64_t w) {
    if (pending_ == 3) {
      v1_ = xxh64_round(v1_, w0_);
      v2_ = xxh64_round(v2_, w1_);
      v3_ = xxh64_round(v3_, w2_);
      v4_ = xxh64_round(v4_, w);
      pending_ = 0;
      return;
    }
    w0_ = pending_ == 0 ? w : w0_;
    w1_ = pending_ == 1 ? w : w1_;
    w2_ = pending_ == 2 ? w : w2_;
    ++pending_;
  }

  SPARSESYNC_HD static std::uint64_t tail_word(std::uint64_t h, std::uint64_t w) {
    h ^= xxh64_round(0, w);
    return rotl64(h, 27) * xxh_p1 + xxh_p4;
  }

  std::uint64_t seed_;
  std::uint64_t v1_, v2_, v3_, v4_;
  std::uint64_t w0_ = 0, w1_ = 0, w2_ = 0;
  std::uint64_t part_ = 0;
  std::uint64_t len_ = 0;
  unsigned pending_ = 0;
  unsigned part_bytes_ = 0;
};

// One-shot XXH64 of a byte range readable by the calling side (host or device memory, not both).
SPARSESYNC_HD std::uint64_t xxh64_bytes(const unsigned char* p, std::uint64_t n, std::uint64_t seed) {
  xxh64_state s(seed);
  std::uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w = 0;
    for (unsigned k = 0; k < 8; ++k) w |= static_cast<std::uint64_t>(p[i + k]) << (8 * k);
    s.update_word(w);
  }
  for (; i < n; ++i) s.update_byte(p[i]);
  return s.digest();
}

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
