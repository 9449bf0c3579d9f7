// The element-hash floor of a full transfer (FORMAT.md §5, §6.4): a receiver from the zero model hashes every
// element twice, for the bucket's base (zero) and target checksums. Times that over MIB MiB of BF16 weights,
// eight elements at a time where the CPU has AVX-512 (format/dense_bitmap.hpp's path) and one at a time, and
// a target-only pass; prints JSON.   dense_hash_bench [MIB]
#include <sparsesync/core/hash_x86.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

template <class F>
double best_of_3(F&& f) {
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const auto a = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sparsesync;
  const std::uint64_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const std::uint64_t n = mib << 19;  // BF16 elements
  // A 16 MiB bucket's worth, hashed over and over at increasing indices (a receiver hashes a chunk it just
  // copied, from cache).
  const std::uint64_t block = std::uint64_t{8} << 20;
  std::vector<std::uint16_t> w(block);
  std::mt19937_64 rng(1);
  for (auto& x : w) x = static_cast<std::uint16_t>(rng() | 1);
  std::uint64_t sink = 0;
  const double both = best_of_3([&] {
    std::uint64_t z = 0, t = 0;
    for (std::uint64_t i = 0; i < n; i += block) detail::add_zero_and_content_checksums(w.data(), block, i, z, t);
    sink += z + t;
  });
  const double both_scalar = best_of_3([&] {
    std::uint64_t z = 0, t = 0;
    for (std::uint64_t i = 0; i < n; i += block)
      for (std::uint64_t j = 0; j < block; ++j) {
        z += element_hash(i + j, 0);
        t += element_hash(i + j, w[j]);
      }
    sink += z + t;
  });
  const double target_scalar = best_of_3([&] {
    std::uint64_t t = 0;
    for (std::uint64_t i = 0; i < n; i += block) t += content_checksum(w.data(), block, i);
    sink += t;
  });
#if SPARSESYNC_HASH_AVX512
  const bool avx512 = detail::cpu_has_avx512_hash();
#else
  const bool avx512 = false;
#endif
  std::printf("{\"mib\": %llu, \"elements\": %llu, \"avx512\": %s, \"zero_and_target_seconds\": %.3f, \"zero_and_target_scalar_seconds\": %.3f, "
              "\"target_only_scalar_seconds\": %.3f, \"sink\": %llu}\n",
              static_cast<unsigned long long>(mib), static_cast<unsigned long long>(n), avx512 ? "true" : "false", both, both_scalar,
              target_scalar, static_cast<unsigned long long>(sink & 1));
}
