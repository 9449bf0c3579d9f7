// sparsesync._core's change decoder, for appliers that write changes somewhere other than the layout's own
// arrays (integrations/: a rollout worker's live parameters, reached through a recorded weight map).
//
// decode_changes validates a patch exactly as apply does before it reads a model (header and its checksum,
// layout hash, layout and metadata sections, every bucket's structure, tiling and payload checksum, every
// decoder's canonical form, the bucket checksums adding up to the header's) and returns each tensor's
// changes as flat offsets and coded values. What needs the old values (resolving `ulp` steps, rejecting
// no-op changes, the base and target content checksums) is the caller's: element_hash_delta and
// content_checksum compute the library's checksums over the values it gathers.
#include "byte_buffer.hpp"
#include "changes.hpp"

#include <sparsesync/sparsesync.hpp>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <string>
#include <vector>

namespace nb = nanobind;
using namespace sparsesync;

namespace {

// A numpy array that owns `v`'s storage (moved into a capsule: no copy).
template <class T>
nb::object to_numpy(std::vector<T>&& v) {
  auto* held = new std::vector<T>(std::move(v));
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(held->data(), {held->size()}, owner));
}

// One tensor's changes under one value mode, in increasing offset order.
struct tensor_changes {
  std::uint32_t tensor = 0;
  value_mode mode = value_mode::absolute;
  unsigned word_bytes = 0;
  std::vector<std::uint64_t> offsets;
  std::vector<unsigned char> values;  // little-endian words of word_bytes each (host order: x86/arm)
};

template <element_word W>
void append_word(std::vector<unsigned char>& out, W w) {
  const std::size_t at = out.size();
  out.resize(at + sizeof(W));
  std::memcpy(out.data() + at, &w, sizeof(W));
}

// The chunk's base elements from the caller (entropy-coded chunks read them): base_reader(tensor, offset,
// count) returns `count` words of the tensor starting at `offset`.
template <element_word W>
void read_base(nb::handle base_reader, const detail::bucket_run& r, std::vector<W>& out) {
  if (base_reader.is_none())
    throw error(errc::invalid_argument,
                "the patch has entropy-coded buckets, whose decoding reads the base values; pass base_reader "
                "(a worker that holds only a slice of the model cannot decode them: encode with another encoder)");
  nb::gil_scoped_acquire held;
  nb::object got = base_reader(r.tensor, r.tensor_offset, r.count);
  nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> a;
  if (!nb::try_cast(got, a, false) || a.itemsize() != sizeof(W) || a.size() != r.count)
    throw error(errc::invalid_argument, "base_reader must return a C-contiguous CPU array of " + std::to_string(r.count) + " words of " +
                                            std::to_string(sizeof(W)) + " bytes");
  const auto* p = static_cast<const W*>(a.data());
  out.insert(out.end(), p, p + r.count);
}

class change_decoder {
 public:
  change_decoder(const model_layout& layout, nb::handle base_reader) : layout_(layout), base_reader_(base_reader), tiling_(layout) {}

  status bucket(std::span<const unsigned char> frame, std::size_t& consumed) {
    bucket_view b;
    if (auto s = parse_bucket(frame, b); !s) return s;
    if (b.header.index != buckets_) return {errc::malformed, "header says index " + std::to_string(b.header.index)};
    if (auto s = tiling_.add(b); !s) return s;
    status result;
    const bool known = visit_encoder(b.header.encoder, [&]<class E>(E) {
      result = visit_word(b.header.dtype, [&]<class W>() { return decode<E, W>(b); });
    });
    if (!known) return {errc::malformed, "unknown encoder"};
    if (!result) return result;
    numel_ += b.header.numel;
    base_sum_ += b.header.base_checksum;
    target_sum_ += b.header.target_checksum;
    changed_ += b.header.changed;
    consumed = b.frame_bytes;
    ++buckets_;
    return {};
  }

