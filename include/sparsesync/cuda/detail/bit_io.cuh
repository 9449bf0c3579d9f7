// Sequential bit I/O for one chunk's data, run by one thread (the chunk-level kernels give each thread a chunk).
//
// chunk_writer: LSB-first bit stream (FORMAT.md: stream bit i is bit i % 8 of byte i / 8), emitted in 64-bit
// words. Each word is fed to the chunk's XXH64 (seed = chunk index, entry word first) and stored with aligned
// 8-byte stores whatever the alignment of the chunk's first byte: bytes shared with a neighbouring chunk's
// aligned word are written one by one, so two threads never store to the same word. A writer never writes
// outside [dst, dst + cap): a stream that would run past `cap` only clears ok().
//
// bit_reader: reads a byte range with aligned 16-byte loads and one block of lookahead, never loading a byte
// outside the allocation bounds it is given (compute-sanitizer memcheck checks exact allocation sizes).
// Reading past the end sets a sticky failure flag, as the host reader does.
#pragma once

#include <sparsesync/cuda/detail/xxh64.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

template <bool Store, bool Hash>
class chunk_writer {
 public:
  SPARSESYNC_DEVICE chunk_writer(unsigned char* dst, std::uint64_t cap, std::uint64_t seed, std::uint64_t entry_word)
      : dst_(dst), cap_(cap), hash_(seed) {
    a_ = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(dst) & 7u);
    if constexpr (Hash) hash_.update_word(entry_word);
  }

  // Appends the low n bits of v (n <= 32; higher bits of v must be zero).
  SPARSESYNC_DEVICE void put(std::uint64_t v, unsigned n) {
    acc_ |= v << fill_;
    fill_ += n;
    if (fill_ >= 64) {
      emit(acc_);
      fill_ -= 64;
      acc_ = fill_ ? (v >> (n - fill_)) : 0;
    }
  }
  SPARSESYNC_DEVICE void put_byte(unsigned b) { put(b, 8); }
  SPARSESYNC_DEVICE void put_ones(unsigned n) { put((std::uint64_t{1} << n) - 1, n); }  // n <= 32

  SPARSESYNC_DEVICE void put_varint(std::uint64_t v) {
    while (v >= 0x80) {
      put_byte(static_cast<unsigned>(v & 0x7F) | 0x80u);
      v >>= 7;
    }
    put_byte(static_cast<unsigned>(v));
  }

  // Pads to a whole byte and writes what is left. Returns true when exactly `cap` bytes were produced.
  SPARSESYNC_DEVICE bool finish() {
    const unsigned tail = (fill_ + 7) / 8;
    const std::uint64_t base = 8 * words_;
    if constexpr (Store) {
      if (a_ != 0 && words_ > 0) {
        for (unsigned i = 0; i < a_; ++i) store_byte(base - a_ + i, static_cast<unsigned char>(carry_ >> (8 * i)));
      }
      for (unsigned j = 0; j < tail; ++j) store_byte(base + j, static_cast<unsigned char>(acc_ >> (8 * j)));
    }
    if constexpr (Hash) hash_.update_bytes(acc_, tail);
    total_ = base + tail;
    return ok_ && (!Store || total_ == cap_);
  }

  [[nodiscard]] SPARSESYNC_DEVICE std::uint64_t bytes() const { return total_; }
  [[nodiscard]] SPARSESYNC_DEVICE std::uint64_t bits() const { return 64 * words_ + fill_; }
  [[nodiscard]] SPARSESYNC_DEVICE std::uint64_t digest() const { return hash_.digest(); }

 private:
  SPARSESYNC_DEVICE void store_byte(std::uint64_t at, unsigned char b) {
    if (at < cap_)
      dst_[at] = b;
    else
      ok_ = false;
  }

  SPARSESYNC_DEVICE void emit(std::uint64_t w) {
    if constexpr (Hash) hash_.update_word(w);
    if constexpr (Store) {
      const std::uint64_t k = words_;
      if (8 * k + 8 > cap_) {
        ok_ = false;
      } else if (a_ == 0) {
        *reinterpret_cast<std::uint64_t*>(dst_ + 8 * k) = w;
      } else if (k == 0) {
        for (unsigned i = 0; i < 8 - a_; ++i) dst_[i] = static_cast<unsigned char>(w >> (8 * i));
        carry_ = w >> (8 * (8 - a_));
      } else {
        *reinterpret_cast<std::uint64_t*>(dst_ - a_ + 8 * k) = carry_ | (w << (8 * a_));
        carry_ = w >> (8 * (8 - a_));
      }
    }
    ++words_;
  }

  unsigned char* dst_;
  std::uint64_t cap_;
  xxh64_state hash_;
  std::uint64_t acc_ = 0;
  std::uint64_t carry_ = 0;
  std::uint64_t words_ = 0;
  std::uint64_t total_ = 0;
  unsigned fill_ = 0;
  unsigned a_ = 0;
  bool ok_ = true;
};

