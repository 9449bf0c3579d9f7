// A transport that opts in as a device_link but cannot receive device frames (requirement 4), given to
// sync::receiver: refused, rather than taken for a host transport.
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/transport/inproc.hpp>

struct half_device_link {
  using transport_concept = sparsesync::transport_tag;
  using device_link_concept = sparsesync::device_link_tag;
  sparsesync::inproc_transport inner;
  void send(std::span<const std::byte> m) { inner.send(m); }
  bool receive(std::vector<std::byte>& m) { return inner.receive(m); }
  void close() noexcept { inner.close(); }
  std::size_t max_frame_size() const noexcept { return inner.max_frame_size(); }
  void send_device(const sparsesync::device_frame&) {}
  void abort() noexcept {}
};

int main() {
  sparsesync::model_layout layout({{"w", sparsesync::dtype::bf16, {4}}});
  std::vector<std::uint16_t> w(4);
  std::vector<sparsesync::tensor_view> views{{w.data(), 4, sparsesync::dtype::bf16}};
  auto [a, b] = sparsesync::make_inproc_pair();
  sparsesync::sync::receiver<half_device_link> rx(layout, views, half_device_link{std::move(b)});
  (void)rx;
  return 0;
}
