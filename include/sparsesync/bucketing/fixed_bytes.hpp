// fixed_bytes: buckets of about N bytes of weights. Small tensors are packed together; a tensor larger
// than a bucket is split into pieces of whole chunks, each piece starting a bucket. Optionally the layout's last
// `tail_bytes` go into smaller buckets of `tail_bucket_bytes`: a sync engine sends each bucket's frame as soon as it
// is encoded, and frames that come out together at the end of a version wait for each other on the link; small
// last buckets leave little to send after the last encode (the big frames go out while the small ones encode).
#pragma once

#include <sparsesync/bucketing/bucketing_policy.hpp>

#include <algorithm>

SPARSESYNC_NS_BEGIN

struct fixed_bytes {
  using bucketing_policy_concept = bucketing_policy_tag;
  static constexpr std::uint64_t default_bytes = 256ull << 20;

  std::uint64_t bytes = default_bytes;
  std::uint64_t tail_bytes = 0;         // the layout's last bytes that go into buckets of tail_bucket_bytes (0: none)
  std::uint64_t tail_bucket_bytes = 0;  // 0: no tail

  [[nodiscard]] std::vector<bucket_plan> plan(const model_layout& layout, unsigned log2_chunk) const {
    const std::uint64_t total = layout.bytes();
    const bool tail = tail_bytes && tail_bucket_bytes && tail_bucket_bytes < bytes;
    const std::uint64_t tail_from = !tail ? total : tail_bytes < total ? total - tail_bytes : 0;
    std::vector<bucket_plan> out;
    bucket_plan cur;
    std::uint64_t cur_bytes = 0;
    std::uint64_t placed = 0;  // bytes of the layout before the next tensor or piece
    auto limit = [&] { return placed >= tail_from ? tail_bucket_bytes : bytes; };
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
      if (cur_bytes + n * w <= limit()) {  // fits whole into the open bucket
        cur.dtype = info.dtype;
        cur.segments.push_back({static_cast<std::uint32_t>(t), 0, n});
        cur_bytes += n * w;
        placed += n * w;
        continue;
      }
      close();
      if (n * w <= limit() && (placed >= tail_from || placed + n * w <= tail_from)) {  // fits whole into a fresh bucket
        cur.dtype = info.dtype;
        cur.segments.push_back({static_cast<std::uint32_t>(t), 0, n});
        cur_bytes = n * w;
        placed += n * w;
        continue;
      }
      // Larger than a bucket (or reaching into the tail): whole chunks per piece, the last piece takes the rest; a
      // piece before the tail ends where the tail begins (rounded up to whole chunks).
      const std::uint64_t chunk = std::uint64_t{1} << log2_chunk;
      for (std::uint64_t off = 0; off < n;) {
        std::uint64_t piece = std::max<std::uint64_t>(1, limit() / (chunk * w)) * chunk;
        if (placed < tail_from) piece = std::min(piece, std::max<std::uint64_t>(1, (tail_from - placed + chunk * w - 1) / (chunk * w)) * chunk);
        const std::uint64_t count = std::min(piece, n - off);
        cur.dtype = info.dtype;
        cur.segments.push_back({static_cast<std::uint32_t>(t), off, count});
        cur_bytes = count * w;
        placed += count * w;
        off += count;
        if (off < n) close();
      }
    }
    close();
    return out;
  }
};

SPARSESYNC_NS_END
