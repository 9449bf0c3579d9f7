// A contiguous read-only view of any bytes-like Python object (bytes, bytearray, memoryview, a uint8 array),
// held for the duration of a call: patches cross into the library without a copy.
#pragma once

#include <nanobind/nanobind.h>

#include <sparsesync/core/error.hpp>

#include <cstddef>
#include <span>

namespace sparsesync::python {

class byte_buffer {
 public:
  explicit byte_buffer(nanobind::handle h) {
    if (PyObject_GetBuffer(h.ptr(), &view_, PyBUF_SIMPLE) != 0) {
      PyErr_Clear();
      throw error(errc::invalid_argument, "patch: expected a bytes-like object (bytes, bytearray, memoryview)");
    }
  }
  ~byte_buffer() { PyBuffer_Release(&view_); }
  byte_buffer(const byte_buffer&) = delete;
  byte_buffer& operator=(const byte_buffer&) = delete;
  [[nodiscard]] std::span<const unsigned char> bytes() const {
    return {static_cast<const unsigned char*>(view_.buf), static_cast<std::size_t>(view_.len)};
  }

 private:
  Py_buffer view_{};
};

}  // namespace sparsesync::python
