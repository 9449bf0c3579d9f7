// sparsesync._core's GPU Publisher and Subscriber (endpoints.hpp over CUDA memory, cuda_place.hpp): the
// trainer's weights are encoded on its GPU against a snapshot the engine keeps (GPU or pinned host memory), the
// worker's are verified and written on its GPU; frames cross host memory and TCP.
#include "gpu.hpp"
#include "cuda_place.hpp"

namespace sparsesync::python {
namespace {

using tcp_frames = host_frames<tcp_wire>;

// The model checksum of weights on a GPU (the header's whole-model checksum, docs/FORMAT.md section 5), computed
// where they live, after the work queued on `caller`. A device sink's checksum() does exactly this; the sink
// only reads the weights for it.
std::uint64_t cuda_checksum(const model_layout& layout, nb::handle tensors, std::uintptr_t caller) {
  const auto w = views_of<false, placement::cuda>(layout, tensors, "tensors");
  std::vector<tensor_view> views;
  for (const auto& v : w.views) views.push_back({const_cast<void*>(v.data), v.numel, v.dtype});
  nb::gil_scoped_release unlocked;
  place_options where;
  where.device = w.device;
  cuda_place<tcp_frames> place(where, false);
  place.order_after(caller);
  device_guard on(place.device());
  cuda::device_sink_options so;
  so.stream = place.stream();
  return cuda::compiled_device_applier_backend(layout, views, so)->checksum();
}

}  // namespace

void register_cuda_errors() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const cuda::cuda_error& e) {
      nb::object cls = nb::module_::import_("sparsesync._errors").attr("CudaError");
      PyErr_SetString(cls.ptr(), e.what());
    }
  });
}

void bind_gpu(nb::module_& m) {
  m.attr("has_cuda") = true;
  m.attr("device_bucket_bytes") = sync::device_bucket_bytes;
  register_cuda_errors();
  m.def("cuda_device_count", [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
  });
  m.def("cuda_checksum", &cuda_checksum, nb::arg("layout"), nb::arg("tensors"), nb::arg("stream"));
  bind_gpu_codec(m);
  bind_endpoints<cuda_place<tcp_frames>>(m, "CudaPublisher", "CudaSubscriber");
}

}  // namespace sparsesync::python