  status finish(const patch_header& h) const {
    if (auto s = tiling_.finish(); !s) return s;
    if (buckets_ != h.bucket_count) return {errc::malformed, "bucket count differs from the header's"};
    if (numel_ != h.numel) return {errc::malformed, "buckets cover a different element count than the header's"};
    if (base_sum_ != h.base_checksum) return {errc::malformed, "bucket base checksums do not add up to the patch's"};
    if (target_sum_ != h.target_checksum) return {errc::malformed, "bucket target checksums do not add up to the patch's"};
    return {};
  }

  std::vector<tensor_changes> take() && { return std::move(out_); }
  [[nodiscard]] std::uint64_t changed() const { return changed_; }

 private:
  template <class E, element_word W>
  status decode(const bucket_view& b) {
    const auto& h = b.header;
    const auto starts = detail::segment_starts(b.segments);
    const std::uint64_t chunk = std::uint64_t{1} << h.log2_chunk;
    std::vector<std::uint32_t> positions;
    std::vector<W> values;
    for (std::uint32_t c = 0; c < h.chunk_count; ++c) {
      const auto& ce = b.chunks[c];
      const std::uint64_t first = std::uint64_t{c} * chunk;
      chunk_context<W> ctx;
      ctx.numel = static_cast<std::uint32_t>(std::min(chunk, h.numel - first));
      ctx.changes = ce.changes;
      ctx.mode = h.mode;
      std::vector<W> base;
      if constexpr (E::needs_base) {
        if (ce.changes != 0) {
          detail::for_each_run(layout_, b.segments, starts, first, ctx.numel, [&](const detail::bucket_run& r) { read_base<W>(base_reader_, r, base); });
          ctx.base = base;
        }
      }
      const auto data = b.data.subspan(b.chunk_offsets[c], ce.data_bytes);
      if (auto s = E::template decode<W>(data, ctx, positions, values); !s) return s.prefix("chunk " + std::to_string(c));
      if (positions.size() != ce.changes || values.size() != ce.changes)
        return {errc::malformed, "chunk " + std::to_string(c) + ": decoder returned the wrong change count"};
      std::size_t i = 0;
      detail::for_each_run(layout_, b.segments, starts, first, ctx.numel, [&](const detail::bucket_run& r) {
        const std::uint64_t run_first = r.bucket_first - first;
        if (i < positions.size() && positions[i] < run_first + r.count) {
          auto& t = slot(r.tensor, h.mode);
          for (; i < positions.size() && positions[i] < run_first + r.count; ++i) {
            t.offsets.push_back(r.tensor_offset + (positions[i] - run_first));
            append_word<W>(t.values, values[i]);
          }
        }
      });
    }
    return {};
  }

  // The list a change of `tensor` goes to: the last one while tensor and mode stay the same (buckets come in
  // layout order, so a tensor's changes arrive in increasing offset order).
  tensor_changes& slot(std::uint32_t tensor, value_mode mode) {
    if (out_.empty() || out_.back().tensor != tensor || out_.back().mode != mode)
      out_.push_back({tensor, mode, size_of(layout_[tensor].dtype), {}, {}});
    return out_.back();
  }

  const model_layout& layout_;
  nb::handle base_reader_;
  tiling_check tiling_;
  std::vector<tensor_changes> out_;
  std::uint32_t buckets_ = 0;
  std::uint64_t numel_ = 0, base_sum_ = 0, target_sum_ = 0, changed_ = 0;
};

template <element_word W>
nb::object words_to_numpy(std::vector<unsigned char>&& bytes) {
  std::vector<W> w(bytes.size() / sizeof(W));
  std::memcpy(w.data(), bytes.data(), bytes.size());
  return to_numpy(std::move(w));
}

