// A bucketing policy whose plan() is not const (requirement 2), passed to encode_patch.
#include <sparsesync/format/patch_writer.hpp>

struct mutable_plan {
  using bucketing_policy_concept = sparsesync::bucketing_policy_tag;
  std::vector<sparsesync::bucket_plan> plan(const sparsesync::model_layout&, unsigned) { return {}; }
};

int main() {
  sparsesync::model_layout layout({{"w", sparsesync::dtype::bf16, {4}}});
  return static_cast<int>(sparsesync::encode_patch<sparsesync::delta_varint, mutable_plan>(layout, {}, {}).size());
}
