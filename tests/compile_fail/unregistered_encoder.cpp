// A well-formed encoder that is not in encoder_table: it could encode, but no receiver could decode it.
#include <sparsesync/format/patch_writer.hpp>

struct my_encoder {
  using encoder_concept = sparsesync::encoder_tag;
  static constexpr sparsesync::encoder_id id = sparsesync::encoder_id::delta_varint;
  static constexpr std::string_view name = "mine";
  static constexpr bool needs_base = false;
  template <sparsesync::element_word W>
  static void encode(const sparsesync::chunk_changes<W>&, std::vector<unsigned char>&) {}
  template <sparsesync::element_word W>
  static sparsesync::status decode(std::span<const unsigned char>, const sparsesync::chunk_context<W>&, std::vector<std::uint32_t>&,
                                   std::vector<W>&) {
    return {};
  }
};
static_assert(sparsesync::encoder<my_encoder>);  // well-formed: only the closed set refuses it

int main() {
  sparsesync::model_layout layout({{"w", sparsesync::dtype::bf16, {4}}});
  return static_cast<int>(sparsesync::encode_patch<my_encoder>(layout, {}, {}).size());
}
