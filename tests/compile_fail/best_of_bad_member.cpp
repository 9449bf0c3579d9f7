// A best_of member that misses requirement 6 (decode), through sync::sender: each member is checked.
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/inproc.hpp>

struct encode_only {
  using encoder_concept = sparsesync::encoder_tag;
  static constexpr sparsesync::encoder_id id = sparsesync::encoder_id::rice;
  static constexpr std::string_view name = "encode_only";
  static constexpr bool needs_base = false;
  template <sparsesync::element_word W>
  static void encode(const sparsesync::chunk_changes<W>&, std::vector<unsigned char>&) {}
};

int main() {
  sparsesync::model_layout layout({{"w", sparsesync::dtype::bf16, {4}}});
  sparsesync::sync::sender<sparsesync::best_of<sparsesync::delta_varint, encode_only>, sparsesync::fixed_bytes,
                           sparsesync::inproc_transport>
      tx(layout);
  return static_cast<int>(tx.receivers().size());
}
