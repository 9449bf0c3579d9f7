// LSB-first bit packing for the entropy coders: stream bit i is bit (i % 8) of byte i / 8.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/little_endian.hpp>

#include <bit>
#include <cstdint>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace detail {

class bit_writer {
 public:
  explicit bit_writer(std::vector<unsigned char>& out) : out_(out) {}

  // Appends the low `n` bits of v (n <= 57 per call keeps the accumulator from overflowing).
  void put(std::uint64_t v, unsigned n) {
    if (n == 0) return;
    if (n > 32) {
      put(v & 0xFFFFFFFFu, 32);
      put(v >> 32, n - 32);
      return;
    }
    acc_ |= (v & ((std::uint64_t{1} << n) - 1)) << fill_;
    fill_ += n;
    while (fill_ >= 8) {
      out_.push_back(static_cast<unsigned char>(acc_));
      acc_ >>= 8;
      fill_ -= 8;
    }
  }
  void put_ones(unsigned n) {
    while (n >= 32) {
      put(0xFFFFFFFFu, 32);
      n -= 32;
    }
    put((std::uint64_t{1} << n) - 1, n);
  }
  // Pads the last byte with zero bits.
  void flush() {
    if (fill_ > 0) out_.push_back(static_cast<unsigned char>(acc_));
    acc_ = 0;
    fill_ = 0;
  }

 private:
  std::vector<unsigned char>& out_;
  std::uint64_t acc_ = 0;
  unsigned fill_ = 0;
};

// Reads bits from a byte range; reading past the end sets a sticky failure flag instead of touching memory.
class bit_reader {
 public:
  bit_reader(const unsigned char* p, const unsigned char* end) : p_(p), end_(end) {}

  std::uint64_t get(unsigned n) {
    if (n > 32) {
      const std::uint64_t lo = get(32);
      return lo | (get(n - 32) << 32);
    }
    refill();
    if (fill_ < n) {
      failed_ = true;
      return 0;
    }
    const std::uint64_t v = acc_ & ((std::uint64_t{1} << n) - 1);
    consume(n);
    return v;
  }

  // Counts leading one bits up to `limit`. Below the limit the terminating zero is consumed too; at the
  // limit (the escape of the Rice codes) no terminator follows.
  unsigned get_unary(unsigned limit) {
    refill();
    // Most runs are short and buffered with their terminating zero: one step, no loop.
    if (const auto ones = static_cast<unsigned>(std::countr_one(acc_)); ones < limit && ones < fill_) {
      consume(ones + 1);
      return ones;
    }
    unsigned q = 0;
    for (;;) {
      refill();
      if (fill_ == 0) {
        failed_ = true;
        return q;
      }
      unsigned ones = static_cast<unsigned>(std::countr_one(acc_));
      if (ones > fill_) ones = fill_;
      if (ones >= limit - q) {
        consume(limit - q);
        return limit;
      }
      consume(ones);
      q += ones;
      if (fill_ > 0) {  // the zero that ends the run is buffered
        consume(1);
        return q;
      }
    }
  }

  // A Rice code of parameter k that is not an escape (fewer than `limit` ones) and lies wholly in the buffer,
  // read in one step; false (nothing consumed) otherwise, for the general path to handle.
  SPARSESYNC_ALWAYS_INLINE bool try_get_rice(unsigned k, unsigned limit, std::uint64_t& v) {
    refill();
    const auto q = static_cast<unsigned>(std::countr_one(acc_));
    if (q >= limit || q + 1 + k > fill_) return false;
    v = (std::uint64_t{q} << k) | ((acc_ >> (q + 1)) & ((std::uint64_t{1} << k) - 1));
    consume(q + 1 + k);
    return true;
  }

  [[nodiscard]] bool failed() const { return failed_; }
  // True when every remaining bit is zero padding inside the final byte.
  [[nodiscard]] bool at_padded_end() {
    refill();
    return p_ == end_ && fill_ < 8 && acc_ == 0;
  }

 private:
  void consume(unsigned n) {
    acc_ = n >= 64 ? 0 : acc_ >> n;
    fill_ -= n;
  }
  SPARSESYNC_ALWAYS_INLINE void refill() {
    if (fill_ > 56) return;
    if (end_ - p_ >= 8) {
      // One 8-byte load instead of a loop: take the whole bytes that fit (as the loop below would). Bits of
      // the next byte may land above fill_; they are that byte's own bits, so loading it again ORs the same.
      acc_ |= load_le<std::uint64_t>(p_) << fill_;
      const unsigned take = (64 - fill_) / 8;
      p_ += take;
      fill_ += 8 * take;
      return;
    }
    while (fill_ <= 56 && p_ != end_) {
      acc_ |= static_cast<std::uint64_t>(*p_++) << fill_;
      fill_ += 8;
    }
  }

  const unsigned char* p_;
  const unsigned char* end_;
  std::uint64_t acc_ = 0;
  unsigned fill_ = 0;
  bool failed_ = false;
};

}  // namespace detail
SPARSESYNC_NS_END
