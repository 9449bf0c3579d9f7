// The optional network part of sparsesync._core (net.cpp), registered by the module where it is built.
#pragma once

#include <nanobind/nanobind.h>

namespace sparsesync::python {
void bind_net(nanobind::module_& m);
}
