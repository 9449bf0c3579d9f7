// A host sync program as a downstream project writes it, with nothing but sparsesync::core: a trainer-side
// sender and a worker-side receiver joined by the in-process transport; one version is published and the
// worker's copy must end bit-identical. Both package consumers (find_package, add_subdirectory) build it.
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/inproc.hpp>

#include <cstdio>
#include <optional>
#include <thread>
#include <vector>

int main() {
  using namespace sparsesync;
  const model_layout layout({{"w", dtype::bf16, {4, 64}}, {"b", dtype::bf16, {64}}});
  std::vector<std::uint16_t> w(256, 0x3F80), b(64, 0x0000);
  w[3] = 0x3F81;
  w[200] = 0x3F7F;
  b[17] = 0x4000;
  const const_tensor_view trainer[] = {{w.data(), w.size(), dtype::bf16}, {b.data(), b.size(), dtype::bf16}};
  std::vector<std::uint16_t> rw(w.size()), rb(b.size());
  const tensor_view worker[] = {{rw.data(), rw.size(), dtype::bf16}, {rb.data(), rb.size(), dtype::bf16}};

  auto [up, down] = make_inproc_pair();
  sync::sender<delta_varint, fixed_bytes, inproc_transport> tx(layout);
  tx.add_receiver(std::move(up));
  sync::receiver<inproc_transport> rx(layout, worker, std::move(down));  // the handshake runs here
  std::optional<sync::applied_version> applied;
  std::thread worker_thread([&] { applied = rx.next(); });
  const auto report = tx.publish(1, trainer);
  worker_thread.join();
  tx.close();

  if (!applied || applied->version != 1 || report.acknowledged != 1) return 1;
  if (rw != w || rb != b || applied->checksum != report.target_checksum) return 2;
  std::printf("consumer: version 1 (%llu bytes) applied, bit-identical\n", static_cast<unsigned long long>(report.payload_bytes));
  return 0;
}
