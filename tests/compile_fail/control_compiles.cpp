// The control: the same entry points used correctly compile, so the script must report this file as a
// failure (its test is WILL_FAIL). Proves the compile-failure tests can fail.
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/bucketing/per_tensor.hpp>
#include <sparsesync/sync/relay.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/inproc.hpp>

static_assert(sparsesync::check_encoder_selection<sparsesync::auto_encoder>);
static_assert(sparsesync::check_listener<sparsesync::inproc_listener>);

int main() {
  sparsesync::model_layout layout({{"w", sparsesync::dtype::bf16, {4}}});
  std::vector<std::uint16_t> w(4);
  const sparsesync::const_tensor_view views[] = {{w.data(), 4, sparsesync::dtype::bf16}};
  const auto patch = sparsesync::encode_patch<sparsesync::rice>(layout, views, views);
  sparsesync::sync::sender<sparsesync::auto_encoder, sparsesync::fixed_bytes, sparsesync::inproc_transport> tx(layout);
  using relay_t = sparsesync::sync::relay<sparsesync::delta_varint, sparsesync::per_tensor, sparsesync::inproc_transport,
                                          sparsesync::inproc_transport>;
  return static_cast<int>(patch.size() + tx.receivers().size() + sizeof(relay_t));
}
