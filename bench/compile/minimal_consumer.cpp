// The smallest program a new user writes: encode a patch with the default selection (auto_encoder,
// fixed_bytes) and apply it. bench/compile/measure.sh times its compilation, header-only and with the
// compiled part (SPARSESYNC_COMPILED_LIBRARY).
#include <sparsesync/sparsesync.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  namespace ss = sparsesync;
  const ss::model_layout layout({{"w", ss::dtype::bf16, {1024}}});
  std::vector<std::uint16_t> base(1024, 0x3f80), target = base;
  target[7] = 0x3f81;
  const ss::const_tensor_view b[] = {{base.data(), base.size(), ss::dtype::bf16}};
  const ss::const_tensor_view t[] = {{target.data(), target.size(), ss::dtype::bf16}};
  const auto patch = ss::encode_patch(layout, b, t);
  const ss::tensor_view m[] = {{base.data(), base.size(), ss::dtype::bf16}};
  const auto report = ss::apply_patch(patch, layout, m);
  std::printf("%zu patch bytes, %llu changed, equal: %d\n", patch.size(), static_cast<unsigned long long>(report.changed),
              base == target);
  return base == target ? 0 : 1;
}
