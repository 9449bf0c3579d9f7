// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a counter-based
// generator, so any element's random numbers are a pure function of (seed, counter). That is what makes the
// generator's output independent of thread count and chunking, and reproducible by a GPU kernel: this is
// the same function as Random123's philox4x32_R(10, ...) and cuRAND's Philox core.
#pragma once

#include <sparsesync/core/config.hpp>

#include <cstdint>

SPARSESYNC_NS_BEGIN
namespace gen {

struct philox_block {
  std::uint32_t v[4];
};

struct philox_key {
  std::uint32_t k[2];
};

namespace detail {

SPARSESYNC_HD constexpr void mulhilo32(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

}  // namespace detail

SPARSESYNC_HD constexpr philox_block philox4x32_10(philox_block ctr, philox_key key) {
  constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;
  constexpr std::uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key.k[0] += w0;
      key.k[1] += w1;
    }
    std::uint32_t hi0 = 0, lo0 = 0, hi1 = 0, lo1 = 0;
    detail::mulhilo32(m0, ctr.v[0], hi0, lo0);
    detail::mulhilo32(m1, ctr.v[2], hi1, lo1);
    ctr = philox_block{{hi1 ^ ctr.v[1] ^ key.k[0], lo1, hi0 ^ ctr.v[3] ^ key.k[1], lo0}};
  }
  return ctr;
}

}  // namespace gen
SPARSESYNC_NS_END
