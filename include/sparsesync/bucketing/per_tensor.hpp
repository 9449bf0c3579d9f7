// per_tensor: one bucket per non-empty tensor (simple, and what a per-tensor receiver API wants).
#pragma once

#include <sparsesync/bucketing/bucketing_policy.hpp>

SPARSESYNC_NS_BEGIN

struct per_tensor {
  using bucketing_policy_concept = bucketing_policy_tag;

  [[nodiscard]] std::vector<bucket_plan> plan(const model_layout& layout, unsigned /*log2_chunk*/) const {
    std::vector<bucket_plan> out;
    for (std::size_t t = 0; t < layout.size(); ++t) {
      if (layout[t].numel() == 0) continue;
      out.push_back({layout[t].dtype, {{static_cast<std::uint32_t>(t), 0, layout[t].numel()}}});
    }
    return out;
  }
};

SPARSESYNC_NS_END
