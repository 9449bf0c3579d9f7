// An encoder that misses requirement 4 (needs_base), passed to encode_patch.
#include <sparsesync/format/patch_writer.hpp>

struct no_needs_base {
  using encoder_concept = sparsesync::encoder_tag;
  static constexpr sparsesync::encoder_id id = sparsesync::encoder_id::delta_varint;
  static constexpr std::string_view name = "no_needs_base";
  template <sparsesync::element_word W>
  static void encode(const sparsesync::chunk_changes<W>&, std::vector<unsigned char>&) {}
  template <sparsesync::element_word W>
  static sparsesync::status decode(std::span<const unsigned char>, const sparsesync::chunk_context<W>&, std::vector<std::uint32_t>&,
                                   std::vector<W>&) {
    return {};
  }
};

int main() {
  sparsesync::model_layout layout({{"w", sparsesync::dtype::bf16, {4}}});
  return static_cast<int>(sparsesync::encode_patch<no_needs_base>(layout, {}, {}).size());
}
