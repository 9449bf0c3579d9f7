// Encodes and applies a tiny patch through the installed headers.
#include <sparsesync/sparsesync.hpp>

#include <cstdio>
#include <vector>

int main() {
  using namespace sparsesync;
  model_layout layout({{"w", dtype::bf16, {4, 64}}});
  std::vector<std::uint16_t> base(256, 0x3F80), target = base;
  target[3] = 0x3F81;
  target[200] = 0x3F7F;
  const const_tensor_view b[] = {{base.data(), 256, dtype::bf16}};
  const const_tensor_view t[] = {{target.data(), 256, dtype::bf16}};
  const auto patch = encode_patch<delta_varint>(layout, b, t);
  std::vector<std::uint16_t> rx = base;
  const tensor_view m[] = {{rx.data(), 256, dtype::bf16}};
  const auto report = apply_patch(patch, layout, m);
  if (rx != target || report.changed != 2) return 1;
  std::printf("consumer: %zu-byte patch applied, bit-identical\n", patch.size());
  return 0;
}
