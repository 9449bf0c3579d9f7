// sync::sender with its transport left out.
#include <sparsesync/sync/sender.hpp>

int main() {
  sparsesync::model_layout layout({{"w", sparsesync::dtype::bf16, {4}}});
  sparsesync::sync::sender<> tx(layout);
  return static_cast<int>(tx.receivers().size());
}