// Reads [begin, end) with aligned 16-byte loads and one block of lookahead (the next block's load is issued
// when the current one starts being consumed), so a thread walking its chunk stalls once per 16 bytes at
// most. Whole blocks are loaded only inside [align_down16(lo), hi): `lo`/`hi` bound the allocation that holds
// the range (e.g. a whole frame; allocations start 16-byte aligned), and bytes outside [begin, end) are never
// interpreted. Blocks that straddle `hi` are read byte by byte.
class bit_reader {
 public:
  SPARSESYNC_DEVICE bit_reader(const unsigned char* begin, const unsigned char* end, const unsigned char* lo = nullptr,
                               const unsigned char* hi = nullptr)
      : begin_(begin), p_(begin), end_(end),
        lo_(reinterpret_cast<const unsigned char*>(reinterpret_cast<std::uintptr_t>(lo ? lo : begin) & ~std::uintptr_t{15})),
        hi_(hi ? hi : end) {}

  // Reads n <= 32 bits.
  SPARSESYNC_DEVICE std::uint32_t get(unsigned n) {
    refill();
    if (fill_ < n) {
      failed_ = true;
      return 0;
    }
    const std::uint32_t v = static_cast<std::uint32_t>(acc_ & ((std::uint64_t{1} << n) - 1));
    consume(n);
    return v;
  }

  // Leading one bits up to `limit` (<= 32); below the limit the terminating zero is consumed too.
  SPARSESYNC_DEVICE unsigned get_unary(unsigned limit) {
    unsigned q = 0;
    for (;;) {
      refill();
      if (fill_ == 0) {
        failed_ = true;
        return q;
      }
      const std::uint64_t inv = ~acc_;
      unsigned ones = inv == 0 ? 64u : static_cast<unsigned>(__ffsll(static_cast<long long>(inv)) - 1);
      if (ones > fill_) ones = fill_;
      if (ones >= limit - q) {
        consume(limit - q);
        return limit;
      }
      consume(ones);
      q += ones;
      if (fill_ > 0) {
        consume(1);
        return q;
      }
    }
  }

  // A Rice code (parameter k <= 32) whose unary part is below `escape` and whose terminating zero and k low bits
  // are buffered: decoded in one step, exactly as get_unary(escape) then get(k) would (true). Otherwise, or after
  // a failure, nothing is consumed (false) and the caller takes that general path.
  SPARSESYNC_DEVICE bool try_rice(unsigned k, unsigned escape, std::uint64_t& v) {
    refill();
    if (failed_ || acc_ == ~std::uint64_t{0}) return false;
    const unsigned q = static_cast<unsigned>(__ffsll(static_cast<long long>(~acc_)) - 1);
    if (q >= escape || q + 1 + k > fill_) return false;
    v = (std::uint64_t{q} << k) | ((acc_ >> (q + 1)) & ((std::uint64_t{1} << k) - 1));
    consume(q + 1 + k);
    return true;
  }

  [[nodiscard]] SPARSESYNC_DEVICE bool failed() const { return failed_; }
  // Every byte consumed.
  [[nodiscard]] SPARSESYNC_DEVICE bool at_end() {
    refill();
    return p_ == end_ && fill_ == 0;
  }
  // Only zero padding inside the final byte is left.
  [[nodiscard]] SPARSESYNC_DEVICE bool at_padded_end() {
    refill();
    return p_ == end_ && fill_ < 8 && acc_ == 0;
  }
  // Bits consumed since `begin`.
  [[nodiscard]] SPARSESYNC_DEVICE std::uint64_t position_bits() const {
    return 8 * static_cast<std::uint64_t>(p_ - begin_) - fill_;
  }

 private:
  SPARSESYNC_DEVICE void consume(unsigned n) {
    acc_ = n >= 64 ? 0 : acc_ >> n;
    fill_ -= n;
  }

