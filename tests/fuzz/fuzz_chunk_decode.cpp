// The chunk decoder of every built-in encoder, on arbitrary chunk data. Input: encoder (byte 0, any value
// picks one of encoder_table's rows), value mode and word size (byte 1), chunk elements (bytes 2-3, 1..65536),
// change count (bytes 4-7), then the chunk's data. Encoders that read the chunk's base (entropy) decode against
// fuzz::chunk_base_element.
// Properties: a decode that succeeds yields exactly `changes` strictly increasing positions below `numel`, and
// re-encoding them gives back the very bytes decoded (every encoder's decoder must refuse a byte string its
// encoder would not write, encoder.hpp requirement 6: one version has one encoding). For rice this includes
// its parameters: regressions/chunk_decode/rice-suboptimal-k names a k the encoder would not pick.
#include "fuzz_support.hpp"

#include <sparsesync/codec/registry.hpp>

#include <vector>

namespace {
using namespace sparsesync;

template <class E, element_word W>
void check(std::span<const unsigned char> data, std::uint32_t numel, std::uint32_t changes, value_mode mode) {
  std::vector<W> base;
  if constexpr (E::needs_base)
    for (std::uint32_t i = 0; i < numel; ++i) base.push_back(fuzz::chunk_base_element<W>(i));
  chunk_context<W> ctx;
  ctx.numel = numel;
  ctx.changes = changes;
  ctx.mode = mode;
  ctx.base = base;
  std::vector<std::uint32_t> positions;
  std::vector<W> values;
  if (!E::template decode<W>(data, ctx, positions, values)) return;
  FUZZ_CHECK(positions.size() == changes && values.size() == changes);
  for (std::size_t i = 0; i < positions.size(); ++i) {
    FUZZ_CHECK(positions[i] < numel);
    FUZZ_CHECK(i == 0 || positions[i - 1] < positions[i]);
  }
  chunk_changes<W> in;
  in.numel = numel;
  in.mode = mode;
  in.positions = positions;
  in.values = values;
  in.base = base;
  std::vector<unsigned char> again;
  if (changes > 0) E::template encode<W>(in, again);
  FUZZ_CHECK(again.size() == data.size() && std::equal(again.begin(), again.end(), data.begin()));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::cursor in(data, size);
  const auto id = static_cast<encoder_id>(1 + in.byte() % max_encoder_id);
  const std::uint8_t shape = in.byte();
  const value_mode mode = (shape & 1) ? value_mode::ulp : value_mode::absolute;
  const std::uint32_t numel = 1 + in.u16();  // a default chunk holds 2^16 elements
  const std::uint32_t changes = in.u32() % (numel + 1);
  const auto chunk = in.rest();
  visit_encoder(id, [&]<class E>(E) {
    switch ((shape >> 1) % 3) {
      case 0: check<E, std::uint8_t>(chunk, numel, changes, mode); break;
      case 1: check<E, std::uint16_t>(chunk, numel, changes, mode); break;
      default: check<E, std::uint32_t>(chunk, numel, changes, mode); break;
    }
  });
  return 0;
}
