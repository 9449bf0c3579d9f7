// sparsesync._core: the codec of the header-only library for Python (diff, apply, inspect, checksum, layouts).
// The public names and their documentation live in the pure-Python package above it (python/sparsesync/).
// Arrays are borrowed, never copied (views.hpp); the GIL is released while the library works.
#include "byte_buffer.hpp"
#include "changes.hpp"
#include "diff_options.hpp"
#include "gpu.hpp"
#include "nccl.hpp"
#include "ucx.hpp"
#include "net.hpp"
#include "summary.hpp"
#include "views.hpp"

#include <sparsesync/sparsesync.hpp>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>

namespace nb = nanobind;
using namespace sparsesync;
using namespace sparsesync::python;

namespace {

using entry = std::tuple<std::string, std::string, std::vector<std::uint64_t>>;

model_layout make_layout(const std::vector<entry>& entries) {
  std::vector<tensor_info> tensors;
  tensors.reserve(entries.size());
  for (const auto& [name, dt, shape] : entries) {
    const auto t = parse_dtype(dt);
    if (!t) throw error(errc::invalid_argument, "tensor '" + name + "': unknown dtype '" + dt + "' (bf16, f16, f32, f8_e4m3 or f8_e5m2)");
    if (shape.size() > max_tensor_rank) throw error(errc::invalid_argument, "tensor '" + name + "': rank above " + std::to_string(max_tensor_rank));
    tensors.push_back({name, *t, shape});
  }
  model_layout layout(std::move(tensors));
  for (std::size_t i = 0; i < layout.size(); ++i)
    if (layout.find(layout[i].name) != i) throw error(errc::invalid_argument, "tensor name '" + layout[i].name + "' appears twice");
  return layout;
}

std::vector<entry> entries_of(const model_layout& layout) {
  std::vector<entry> out;
  for (const auto& t : layout.tensors()) out.emplace_back(t.name, std::string(to_string(t.dtype)), t.shape);
  return out;
}

// Calls f.template operator()<Sel>() for an encoder name of encoder_table (or an alias), or "auto".
template <class F>
void with_selection(const std::string& name, F&& f) {
  const auto id = named_encoder(name);
  if (!id) return f.template operator()<auto_encoder>();
  visit_encoder(*id, [&]<class E>(E) { f.template operator()<E>(); });
}

nb::bytes diff(const model_layout& layout, nb::handle base, nb::handle target, const std::string& encoder, const std::string& values,
               std::uint64_t base_version, std::uint64_t target_version, std::uint64_t bucket_bytes, unsigned chunk_log2, double link_gbps,
               const std::string& receivers) {
  patch_options opt = diff_options(values, base_version, target_version, bucket_bytes, chunk_log2);
  opt.encode.link = link_options(link_gbps, receivers);
  auto next = views_of<false>(layout, target, "new");
  std::optional<held_views<false>> old;
  std::vector<const_tensor_view> zero(layout.size());  // null data: the all-zero model (a full transfer)
  for (std::size_t i = 0; i < layout.size(); ++i) zero[i] = {nullptr, layout[i].numel(), layout[i].dtype};
  if (!base.is_none()) old = views_of<false>(layout, base, "base");
  std::vector<unsigned char> out;
  {
    nb::gil_scoped_release unlocked;
    with_selection(encoder, [&]<class Sel>() {
      out = encode_patch<Sel>(layout, old ? std::span<const const_tensor_view>(old->views) : zero, next.views, opt, fixed_bytes{bucket_bytes});
    });
  }
  return nb::bytes(reinterpret_cast<const char*>(out.data()), out.size());
}

nb::dict apply(const model_layout& layout, nb::handle patch, nb::handle tensors, std::optional<std::uint64_t> known_base_checksum) {
  const byte_buffer buf(patch);
  auto model = views_of<true>(layout, tensors, "tensors");
  apply_options opt;
  opt.known_base_checksum = known_base_checksum;
  apply_report r;
  status st;
  {
    nb::gil_scoped_release unlocked;
    st = try_apply_patch(buf.bytes(), layout, model.views, opt, &r);
  }
  throw_if_error(st);
  nb::dict d;
  d["buckets"] = r.buckets;
  d["numel"] = r.numel;
  d["changed"] = r.changed;
  d["base_checksum"] = r.base_checksum;
  d["target_checksum"] = r.target_checksum;
  d["base_version"] = r.base_version;
  d["target_version"] = r.target_version;
  return d;
}

nb::dict inspect(nb::handle patch) {
  const byte_buffer buf(patch);
  patch_summary p;
  status st;
  {
    nb::gil_scoped_release unlocked;
    st = summarize(buf.bytes(), p);
  }
  throw_if_error(st);
  const auto& h = p.header;
  nb::dict d;
  d["numel"] = h.numel;
  d["changed"] = p.changed;
  d["payload_bytes"] = p.payload_bytes;
  d["dense_bytes"] = p.dense_bytes;
  d["data_bytes"] = p.data_bytes;
  d["density"] = h.numel ? static_cast<double>(p.changed) / static_cast<double>(h.numel) : 0.0;
  d["bits_per_changed"] = p.changed ? nb::cast(8.0 * static_cast<double>(p.payload_bytes) / static_cast<double>(p.changed)) : nb::none();
  d["ratio_vs_dense"] = p.payload_bytes ? static_cast<double>(p.dense_bytes) / static_cast<double>(p.payload_bytes) : 0.0;
  d["bucket_count"] = h.bucket_count;
  d["base_version"] = h.base_version;
  d["target_version"] = h.target_version;
  d["layout_hash"] = h.layout_hash;
  d["base_checksum"] = h.base_checksum;
  d["target_checksum"] = h.target_checksum;
  d["from_zero"] = (h.flags & flag_from_zero) != 0;
  d["metadata_bytes"] = h.metadata_bytes;
  nb::dict enc;
  for (const auto& [name, n] : p.encoders) enc[name.c_str()] = n;
  d["encoders"] = enc;
  d["value_modes"] = std::vector<std::string>(p.value_modes.begin(), p.value_modes.end());
  d["tensors"] = p.layout ? nb::cast(entries_of(*p.layout)) : nb::none();
  return d;
}

std::uint64_t checksum(const model_layout& layout, nb::handle tensors) {
  const auto model = views_of<false>(layout, tensors, "tensors");
  nb::gil_scoped_release unlocked;
  return model_checksum(layout, model.views);
}

// Raises the Python class of the error's code, looked up in the pure-Python module that defines them.
void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const sparsesync::error& e) {
    nb::object cls = nb::module_::import_("sparsesync._errors").attr("_class_for_code")(static_cast<int>(e.code()));
    PyErr_SetString(cls.ptr(), e.what());
  }
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "sparsesync's native codec; use the `sparsesync` package, which documents every name.";
  nb::register_exception_translator(translate);
  bind_changes(m);

  nb::class_<model_layout>(m, "Layout")
      .def("__init__", [](model_layout* self, const std::vector<entry>& entries) { new (self) model_layout(make_layout(entries)); },
           nb::arg("entries"))
      .def_prop_ro("hash", &model_layout::hash)
      .def_prop_ro("numel", &model_layout::numel)
      .def_prop_ro("nbytes", &model_layout::bytes)
      .def("__len__", &model_layout::size)
      .def("entries", &entries_of)
      .def("serialize", [](const model_layout& l) {
        const auto b = l.serialize();
        return nb::bytes(reinterpret_cast<const char*>(b.data()), b.size());
      });

  m.def("diff", &diff, nb::arg("layout"), nb::arg("base").none(), nb::arg("new"), nb::arg("encoder"), nb::arg("values"),
        nb::arg("base_version"), nb::arg("target_version"), nb::arg("bucket_bytes"), nb::arg("chunk_log2"), nb::arg("link_gbps"),
        nb::arg("receivers"));
  m.def("apply", &apply, nb::arg("layout"), nb::arg("patch"), nb::arg("tensors"), nb::arg("known_base_checksum").none());
  m.def("inspect", &inspect, nb::arg("patch"));
  m.def("checksum", &checksum, nb::arg("layout"), nb::arg("tensors"));

  std::vector<std::string> encoders;
  for (const auto& r : encoder_table) encoders.emplace_back(r.name);
  m.attr("encoders") = encoders;
  std::vector<std::tuple<int, std::string>> codes;
  for (int c = 1; to_string(static_cast<errc>(c)) != "unknown error"; ++c)
    codes.emplace_back(c, std::string(to_string(static_cast<errc>(c))));
  m.attr("error_codes") = codes;
  m.attr("default_bucket_bytes") = fixed_bytes::default_bytes;
  m.attr("default_chunk_log2") = default_log2_chunk;
  m.attr("format_version") = format_version;
#ifdef SPARSESYNC_PYTHON_TCP
  bind_net(m);
#else
  m.attr("has_tcp") = false;
#endif
#ifdef SPARSESYNC_PYTHON_CUDA
  bind_gpu(m);
#else
  m.attr("has_cuda") = false;
#endif
#ifdef SPARSESYNC_PYTHON_NCCL
  bind_nccl(m);
#else
  m.attr("has_nccl") = false;
#endif
#ifdef SPARSESYNC_PYTHON_UCX
  bind_ucx(m);
#else
  m.attr("has_ucx") = false;
#endif
}
