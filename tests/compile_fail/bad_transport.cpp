// A transport whose receive() does not say whether a frame came (requirement 4), given to sync::receiver.
#include <sparsesync/sync/receiver.hpp>

struct void_receive {
  using transport_concept = sparsesync::transport_tag;
  void send(std::span<const std::byte>) {}
  void receive(std::vector<std::byte>&) {}
  void close() noexcept {}
  std::size_t max_frame_size() const noexcept { return 1024; }
};

int main() {
  sparsesync::model_layout layout({{"w", sparsesync::dtype::bf16, {4}}});
  std::vector<std::uint16_t> w(4);
  const sparsesync::tensor_view views[] = {{w.data(), 4, sparsesync::dtype::bf16}};
  sparsesync::sync::receiver<void_receive> rx(layout, views, void_receive{});
  (void)rx;
  return 0;
}
