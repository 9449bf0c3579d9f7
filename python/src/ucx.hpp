// The optional UCX part of sparsesync._core (ucx.cpp): Publisher and Subscriber over UCX, for host weights and
// for GPU weights whose frames cross host memory; registered where the UCX transport is built.
#pragma once

#include <nanobind/nanobind.h>

namespace sparsesync::python {
void bind_ucx(nanobind::module_& m);
}
