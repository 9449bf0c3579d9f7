// Walks a bucket's element space (its segments concatenated) over host tensor views.
#pragma once

#include <sparsesync/bucketing/bucket_plan.hpp>
#include <sparsesync/core/layout.hpp>

#include <algorithm>
#include <span>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace detail {

// A contiguous run of a bucket's elements inside one tensor.
struct bucket_run {
  std::uint64_t bucket_first;  // index of the run's first element within the bucket
  std::uint64_t count;
  std::uint32_t tensor;
  std::uint64_t tensor_offset;
  std::uint64_t flat_index;  // flat model index of the run's first element (for content hashes)
};

// Calls f(run) for each run of bucket elements [first, first + count), in order.
template <class F>
void for_each_run(const model_layout& layout, std::span<const segment> segments, std::span<const std::uint64_t> segment_starts,
                  std::uint64_t first, std::uint64_t count, F&& f) {
  if (count == 0) return;
  auto it = std::upper_bound(segment_starts.begin(), segment_starts.end(), first);
  std::size_t s = static_cast<std::size_t>(it - segment_starts.begin()) - 1;
  std::uint64_t pos = first;
  const std::uint64_t end = first + count;
  while (pos < end) {
    const auto& seg = segments[s];
    const std::uint64_t in_seg = pos - segment_starts[s];
    const std::uint64_t n = std::min(seg.count - in_seg, end - pos);
    f(bucket_run{pos, n, seg.tensor, seg.offset + in_seg, layout.first_element(seg.tensor) + seg.offset + in_seg});
    pos += n;
    ++s;
  }
}

inline std::vector<std::uint64_t> segment_starts(std::span<const segment> segments) {
  std::vector<std::uint64_t> starts(segments.size());
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    starts[i] = at;
    at += segments[i].count;
  }
  return starts;
}

// Scattered reads and writes of changed elements (sorted by address, ~1% of a model) miss the cache; a hint
// this many changes ahead keeps enough misses in flight.
inline constexpr std::size_t prefetch_distance = 32;

inline void prefetch_read(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 0, 3);
#else
  (void)p;
#endif
}

inline void prefetch_write(void* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 1, 3);
#else
  (void)p;
#endif
}

template <element_word W, class View>
auto* word_ptr(const View& v) {
  if constexpr (std::is_const_v<std::remove_pointer_t<decltype(v.data)>>)
    return static_cast<const W*>(v.data);
  else
    return static_cast<W*>(v.data);
}

// A chunk's base elements [first, first + count) of the bucket, as one span: straight into the model's memory
// where its runs lie end to end there (one tensor, or tensors stored back to back), else gathered into
// `storage` (runs apart, or a view without data: the all-zero model). Encoders that read the base scan it
// two or three times; a copy costs as much as one scan.
template <element_word W>
std::span<const W> chunk_base_view(const model_layout& layout, std::span<const segment> segments, std::span<const std::uint64_t> starts,
                                   std::span<const const_tensor_view> base, std::uint64_t first, std::uint64_t count, std::vector<W>& storage) {
  const W* begin = nullptr;
  const W* next = nullptr;
  bool direct = true;
  for_each_run(layout, segments, starts, first, count, [&](const bucket_run& r) {
    const W* p = base[r.tensor].data ? word_ptr<W>(base[r.tensor]) + r.tensor_offset : nullptr;
    if (!p || (begin && p != next)) direct = false;
    if (!begin) begin = p;
    next = p ? p + r.count : nullptr;
  });
  if (direct && begin) return {begin, static_cast<std::size_t>(count)};
  storage.clear();
  storage.reserve(count);
  for_each_run(layout, segments, starts, first, count, [&](const bucket_run& r) {
    if (const W* p = base[r.tensor].data ? word_ptr<W>(base[r.tensor]) + r.tensor_offset : nullptr) storage.insert(storage.end(), p, p + r.count);
    else storage.insert(storage.end(), r.count, W{0});
  });
  return storage;
}

}  // namespace detail
SPARSESYNC_NS_END
