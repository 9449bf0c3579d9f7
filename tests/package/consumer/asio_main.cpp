// Compiles the network transport and the sync engine through the installed package.
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

static_assert(sparsesync::check_transport<sparsesync::asio_tcp_transport>);
static_assert(sparsesync::check_listener<sparsesync::asio_tcp_listener>);

int main() {
  sparsesync::model_layout layout({{"w", sparsesync::dtype::bf16, {8}}});
  sparsesync::sync::sender<sparsesync::delta_varint, sparsesync::fixed_bytes, sparsesync::asio_tcp_transport> tx(layout);
  return tx.receivers().empty() ? 0 : 1;
}
