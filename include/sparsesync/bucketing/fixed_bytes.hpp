// fixed_bytes: buckets of about N bytes of weights. Small tensors are packed together; a tensor larger
// than a bucket is split into pieces of whole chunks, each piece starting a bucket.
#pragma once

#include <sparsesync/bucketing/bucketing_policy.hpp>

#include <algorithm>

SPARSESYNC_NS_BEGIN

struct fixed_bytes {
  using bucketing_policy_concept = bucketing_policy_tag;
  static constexpr std::uint64_t default_bytes = 256ull << 20;

  std::uint64_t bytes = default_bytes;

  [[nodiscard]] std::vector<bucket_plan> plan(const model_layout& layout, unsigned log2_chunk) const {
    std::vector<bucket_plan> out;
    bucket_plan cur;
    std::uint64_t cur_bytes = 0;
    auto close = [&] {
      if (!cur.segments.empty()) out.push_back(std::move(cur));
      cur = bucket_plan{};
      cur_bytes = 0;
    };
    for (std::size_t t = 0; t < layout.size(); ++t) {
      const auto& info = layout[t];
      const std::uint64_t n = info.numel();
      if (n == 0) continue;
      const unsigned w = size_of(info.dtype);
      if (!cur.segments.empty() && cur.dtype != info.dtype) close();
      if (cur_bytes + n * w <= bytes) {  // fits whole into the open bucket
        cur.dtype = info.dtype;
        cur.segments.push_back({static_cast<std::uint32_t>(t), 0, n});
        cur_bytes += n * w;
        continue;
      }
      close();
      if (n * w <= bytes) {  // fits whole into a fresh bucket
        cur.dtype = info.dtype;
        cur.segments.push_back({static_cast<std::uint32_t>(t), 0, n});
        cur_bytes = n * w;
        continue;
      }
      // Larger than a bucket: whole chunks per piece, the last piece takes the rest.
      const std::uint64_t chunk = std::uint64_t{1} << log2_chunk;
      const std::uint64_t piece = std::max<std::uint64_t>(1, bytes / (chunk * w)) * chunk;
      for (std::uint64_t off = 0; off < n; off += piece) {
        cur.dtype = info.dtype;
        cur.segments.push_back({static_cast<std::uint32_t>(t), off, std::min(piece, n - off)});
        cur_bytes = cur.segments.back().count * w;
        if (off + piece < n) close();
      }
    }
    close();
    return out;
  }
};

SPARSESYNC_NS_END
