// Python arrays -> the library's tensor views, checked against a layout and never copied: whatever nanobind
// imports without conversion (the buffer protocol or DLPack: numpy, torch and cupy tensors, ...) is used in place.
// Host arrays for the codec and the host engine; CUDA arrays (all on one GPU) for the engine's GPU placement.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <sparsesync/core/layout.hpp>

#include <optional>
#include <string>
#include <vector>

namespace sparsesync::python {

namespace nb = nanobind;

// DLPack type codes, as numbers: older nanobind releases lack the names of the float8 ones.
enum : std::uint8_t { dl_int = 0, dl_uint = 1, dl_float = 2, dl_bfloat = 4, dl_f8_e4m3 = 8, dl_f8_e4m3fn = 10, dl_f8_e5m2 = 12 };

// Whether an array of DLPack type (code, bits) may hold tensor elements of type t. Integers of the element's
// width always may (the library's bit patterns); a float type only where it is that very format, so that a
// float16 array is never taken for bf16 bits.
inline bool holds(const nb::dlpack::dtype& d, dtype t) {
  if (d.lanes != 1 || d.bits != 8 * size_of(t)) return false;
  if (d.code == dl_int || d.code == dl_uint) return true;
  switch (t) {
    case dtype::bf16: return d.code == dl_bfloat;
    case dtype::f16:
    case dtype::f32: return d.code == dl_float;
    case dtype::f8_e4m3: return d.code == dl_f8_e4m3 || d.code == dl_f8_e4m3fn;
    case dtype::f8_e5m2: return d.code == dl_f8_e5m2;
  }
  return false;
}

inline std::string describe(const nb::dlpack::dtype& d) {
  const char* kind = d.code == dl_int ? "int" : d.code == dl_uint ? "uint" : d.code == dl_float ? "float" : d.code == dl_bfloat ? "bfloat"
                                                                                                                   : "dlpack-code-";
  std::string s = kind;
  if (d.code > dl_bfloat) s += std::to_string(d.code) + "-";
  return s + std::to_string(d.bits);
}

// Where the arrays of a call must live: host memory, or the memory of one CUDA device.
enum class placement { host, cuda };

template <bool Writable, placement P>
using array_t = std::conditional_t<
    P == placement::host, std::conditional_t<Writable, nb::ndarray<nb::device::cpu>, nb::ndarray<nb::ro, nb::device::cpu>>,
    std::conditional_t<Writable, nb::ndarray<nb::device::cuda>, nb::ndarray<nb::ro, nb::device::cuda>>>;

// Arrays held for the duration of a call (the references keep their memory alive with the GIL released) and
// the views into them. `device`: the CUDA device of a cuda placement's arrays.
template <bool Writable, placement P = placement::host>
struct held_views {
  std::vector<array_t<Writable, P>> arrays;
  std::vector<std::conditional_t<Writable, tensor_view, const_tensor_view>> views;
  int device = -1;
};

// Converts `seq` (a sequence of arrays in layout order) into views. `what` names the argument in errors.
// Every mismatch is an invalid_argument error naming the tensor. A cuda placement also takes `device`: the
// GPU every array must live on (-1: whichever the first array is on).
template <bool Writable, placement P = placement::host>
held_views<Writable, P> views_of(const model_layout& layout, nb::handle seq, const char* what, int device = -1) {
  const auto fail = [&](const std::string& m) { throw error(errc::invalid_argument, std::string(what) + ": " + m); };
  if (!PySequence_Check(seq.ptr())) fail("expected a sequence of arrays in layout order");
  const Py_ssize_t n = PySequence_Size(seq.ptr());
  if (n < 0) throw nb::python_error();
  if (static_cast<std::size_t>(n) != layout.size())
    fail(std::to_string(n) + " arrays given, the layout has " + std::to_string(layout.size()) + " tensors");
  held_views<Writable, P> out;
  out.device = device;
  out.arrays.reserve(layout.size());
  out.views.reserve(layout.size());
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const auto& t = layout[i];
    const std::string who = "tensor '" + t.name + "' (#" + std::to_string(i) + ")";
    nb::object item = nb::steal(PySequence_GetItem(seq.ptr(), static_cast<Py_ssize_t>(i)));
    if (!item.is_valid()) throw nb::python_error();
    array_t<Writable, P> a;
    // convert=false: an array that would need a copy (another device, a list) is refused, not silently copied.
    if (!nb::try_cast(item, a, false)) {
      array_t<false, P> readable;
      if (Writable && nb::try_cast(item, readable, false)) fail(who + ": the array is read-only; the library writes into it");
      if constexpr (P == placement::host)
        fail(who + ": not a CPU array (numpy array, CPU torch tensor or another buffer/DLPack object expected)");
      else
        fail(who + ": not a CUDA array (a torch or cupy tensor on a GPU, or another DLPack object in CUDA memory, expected)");
    }
    if constexpr (P == placement::cuda) {
      if (out.device < 0) out.device = static_cast<int>(a.device_id());
      if (static_cast<int>(a.device_id()) != out.device)
        fail(who + ": on cuda:" + std::to_string(a.device_id()) + ", but the others are on cuda:" + std::to_string(out.device) +
             " (one endpoint's tensors live on one GPU)");
    }
    if (!holds(a.dtype(), t.dtype))
      fail(who + ": element type " + describe(a.dtype()) + " cannot hold " + std::string(to_string(t.dtype)) +
           " bit patterns (use an unsigned integer array of the element's width)");
    bool same_shape = a.ndim() == t.shape.size();
    for (std::size_t d = 0; same_shape && d < a.ndim(); ++d) same_shape = static_cast<std::uint64_t>(a.shape(d)) == t.shape[d];
    if (!same_shape) {
      std::string got;
      for (std::size_t d = 0; d < a.ndim(); ++d) got += (d ? ", " : "") + std::to_string(a.shape(d));
      std::string want;
      for (std::size_t d = 0; d < t.shape.size(); ++d) want += (d ? ", " : "") + std::to_string(t.shape[d]);
      fail(who + ": shape (" + got + ") differs from the layout's (" + want + ")");
    }
    // C order, where extents of 1 (and empty arrays) may carry any stride.
    std::int64_t expect = 1;
    for (std::size_t d = a.ndim(); t.numel() != 0 && d-- > 0;) {
      if (a.shape(d) != 1 && a.stride(d) != expect) fail(who + ": the array is not C-contiguous (pass a contiguous array; a copy would not be updated in place)");
      expect *= a.shape(d);
    }
    out.views.push_back({a.data(), t.numel(), t.dtype});
    out.arrays.push_back(std::move(a));
  }
  return out;
}

}  // namespace sparsesync::python
