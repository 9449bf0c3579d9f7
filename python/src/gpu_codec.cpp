// diff and apply on tensors in CUDA memory, through the engine's compiled GPU backends (sparsesync::cuda_engine):
// the same patches as the host codec, made and applied where the weights live. Both are ordered after the work
// queued on the caller's stream, and apply's writes before the caller's later work, by events (cuda_place).
#include "gpu.hpp"

#include "byte_buffer.hpp"
#include "cuda_place.hpp"
#include "diff_options.hpp"

#include <sparsesync/format/patch_reader.hpp>
#include <sparsesync/format/patch_writer.hpp>

namespace sparsesync::python {
namespace {

// The place gives diff and apply a stream of their own, ordered against the caller's; no frames travel.
using codec_place = cuda_place<host_frames<tcp_wire>>;

// Calls f.template operator()<E>() for an encoder with a GPU twin; "auto" is rice on the GPU (the device encoder
// encodes every bucket with one encoder: auto's per-bucket trial is the host codec's).
template <class F>
void with_gpu_encoder(const std::string& name, F&& f) {
  const encoder_id id = named_encoder(name).value_or(encoder_id::rice);
  if (!encoder_table_row(id).gpu)
    throw error(errc::invalid_argument, "encoder '" + name + "' has no GPU implementation: diff tensors on the host, or pick another encoder");
  visit_encoder(id, [&]<class E>(E) {
    if constexpr (encoder_table_row(E::id).gpu) f.template operator()<E>();
  });
}

nb::bytes cuda_diff(const model_layout& layout, nb::handle base, nb::handle target, const std::string& encoder, const std::string& values,
                    std::uint64_t base_version, std::uint64_t target_version, std::uint64_t bucket_bytes, unsigned chunk_log2, std::uintptr_t caller) {
  const patch_options po = diff_options(values, base_version, target_version, bucket_bytes, chunk_log2);
  const auto next = views_of<false, placement::cuda>(layout, target, "new");
  std::optional<held_views<false, placement::cuda>> old;
  if (!base.is_none()) old = views_of<false, placement::cuda>(layout, base, "base", next.device);
  std::vector<unsigned char> out;
  {
    nb::gil_scoped_release unlocked;
    place_options where;
    where.device = next.device;
    codec_place place(where, true);
    place.order_after(caller);
    device_guard on(place.device());
    const auto plans = fixed_bytes{bucket_bytes}.plan(layout, chunk_log2);
    with_gpu_encoder(encoder, [&]<class E>() {
      cuda::device_source_options so;
      so.stream = place.stream();
      auto backend = cuda::compiled_device_encoder_backend(so);
      backend->prepare(layout, plans, E::id, po.encode);
      // The backend encodes against a snapshot of its own: the base goes there first (its frames, a transfer from
      // zero, are not kept). This costs one model of GPU memory while diff runs; Publisher keeps it across versions.
      sync::frame_emitter discard;
      discard.host = [](std::span<const unsigned char>) {};
      if (old) backend->encode_version(old->views, discard);
      std::vector<unsigned char> frames;
      std::uint64_t base_sum = 0, target_sum = 0;
      sync::frame_emitter keep;
      keep.host = [&](std::span<const unsigned char> f) {
        bucket_header h;
        throw_if_error(sparsesync::detail::read_bucket_header(f, h));
        base_sum += h.base_checksum;
        target_sum += h.target_checksum;
        frames.insert(frames.end(), f.begin(), f.end());
      };
      backend->encode_version(next.views, keep);
      const auto layout_bytes = layout.serialize();  // as the host diff: every patch carries its layout
      patch_header h = sparsesync::detail::patch_header_for(layout, plans.size(), po, !old, layout_bytes.size());
      h.base_checksum = base_sum;
      h.target_checksum = target_sum;
      sparsesync::detail::write_patch_prologue(out, h, layout_bytes, po.metadata);
      out.insert(out.end(), frames.begin(), frames.end());
    });
  }
  return nb::bytes(reinterpret_cast<const char*>(out.data()), out.size());
}

nb::dict cuda_apply(const model_layout& layout, nb::handle patch, nb::handle tensors, std::optional<std::uint64_t> known_base_checksum,
                    std::uintptr_t caller) {
  const byte_buffer buf(patch);
  const auto model = views_of<true, placement::cuda>(layout, tensors, "tensors");
  patch_prologue pro;
  std::uint64_t changed = 0;
  {
    nb::gil_scoped_release unlocked;
    const auto bytes = buf.bytes();
    throw_if_error(parse_patch_prologue(bytes, pro));
    if (pro.header.layout_hash != layout.hash())
      throw error(errc::layout_mismatch, "the patch was made for another model layout (names, dtypes or shapes differ)");
    place_options where;
    where.device = model.device;
    codec_place place(where, false);
    place.order_after(caller);
    device_guard on(place.device());
    cuda::device_sink_options so;
    so.stream = place.stream();
    so.commit = cuda::frame_commit_mode::atomic;  // every bucket verified before the first write
    const auto sink = cuda::compiled_device_applier_backend(layout, model.views, so);
    const bool from_zero = pro.header.flags & flag_from_zero;
    sink->begin(from_zero, known_base_checksum);
    const auto refuse = [&](const status& s) {
      sink->abort();
      throw error(s);
    };
    std::size_t pos = pro.bytes;
    for (std::uint32_t b = 0; b < pro.header.bucket_count; ++b) {
      bucket_header h;
      const auto rest = bytes.subspan(pos);
      if (auto s = sparsesync::detail::read_bucket_header(rest, h); !s) refuse(s);
      if (h.total_bytes() > rest.size()) refuse({errc::truncated, "bucket " + std::to_string(b)});
      if (auto s = sink->add_bucket(rest.first(static_cast<std::size_t>(h.total_bytes()))); !s) refuse(s);
      pos += static_cast<std::size_t>(h.total_bytes());
    }
    if (pos != bytes.size()) refuse({errc::malformed, "trailing bytes after the last bucket"});
    if (auto s = sink->finish(pro.header); !s) refuse(s);
    sink->commit();
    changed = sink->changed();
    place.order_before(caller);
  }
  nb::dict d;
  d["buckets"] = pro.header.bucket_count;
  d["numel"] = pro.header.numel;
  d["changed"] = changed;
  d["base_checksum"] = pro.header.base_checksum;
  d["target_checksum"] = pro.header.target_checksum;
  d["base_version"] = pro.header.base_version;
  d["target_version"] = pro.header.target_version;
  return d;
}

}  // namespace

void bind_gpu_codec(nb::module_& m) {
  m.def("cuda_diff", &cuda_diff, nb::arg("layout"), nb::arg("base").none(), nb::arg("new"), nb::arg("encoder"), nb::arg("values"),
        nb::arg("base_version"), nb::arg("target_version"), nb::arg("bucket_bytes"), nb::arg("chunk_log2"), nb::arg("stream"));
  m.def("cuda_apply", &cuda_apply, nb::arg("layout"), nb::arg("patch"), nb::arg("tensors"), nb::arg("known_base_checksum").none(),
        nb::arg("stream"));
}

}  // namespace sparsesync::python
