// A version sink without abort() (requirement 7: a refused version must put the old weights back), given to
// sync::receiver.
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/transport/inproc.hpp>

struct no_abort_sink {
  void prepare(const sparsesync::model_layout&) {}
  std::uint64_t checksum() { return 0; }
  void begin(bool, std::optional<std::uint64_t>) {}
  sparsesync::status add_bucket(std::span<const unsigned char>) { return {}; }
  sparsesync::status finish(const sparsesync::patch_header&) { return {}; }
  void commit() {}
  std::uint64_t changed() const { return 0; }
  std::uint64_t target_checksum() const { return 0; }
};

int main() {
  sparsesync::model_layout layout({{"w", sparsesync::dtype::bf16, {4}}});
  auto [a, b] = sparsesync::make_inproc_pair();
  sparsesync::sync::receiver<sparsesync::inproc_transport, no_abort_sink> rx(layout, no_abort_sink{}, std::move(b));
  (void)rx;
  return 0;
}
