// One chunk's data, encoded and decoded by one device thread: the device twins of codec/raw_index32.hpp,
// bitmap.hpp, delta_varint.hpp, rice.hpp and values.hpp (entropy.hpp's twin, which reads the chunk's base, is in
// entropy_codec.cuh and builds on these). The host codecs are the specification; these functions produce the
// same bytes and accept exactly the same byte strings (the GPU tests check both).
#pragma once

#include <sparsesync/codec/encoder.hpp>
#include <sparsesync/codec/encoder_table.hpp>
#include <sparsesync/codec/rice_params.hpp>
#include <sparsesync/codec/value_mode.hpp>
#include <sparsesync/core/dtype.hpp>
#include <sparsesync/core/error.hpp>
#include <sparsesync/cuda/detail/bit_io.cuh>

SPARSESYNC_NS_BEGIN
namespace cuda {
namespace detail {

// The device codec has the twins of encoder ids 1..device_encoder_count. A row added to encoder_table stops the
// build here and at every site that branches on the encoder id (each repeats the check with what to add
// there), so that no site sends a new id down another encoder's branch: chunk_data_size, encode_chunk and
// chunk_decoder (this file), warp_decode_chunk (warp_decode.cuh), the warp size and write kernels
// (encode_kernels.cuh), valid_config and warp_encoder (dispatch_encode.cuh), max_frame_bytes (encode.cuh), the
// decode kernels (apply_kernels.cuh). entropy (id 5) is coded by entropy_codec.cuh in kernels of its own.
inline constexpr std::uint8_t device_encoder_count = 5;
static_assert(device_encoder_count == max_gpu_encoder_id,
              "sparsesync: encoder_table (codec/encoder_table.hpp) gained a row: give it its device twin at every site listed above cuda::detail::device_encoder_count "
              "(cuda/detail/chunk_codec.cuh), then raise the count (or mark the row gpu = false: GPU code then refuses it)");

SPARSESYNC_HD unsigned varint_bytes(std::uint64_t v) {
  unsigned n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// What the size pass learns about a chunk and the write pass needs.
struct chunk_plan {
  std::uint32_t changes;
  std::uint32_t k_gap;  // rice parameters (0 for other encoders)
  std::uint32_t k_val;
  std::uint32_t values_at;  // warp-parallel writers: byte offset of the values section
};

// Size in bytes of a chunk's data. `for_each(f)` calls f(position, coded value) for the chunk's changes in order.
template <class W, class Src>
SPARSESYNC_DEVICE std::uint64_t chunk_data_size(encoder_id enc, value_mode mode, std::uint32_t numel, std::uint32_t n, Src& src,
                                                chunk_plan& plan) {
  // (entropy: entropy_chunk_size, which calls this for rice's size)
  static_assert(device_encoder_count == 5, "sparsesync: encoder_table (codec/encoder_table.hpp) gained a row: add its data size to chunk_data_size");
  constexpr unsigned wbits = 8 * sizeof(W);
  plan.changes = n;
  plan.k_gap = 0;
  plan.k_val = 0;
  if (n == 0) return 0;
  const std::uint64_t abs_values = std::uint64_t{n} * sizeof(W);
  if (enc == encoder_id::rice) {
    std::uint32_t gc[rice_params::max_gap_k + 1];
    std::uint32_t vc[wbits];
#pragma unroll
    for (unsigned k = 0; k <= rice_params::max_gap_k; ++k) gc[k] = 0;
#pragma unroll
    for (unsigned k = 0; k < wbits; ++k) vc[k] = 0;
    std::uint32_t next = 0;
    const bool ulp = mode == value_mode::ulp;
    src.for_each([&](std::uint32_t pos, W v) {
      const std::uint32_t g = pos - next;
      next = pos + 1;
#pragma unroll
      for (unsigned k = 0; k <= rice_params::max_gap_k; ++k) gc[k] += rice_params::code_bits(g, k, rice_params::gap_raw_bits);
      if (ulp) {
        const std::uint32_t c = static_cast<std::uint32_t>(zigzag<W>(v)) - 1u;
#pragma unroll
        for (unsigned k = 0; k < wbits; ++k) vc[k] += rice_params::code_bits(c, k, wbits);
      }
    });
    std::uint32_t best_g = gc[0], kg = 0;
#pragma unroll
    for (unsigned k = 1; k <= rice_params::max_gap_k; ++k)
      if (gc[k] < best_g) {
        best_g = gc[k];
        kg = k;
      }
    std::uint64_t vbits = std::uint64_t{n} * wbits;
    std::uint32_t kv = 0;
    if (ulp) {
      std::uint32_t best_v = vc[0];
#pragma unroll
      for (unsigned k = 1; k < wbits; ++k)
        if (vc[k] < best_v) {
          best_v = vc[k];
          kv = k;
        }
      vbits = best_v;
    }
    plan.k_gap = kg;
    plan.k_val = kv;
    return rice_params::data_bytes(std::uint64_t{best_g} + vbits);
  }
  std::uint64_t pos_bytes = 0, val_bytes = abs_values;
  const bool need_gaps = enc == encoder_id::delta_varint;
  const bool need_vals = mode == value_mode::ulp;
  if (need_gaps || need_vals) {
    std::uint32_t next = 0;
    std::uint64_t gb = 0, vb = 0;
    src.for_each([&](std::uint32_t pos, W v) {
      if (need_gaps) {
        gb += varint_bytes(pos - next);
        next = pos + 1;
      }
      if (need_vals) vb += varint_bytes(zigzag<W>(v));
    });
    if (need_gaps) pos_bytes = gb;
    if (need_vals) val_bytes = vb;
  }
  switch (enc) {
    case encoder_id::raw_index32: pos_bytes = 4ull * n; break;
    case encoder_id::bitmap: pos_bytes = (std::uint64_t{numel} + 7) / 8; break;
    default: break;
  }
  return pos_bytes + val_bytes;
}

template <class W, class Writer, class Src>
SPARSESYNC_DEVICE void put_values(Writer& w, value_mode mode, Src& src) {
  if (mode == value_mode::absolute) {
    src.for_each([&](std::uint32_t, W v) { w.put(v, 8 * sizeof(W)); });
  } else {
    src.for_each([&](std::uint32_t, W v) { w.put_varint(zigzag<W>(v)); });
  }
}

template <class Writer>
SPARSESYNC_DEVICE void rice_put(Writer& w, std::uint32_t v, unsigned k, unsigned raw_bits) {
  const std::uint32_t q = v >> k;
  if (q < rice_params::escape) {
    w.put((std::uint64_t{1} << q) - 1, q + 1);  // q ones, then the terminating zero
    if (k) w.put(v & ((std::uint64_t{1} << k) - 1), k);
  } else {
    w.put_ones(rice_params::escape);
    w.put(v, raw_bits);
  }
}

// Writes a chunk's data (n > 0) in the layout of FORMAT.md 3.4.
template <class W, class Writer, class Src>
SPARSESYNC_DEVICE void encode_chunk(encoder_id enc, value_mode mode, std::uint32_t numel, const chunk_plan& plan, Src& src, Writer& w) {
  static_assert(device_encoder_count == 5, "sparsesync: encoder_table (codec/encoder_table.hpp) gained a row: add its writer to encode_chunk");
  constexpr unsigned wbits = 8 * sizeof(W);
  switch (enc) {
    case encoder_id::raw_index32:
      src.for_each([&](std::uint32_t pos, W) { w.put(pos, 32); });
      put_values<W>(w, mode, src);
      break;
    case encoder_id::bitmap: {
      const std::uint64_t mask_bytes = (std::uint64_t{numel} + 7) / 8;
      std::uint64_t word = 0;  // index of the 64-bit mask word being assembled
      std::uint64_t bits = 0;
      auto emit = [&](std::uint64_t idx, std::uint64_t b) {
        const std::uint64_t left = mask_bytes - 8 * idx;
        const unsigned nbytes = left >= 8 ? 8u : static_cast<unsigned>(left);
        if (nbytes >= 4) {
          w.put(b & 0xFFFFFFFFull, 32);
          if (nbytes > 4) w.put((b >> 32) & ((std::uint64_t{1} << (8 * (nbytes - 4))) - 1), 8 * (nbytes - 4));
        } else {
          w.put(b & ((std::uint64_t{1} << (8 * nbytes)) - 1), 8 * nbytes);
        }
      };
      src.for_each([&](std::uint32_t pos, W) {
        const std::uint64_t m = pos >> 6;
        while (word < m) {
          emit(word++, bits);
          bits = 0;
        }
        bits |= std::uint64_t{1} << (pos & 63);
      });
      const std::uint64_t words = (mask_bytes + 7) / 8;
      while (word < words) {
        emit(word++, bits);
        bits = 0;
      }
      put_values<W>(w, mode, src);
      break;
    }
    case encoder_id::delta_varint: {
      std::uint32_t next = 0;
      src.for_each([&](std::uint32_t pos, W) {
        w.put_varint(pos - next);
        next = pos + 1;
      });
      put_values<W>(w, mode, src);
      break;
    }
    case encoder_id::rice: {
      w.put(plan.k_gap, 8);
      w.put(plan.k_val, 8);
      std::uint32_t next = 0;
      src.for_each([&](std::uint32_t pos, W) {
        rice_put(w, pos - next, plan.k_gap, rice_params::gap_raw_bits);
        next = pos + 1;
      });
      if (mode == value_mode::ulp) {
        src.for_each([&](std::uint32_t, W v) { rice_put(w, static_cast<std::uint32_t>(zigzag<W>(v)) - 1u, plan.k_val, wbits); });
      } else {
        src.for_each([&](std::uint32_t, W v) { w.put(v, wbits); });
      }
      break;
    }
    case encoder_id::entropy: break;  // entropy_chunk_write (entropy_codec.cuh), which needs the base
  }
}

// A chunk's changes as decoded into a staging list: chunk-relative positions and coded values (zero-extended
// to 32 bits). A source for chunk_data_size.
template <class W>
struct staged_changes {
  const std::uint32_t* pos;
  const std::uint32_t* val;
  std::uint32_t n;
  template <class F>
  SPARSESYNC_DEVICE void for_each(F&& f) const {
    for (std::uint32_t j = 0; j < n; ++j) f(pos[j], static_cast<W>(val[j]));
  }
};

// One change set, one encoding (FORMAT.md 3.4): a rice chunk's parameters (its data bytes 0 and 1) must be the
// ones the device encoder picks for its decoded changes, priced by that encoder's own chunk_data_size.
template <class W>
SPARSESYNC_DEVICE errc check_rice_parameters(value_mode mode, std::uint32_t numel, const unsigned char* data, const staged_changes<W>& changes) {
  chunk_plan fit;
  staged_changes<W> src = changes;
  chunk_data_size<W>(encoder_id::rice, mode, numel, changes.n, src, fit);
  return fit.k_gap == data[0] && fit.k_val == data[1] ? errc::ok : errc::non_canonical;
}

// Sequential decoder of one chunk's data with the host decoders' checks but one: whether rice's parameters
// are the encoder's choice needs every change, so the caller checks it on the decoded changes
// (check_rice_parameters). Call init(), then next() exactly `changes` times, then finish(); each returns
// errc::ok or the first error. Only the data's bytes are interpreted; whole 16-byte blocks are loaded only
// inside [lo, hi), the allocation holding it (e.g. the frame).
template <class W>
class chunk_decoder {
  // (entropy: entropy_decode_chunk, which reads the base and uses this class for its rice body)
  static_assert(device_encoder_count == 5, "sparsesync: encoder_table (codec/encoder_table.hpp) gained a row: add its decoder to chunk_decoder (init, next, finish, read_value)");

 public:
  SPARSESYNC_DEVICE chunk_decoder(encoder_id enc, value_mode mode, const unsigned char* data, std::uint32_t len,
                                  std::uint32_t numel, std::uint32_t changes, const unsigned char* lo = nullptr,
                                  const unsigned char* hi = nullptr)
      : enc_(enc), mode_(mode), data_(data), len_(len), numel_(numel), n_(changes), lo_(lo ? lo : data), hi_(hi ? hi : data + len),
        pr_(data, data + len, lo_, hi_), vr_(data, data, lo_, hi_) {}

  SPARSESYNC_DEVICE errc init() {
    if (n_ == 0) return len_ == 0 ? errc::ok : errc::malformed;
    const unsigned char* end = data_ + len_;
    switch (enc_) {
      case encoder_id::raw_index32: {
        if (len_ / 4 < n_) return errc::truncated;
        pr_ = bit_reader(data_, data_ + 4ull * n_, lo_, hi_);
        vr_ = bit_reader(data_ + 4ull * n_, end, lo_, hi_);
        return errc::ok;
      }
      case encoder_id::bitmap: {
        mask_bytes_ = (numel_ + 7) / 8;
        if (len_ < mask_bytes_) return errc::truncated;
        pr_ = bit_reader(data_, data_ + mask_bytes_, lo_, hi_);
        vr_ = bit_reader(data_ + mask_bytes_, end, lo_, hi_);
        return errc::ok;
      }
      case encoder_id::delta_varint: {
        if (len_ < n_) return errc::truncated;
        bit_reader scan(data_, end, lo_, hi_);
        std::uint64_t next = 0;
        for (std::uint32_t i = 0; i < n_; ++i) {
          std::uint64_t gap = 0;
          if (const errc e = read_gap_varint(scan, gap); e != errc::ok) return e;
          const std::uint64_t pos = next + gap;
          if (pos >= numel_) return errc::index_out_of_range;
          next = pos + 1;
        }
        const std::uint64_t g = scan.position_bits() / 8;
        vr_ = bit_reader(data_ + g, end, lo_, hi_);
        return errc::ok;
      }
      case encoder_id::rice: {
        if (len_ < 2 || (std::uint64_t{len_} - 2) * 8 < n_) return errc::truncated;
        k_gap_ = data_[0];
        k_val_ = data_[1];
        if (k_gap_ > rice_params::max_gap_k) return errc::malformed;
        if (mode_ == value_mode::absolute ? k_val_ != 0 : k_val_ >= 8 * sizeof(W)) return errc::malformed;
        bit_reader scan(data_ + 2, end, lo_, hi_);
        std::uint64_t next = 0;
        for (std::uint32_t i = 0; i < n_; ++i) {
          std::uint64_t gap = 0;
          if (const errc e = rice_get(scan, k_gap_, rice_params::gap_raw_bits, gap); e != errc::ok) return e;
          const std::uint64_t pos = next + gap;
          if (pos >= numel_) return errc::index_out_of_range;
          next = pos + 1;
        }
        const std::uint64_t bits = scan.position_bits();
        pr_ = bit_reader(data_ + 2, end, lo_, hi_);
        vr_ = bit_reader(data_ + 2 + bits / 8, end, lo_, hi_);
        if (bits % 8) vr_.get(static_cast<unsigned>(bits % 8));
        return errc::ok;
      }
      case encoder_id::entropy: return errc::unsupported;  // (entropy_decode_chunk)
    }
    return errc::malformed;
  }

  SPARSESYNC_DEVICE errc next(std::uint32_t& pos, W& coded) {
    std::uint64_t p = 0;
    switch (enc_) {
      case encoder_id::raw_index32: {
        p = pr_.get(32);
        if (pr_.failed()) return errc::truncated;
        if (p >= numel_) return errc::index_out_of_range;
        if (i_ > 0 && p < next_) return errc::malformed;
        break;
      }
      case encoder_id::bitmap: {
        while (bits_ == 0) {
          if (mask_at_ >= mask_bytes_) return errc::malformed;  // fewer set bits than changes
          if (const errc e = load_mask(); e != errc::ok) return e;
        }
        p = bit_base_ + static_cast<unsigned>(__ffs(static_cast<int>(bits_)) - 1);
        bits_ &= bits_ - 1;
        break;
      }
      case encoder_id::delta_varint: {
        std::uint64_t gap = 0;
        if (const errc e = read_gap_varint(pr_, gap); e != errc::ok) return e;
        p = next_ + gap;
        if (p >= numel_) return errc::index_out_of_range;
        break;
      }
      case encoder_id::rice: {
        std::uint64_t gap = 0;
        if (const errc e = rice_get(pr_, k_gap_, rice_params::gap_raw_bits, gap); e != errc::ok) return e;
        p = next_ + gap;
        if (p >= numel_) return errc::index_out_of_range;
        break;
      }
      case encoder_id::entropy: return errc::unsupported;  // (never: init refused it)
    }
    pos = static_cast<std::uint32_t>(p);
    next_ = p + 1;
    ++i_;
    return read_value(coded);
  }

  SPARSESYNC_DEVICE errc finish() {
    if (n_ == 0) return errc::ok;
    if (enc_ == encoder_id::bitmap) {
      if (bits_ != 0) return errc::malformed;  // more set bits than changes
      while (mask_at_ < mask_bytes_) {
        if (const errc e = load_mask(); e != errc::ok) return e;
        if (bits_ != 0) return errc::malformed;
      }
    }
    if (enc_ == encoder_id::rice) return vr_.at_padded_end() ? errc::ok : errc::malformed;
    return vr_.at_end() ? errc::ok : errc::malformed;
  }

 private:
  SPARSESYNC_DEVICE static errc read_gap_varint(bit_reader& r, std::uint64_t& gap) {
    switch (read_varint(r, 32, gap)) {
      case varint_status::ok: return errc::ok;
      case varint_status::truncated: return errc::truncated;
      case varint_status::overlong: return errc::non_canonical;
      case varint_status::overflow: return errc::index_out_of_range;
    }
    return errc::malformed;
  }

  SPARSESYNC_DEVICE static errc rice_get(bit_reader& r, unsigned k, unsigned raw_bits, std::uint64_t& v) {
    const unsigned q = r.get_unary(rice_params::escape);
    if (q < rice_params::escape) {
      v = (std::uint64_t{q} << k) | r.get(k);
      return r.failed() ? errc::truncated : errc::ok;
    }
    v = r.get(raw_bits);
    if (r.failed()) return errc::truncated;
    return (v >> k) >= rice_params::escape ? errc::ok : errc::non_canonical;
  }

  // Loads the next 1..4 mask bytes into bits_ (checking bits past the chunk's end).
  SPARSESYNC_DEVICE errc load_mask() {
    const std::uint32_t left = mask_bytes_ - mask_at_;
    const unsigned nb = left >= 4 ? 4u : left;
    bits_ = pr_.get(8 * nb);
    if (pr_.failed()) return errc::truncated;
    bit_base_ = 8 * mask_at_;
    mask_at_ += nb;
    const std::uint64_t span = 8ull * nb;
    if (numel_ - bit_base_ < span && (static_cast<std::uint64_t>(bits_) >> (numel_ - bit_base_)) != 0) return errc::index_out_of_range;
    return errc::ok;
  }

  SPARSESYNC_DEVICE errc read_value(W& coded) {
    constexpr unsigned wbits = 8 * sizeof(W);
    if (enc_ == encoder_id::rice) {
      if (mode_ == value_mode::absolute) {
        coded = static_cast<W>(vr_.get(wbits));
        return vr_.failed() ? errc::truncated : errc::ok;
      }
      std::uint64_t code = 0;
      if (const errc e = rice_get(vr_, k_val_, wbits, code); e != errc::ok) return e;
      if (code >= (std::uint64_t{1} << wbits) - 1) return errc::malformed;
      coded = unzigzag<W>(static_cast<W>(code + 1));
      return errc::ok;
    }
    if (mode_ == value_mode::absolute) {
      coded = static_cast<W>(vr_.get(wbits));
      return vr_.failed() ? errc::truncated : errc::ok;
    }
    std::uint64_t code = 0;
    switch (read_varint(vr_, wbits, code)) {
      case varint_status::ok: break;
      case varint_status::truncated: return errc::truncated;
      case varint_status::overlong: return errc::non_canonical;
      case varint_status::overflow: return errc::malformed;
    }
    if (code == 0) return errc::non_canonical;
    coded = unzigzag<W>(static_cast<W>(code));
    return errc::ok;
  }

  encoder_id enc_;
  value_mode mode_;
  const unsigned char* data_;
  std::uint32_t len_;
  std::uint32_t numel_;
  std::uint32_t n_;
  const unsigned char* lo_;
  const unsigned char* hi_;
  bit_reader pr_;
  bit_reader vr_;
  std::uint64_t next_ = 0;
  std::uint32_t i_ = 0;
  std::uint32_t mask_bytes_ = 0, mask_at_ = 0, bit_base_ = 0;
  std::uint32_t bits_ = 0;
  unsigned k_gap_ = 0, k_val_ = 0;
};

}  // namespace detail
}  // namespace cuda
SPARSESYNC_NS_END
