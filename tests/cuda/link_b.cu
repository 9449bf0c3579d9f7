// Link test, second translation unit (see link_unit.cuh): the same headers and instantiations as link_a.cu.
#include <sparsesync/cuda/plan.cuh>  // first: this file is the header's self-containment check

#include "link_unit.cuh"

int link_b_failures() { return sparsesync_test::link_unit_failures(); }
