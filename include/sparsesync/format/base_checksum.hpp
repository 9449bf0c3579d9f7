// The content checksum of a bucket's base elements, for the sides that announce or prove a base (the bucket
// writer, apply), whole or a chunk at a time; a tensor view without data stands for the all-zero model.
#pragma once

#include <sparsesync/codec/encoder.hpp>
#include <sparsesync/core/hash_x86.hpp>
#include <sparsesync/format/model_access.hpp>

SPARSESYNC_NS_BEGIN
namespace detail {

// The base elements of run `r` at `p` (null: zeros).
template <element_word W>
std::uint64_t run_base_checksum(const W* p, const bucket_run& r) {
  if (p) return content_checksum_fast(p, r.count, r.flat_index);
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < r.count; ++i) sum += element_hash(r.flat_index + i, 0);
  return sum;
}

// The base elements [first, first + count) of the bucket.
template <element_word W>
std::uint64_t bucket_base_checksum(const model_layout& layout, std::span<const segment> segments, std::span<const std::uint64_t> starts,
                                   std::span<const const_tensor_view> base, std::uint64_t first, std::uint64_t count) {
  std::uint64_t sum = 0;
  for_each_run(layout, segments, starts, first, count, [&](const bucket_run& r) {
    const auto& v = base[r.tensor];
    sum += run_base_checksum<W>(v.data ? word_ptr<W>(v) + r.tensor_offset : nullptr, r);
  });
  return sum;
}

// For a codec that hashes chunk [first, first + count) of the bucket as one span while it reads it
// (chunk_base_hash): sets hash.first to the flat index of the chunk's first element and tells whether the
// chunk's elements lie at consecutive flat indices, which that hashing needs.
inline bool start_chunk_hash(const model_layout& layout, std::span<const segment> segments, std::span<const std::uint64_t> starts,
                             std::uint64_t first, std::uint64_t count, chunk_base_hash& hash) {
  bool consecutive = true, any = false;
  for_each_run(layout, segments, starts, first, count, [&](const bucket_run& r) {
    if (!any) hash.first = r.flat_index;
    any = true;
    consecutive = consecutive && r.flat_index == hash.first + (r.bucket_first - first);
  });
  return consecutive;
}

}  // namespace detail
SPARSESYNC_NS_END