nb::dict decode_changes(const model_layout& layout, nb::handle patch, nb::handle base_reader) {
  const sparsesync::python::byte_buffer buf(patch);
  const auto in = buf.bytes();
  patch_prologue pro;
  std::vector<tensor_changes> lists;
  std::uint64_t changed = 0;
  {
    // The GIL is taken back only by base_reader (entropy-coded buckets).
    nb::gil_scoped_release unlocked;
    throw_if_error(parse_patch_prologue(in, pro));
    if (pro.header.layout_hash != layout.hash())
      throw error(errc::layout_mismatch, "the patch was made for another model layout (names, dtypes or shapes differ)");
    change_decoder dec(layout, base_reader);
    std::size_t pos = pro.bytes;
    for (std::uint32_t b = 0; b < pro.header.bucket_count; ++b) {
      std::size_t used = 0;
      if (auto s = dec.bucket(in.subspan(pos), used); !s) throw_if_error(s.prefix("bucket " + std::to_string(b)));
      pos += used;
    }
    if (pos != in.size()) throw error(errc::malformed, "trailing bytes after the last bucket");
    throw_if_error(dec.finish(pro.header));
    changed = dec.changed();
    lists = std::move(dec).take();
  }
  nb::list out;
  for (auto& t : lists) {
    nb::object values;
    switch (t.word_bytes) {
      case 1: values = words_to_numpy<std::uint8_t>(std::move(t.values)); break;
      case 2: values = words_to_numpy<std::uint16_t>(std::move(t.values)); break;
      default: values = words_to_numpy<std::uint32_t>(std::move(t.values)); break;
    }
    out.append(nb::make_tuple(t.tensor, std::string(to_string(t.mode)), to_numpy(std::move(t.offsets)), values));
  }
  const auto& h = pro.header;
  nb::dict d;
  d["changes"] = out;
  d["changed"] = changed;
  d["numel"] = h.numel;
  d["from_zero"] = (h.flags & flag_from_zero) != 0;
  d["base_checksum"] = h.base_checksum;
  d["target_checksum"] = h.target_checksum;
  d["base_version"] = h.base_version;
  d["target_version"] = h.target_version;
  d["layout_hash"] = h.layout_hash;
  return d;
}

using u64_array = nb::ndarray<const std::uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using word_array = nb::ndarray<nb::ro, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <class F>
void with_words(const word_array& a, const char* what, F&& f) {
  switch (a.itemsize()) {
    case 1: return f(static_cast<const std::uint8_t*>(a.data()));
    case 2: return f(static_cast<const std::uint16_t*>(a.data()));
    case 4: return f(static_cast<const std::uint32_t*>(a.data()));
    default: throw error(errc::invalid_argument, std::string(what) + ": elements of 1, 2 or 4 bytes expected");
  }
}

// Sum over i of element_hash(flat[i], new[i]) - element_hash(flat[i], old[i]), modulo 2^64: how a set of
// changes moves a content checksum.
std::uint64_t element_hash_delta(const u64_array& flat, const word_array& old_bits, const word_array& new_bits) {
  if (old_bits.size() != flat.size() || new_bits.size() != flat.size() || old_bits.itemsize() != new_bits.itemsize())
    throw error(errc::invalid_argument, "element_hash_delta: flat, old and new must have one element each per change, old and new one width");
  std::uint64_t sum = 0;
  const std::uint64_t* f = flat.data();
  const std::size_t n = flat.size();
  nb::gil_scoped_release unlocked;
  with_words(old_bits, "old", [&](const auto* o) {
    using W = std::remove_cv_t<std::remove_pointer_t<decltype(o)>>;
    const W* w = static_cast<const W*>(new_bits.data());
    for (std::size_t i = 0; i < n; ++i) sum += element_hash(f[i], w[i]) - element_hash(f[i], o[i]);
  });
  return sum;
}

// The content checksum of consecutive elements whose flat model indices start at first_index.
std::uint64_t chunk_checksum(const word_array& bits, std::uint64_t first_index) {
  std::uint64_t sum = 0;
  nb::gil_scoped_release unlocked;
  with_words(bits, "bits", [&](const auto* p) { sum = content_checksum(p, bits.size(), first_index); });
  return sum;
}

}  // namespace

// Registered by module.cpp (one line there).
void bind_changes(nb::module_& m) {
  m.def("decode_changes", &decode_changes, nb::arg("layout"), nb::arg("patch"), nb::arg("base_reader").none() = nb::none());
  m.def("element_hash_delta", &element_hash_delta, nb::arg("flat"), nb::arg("old"), nb::arg("new"));
  m.def("chunk_checksum", &chunk_checksum, nb::arg("bits"), nb::arg("first_index"));
}
