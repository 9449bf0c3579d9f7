// The optional NCCL part of sparsesync._core (nccl.cpp): GPU Publisher and Subscriber whose frames go GPU to GPU
// on an NCCL link, registered where the GPU endpoints are built and nccl.h was found.
#pragma once

#include <nanobind/nanobind.h>

namespace sparsesync::python {
void bind_nccl(nanobind::module_& m);
}
