// Link test, first translation unit (see link_unit.cuh), with the program's main: without a CUDA device it
// still links and runs, and reports the GPU part skipped (exit 77).
#include "link_unit.cuh"
#include "require_gpu.cuh"

int link_b_failures();

int main() {
  sparsesync_test::require_gpu_or_skip();
  const int failures = sparsesync_test::link_unit_failures() + link_b_failures();
  std::printf("%s: %d roundtrip failure(s) over both translation units\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
