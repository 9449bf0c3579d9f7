// What a bucketing policy produces: buckets of one dtype, each a list of tensor segments.
#pragma once

#include <sparsesync/core/dtype.hpp>

#include <cstdint>
#include <vector>

SPARSESYNC_NS_BEGIN

// A run of elements of one tensor: elements [offset, offset + count) of layout tensor `tensor`.
struct segment {
  std::uint32_t tensor = 0;
  std::uint64_t offset = 0;
  std::uint64_t count = 0;
  friend bool operator==(const segment&, const segment&) = default;
};

// A bucket's elements are its segments concatenated; chunk k covers bucket elements [k << log2_chunk, ...).
struct bucket_plan {
  sparsesync::dtype dtype = dtype::bf16;
  std::vector<segment> segments;

  [[nodiscard]] std::uint64_t numel() const {
    std::uint64_t n = 0;
    for (const auto& s : segments) n += s.count;
    return n;
  }
};

SPARSESYNC_NS_END
