// Shared by the libFuzzer harnesses: a property check that stops the run (libFuzzer then saves the input),
// and a cursor over the fuzz input. Each harness defines LLVMFuzzerTestOneInput; under g++ the same file is
// linked with replay_main.cpp, which runs it over committed inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

// A violated property is a finding, like a crash: print it and abort so the input is kept.
#define FUZZ_CHECK(cond)                                                                        \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "fuzz property violated: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)

namespace sparsesync::fuzz {

// The base elements a chunk harness decodes against, for encoders that read them (needs_base: entropy's classes
// come from each old value's exponent). The same for every input, so make_seeds.cpp writes seeds against it.
// Varied on purpose: every exponent of the word occurs, in runs and alone.
template <class W>
W chunk_base_element(std::uint32_t i) {
  std::uint64_t x = (std::uint64_t{i} + 1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return static_cast<W>(x >> (64 - 8 * sizeof(W)));
}

// Reads fixed-width fields off the front of the input; past the end it yields zeros.
class cursor {
 public:
  cursor(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}
  std::uint8_t byte() { return pos_ < n_ ? p_[pos_++] : 0; }
  std::uint32_t u16() { return byte() | (std::uint32_t{byte()} << 8); }
  std::uint32_t u32() { return u16() | (u16() << 16); }
  // Up to `max` bytes.
  std::span<const unsigned char> take(std::size_t max) {
    const std::size_t k = std::min(max, n_ - pos_);
    std::span<const unsigned char> s(p_ + pos_, k);
    pos_ += k;
    return s;
  }
  std::span<const unsigned char> rest() { return take(n_ - pos_); }
  [[nodiscard]] bool empty() const { return pos_ >= n_; }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
};

}  // namespace sparsesync::fuzz