  // A block that is not wholly inside the allocation bounds: byte by byte (only at a range's edges). Out of
  // line and taking values, so that the reader itself stays in registers.
  static __device__ __noinline__ uint4 load_partial_block(const unsigned char* b, const unsigned char* begin, const unsigned char* end) {
    std::uint32_t w0 = 0, w1 = 0, w2 = 0, w3 = 0;
#pragma unroll 1
    for (int i = 0; i < 16; ++i) {
      if (b + i < begin || b + i >= end) continue;
      const std::uint32_t v = static_cast<std::uint32_t>(b[i]) << (8 * (i % 4));
      if (i < 4) w0 |= v;
      else if (i < 8) w1 |= v;
      else if (i < 12) w2 |= v;
      else w3 |= v;
    }
    return make_uint4(w0, w1, w2, w3);
  }

  SPARSESYNC_DEVICE uint4 load_block(const unsigned char* b) const {
    if (b >= lo_ && b + 16 <= hi_) return *reinterpret_cast<const uint4*>(b);
    return load_partial_block(b, begin_, end_);
  }

  SPARSESYNC_DEVICE void next_block() {
    const auto* base = reinterpret_cast<const unsigned char*>(reinterpret_cast<std::uintptr_t>(p_) & ~std::uintptr_t{15});
    cur_ = base == next_base_ ? next_ : load_block(base);
    cur_base_ = base;
    next_base_ = base + 16 < end_ ? base + 16 : nullptr;
    if (next_base_) next_ = load_block(next_base_);  // issued now, used a block later
  }

  SPARSESYNC_DEVICE void refill() {
    while (fill_ <= 56 && p_ != end_) {
      if (cur_base_ == nullptr || p_ >= cur_base_ + 16) next_block();
      const unsigned off = static_cast<unsigned>(p_ - cur_base_);
      unsigned take = 16 - off;
      const auto left = static_cast<std::uint64_t>(end_ - p_);
      if (left < take) take = static_cast<unsigned>(left);
      const unsigned room = (64 - fill_) / 8;
      if (room < take) take = room;
      const std::uint64_t lo64 = cur_.x | (static_cast<std::uint64_t>(cur_.y) << 32);
      const std::uint64_t hi64 = cur_.z | (static_cast<std::uint64_t>(cur_.w) << 32);
      std::uint64_t v = off == 0 ? lo64 : off < 8 ? (lo64 >> (8 * off)) | (hi64 << (64 - 8 * off)) : hi64 >> (8 * (off - 8));
      if (take < 8) v &= (std::uint64_t{1} << (8 * take)) - 1;
      acc_ |= v << fill_;
      fill_ += 8 * take;
      p_ += take;
    }
  }

  const unsigned char* begin_;
  const unsigned char* p_;
  const unsigned char* end_;
  const unsigned char* lo_;
  const unsigned char* hi_;
  const unsigned char* cur_base_ = nullptr;
  const unsigned char* next_base_ = nullptr;
  uint4 cur_{0, 0, 0, 0};
  uint4 next_{0, 0, 0, 0};
  std::uint64_t acc_ = 0;
  unsigned fill_ = 0;
  bool failed_ = false;
};

enum class varint_status : unsigned { ok, truncated, overlong, overflow };

// LEB128 with the host decoder's rules (codec/varint.hpp): canonical, fitting `max_bits`.
SPARSESYNC_DEVICE varint_status read_varint(bit_reader& r, unsigned max_bits, std::uint64_t& value) {
  std::uint64_t v = 0;
  unsigned shift = 0;
  for (;;) {
    const unsigned b = r.get(8);
    if (r.failed()) return varint_status::truncated;
    const std::uint64_t group = b & 0x7Fu;
    if (shift >= max_bits || (shift > 0 && max_bits - shift < 7 && (group >> (max_bits - shift)) != 0)) return varint_status::overflow;
    v |= group << shift;
    if (!(b & 0x80u)) {
      if (group == 0 && shift > 0) return varint_status::overlong;
      break;
    }
    shift += 7;
  }
  value = v;
  return varint_status::ok;
}

// XXH64(seed, entry_word || bytes[0, n)) of device bytes: the per-chunk share of a payload checksum.
// [lo, hi) bounds the allocation around the bytes (see bit_reader).
SPARSESYNC_DEVICE std::uint64_t hash_chunk(std::uint64_t seed, std::uint64_t entry_word, const unsigned char* p, std::uint64_t n,
                                           const unsigned char* lo = nullptr, const unsigned char* hi = nullptr) {
  xxh64_state h(seed);
  h.update_word(entry_word);
  bit_reader r(p, p + n, lo, hi);
  std::uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t lo = r.get(32);
    const std::uint64_t hi = r.get(32);
    h.update_word(lo | (hi << 32));
  }
  for (; i < n; ++i) h.update_byte(static_cast<unsigned char>(r.get(8)));
  return h.digest();
}

// Reads a bit range of a copy held in shared memory as 32-bit words (the stream's bits LSB-first, as bit_reader
// sees them): the next 64 bits at any position are three word loads and two funnel shifts, where bit_reader's
// refill works through its 16-byte blocks byte by byte, on the critical path of a thread that decodes one code
// after the other. Same values, consumption and failures as bit_reader for get, get_unary and try_rice; bits past
// `end_bit` read as absent. `words` holds word_count words; begin_bit <= end_bit <= 32 * word_count.
class word_bit_reader {
 public:
  SPARSESYNC_DEVICE word_bit_reader(const std::uint32_t* words, std::uint32_t word_count, std::uint32_t begin_bit, std::uint32_t end_bit)
      : w_(words), count_(word_count), begin_(begin_bit), pos_(begin_bit), end_(end_bit) {}

  // Reads n <= 32 bits.
  SPARSESYNC_DEVICE std::uint32_t get(unsigned n) {
    if (end_ - pos_ < n) {
      failed_ = true;
      return 0;
    }
    const std::uint32_t v = static_cast<std::uint32_t>(peek() & ((std::uint64_t{1} << n) - 1));
    pos_ += n;
    return v;
  }
  // Leading one bits up to `limit` (<= 32); below the limit the terminating zero is consumed too.
  SPARSESYNC_DEVICE unsigned get_unary(unsigned limit) {
    const std::uint64_t inv = ~peek();  // (past the end: zeros, so `ones` stops there)
    const unsigned ones = inv == 0 ? 64u : static_cast<unsigned>(__ffsll(static_cast<long long>(inv)) - 1);
    if (ones >= limit) {
      pos_ += limit;
      return limit;
    }
    if (ones < end_ - pos_) {
      pos_ += ones + 1;
      return ones;
    }
    pos_ += ones;  // the bits ran out inside the unary part
    failed_ = true;
    return ones;
  }
  // A Rice code as bit_reader::try_rice: decoded in one step where its unary part is below `escape` and the whole
  // code is there (true); otherwise nothing is consumed (false).
  SPARSESYNC_DEVICE bool try_rice(unsigned k, unsigned escape, std::uint64_t& v) {
    if (failed_) return false;
    const std::uint64_t a = peek();
    if (a == ~std::uint64_t{0}) return false;
    const unsigned q = static_cast<unsigned>(__ffsll(static_cast<long long>(~a)) - 1);
    if (q >= escape || q + 1 + k > end_ - pos_) return false;
    v = (std::uint64_t{q} << k) | ((a >> (q + 1)) & ((std::uint64_t{1} << k) - 1));
    pos_ += q + 1 + k;
    return true;
  }
  [[nodiscard]] SPARSESYNC_DEVICE bool failed() const { return failed_; }
  // Bits consumed since `begin_bit`.
  [[nodiscard]] SPARSESYNC_DEVICE std::uint64_t position_bits() const { return pos_ - begin_; }

 private:
  // The 64 bits from pos_, zero past end_.
  SPARSESYNC_DEVICE std::uint64_t peek() const {
    const std::uint32_t i = pos_ >> 5, sh = pos_ & 31u;
    const std::uint32_t a = i < count_ ? w_[i] : 0u, b = i + 1 < count_ ? w_[i + 1] : 0u, c = i + 2 < count_ ? w_[i + 2] : 0u;
    std::uint64_t v = __funnelshift_r(a, b, sh) | (static_cast<std::uint64_t>(__funnelshift_r(b, c, sh)) << 32);
    const std::uint32_t left = end_ - pos_;
    if (left < 64) v &= (std::uint64_t{1} << left) - 1;
    return v;
  }
  const std::uint32_t* w_;
  std::uint32_t count_, begin_, pos_, end_;
  bool failed_ = false;
};

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
