#include <doctest/doctest.h>
#include <sparsesync/bucketing/fixed_bytes.hpp>
#include <sparsesync/bucketing/per_tensor.hpp>
#include <sparsesync/format/bucket_reader.hpp>

using namespace sparsesync;

namespace {
// Replays the receiver's tiling rule over a plan.
bool tiles(const model_layout& layout, const std::vector<bucket_plan>& plans) {
  tiling_check check(layout);
  for (const auto& p : plans) {
    bucket_view v;
    v.header.dtype = p.dtype;
    v.segments = p.segments;
    if (!check.add(v).ok()) return false;
  }
  return check.finish().ok();
}
}  // namespace

TEST_CASE("fixed_bytes packs small tensors, splits large ones at chunk boundaries, keeps one dtype per bucket") {
  model_layout layout({{"a", dtype::bf16, {10}},
                       {"b", dtype::bf16, {20}},
                       {"big", dtype::bf16, {5000}},
                       {"z", dtype::bf16, {0}},
                       {"f", dtype::f32, {7}},
                       {"g", dtype::bf16, {3}}});
  const auto plans = fixed_bytes{2048}.plan(layout, 8);  // 1024 bf16 elements a bucket, chunks of 256
  CHECK(tiles(layout, plans));
  REQUIRE(plans.size() >= 4);
  CHECK(plans[0].segments.size() == 2);  // a and b together
  for (const auto& p : plans) {
    CHECK(p.numel() > 0);
    CHECK(p.numel() * size_of(p.dtype) <= 2048);
    for (const auto& s : p.segments) CHECK(layout[s.tensor].dtype == p.dtype);
    if (layout[p.segments[0].tensor].name == "big") CHECK(p.segments[0].offset % 256 == 0);
  }
}

TEST_CASE("a bucket smaller than a chunk still makes progress") {
  model_layout layout({{"big", dtype::f32, {100000}}});
  const auto plans = fixed_bytes{16}.plan(layout, 8);
  CHECK(tiles(layout, plans));
  CHECK(plans.size() == (100000 + 255) / 256);
}

TEST_CASE("fixed_bytes puts the layout's last bytes into smaller buckets when asked") {
  model_layout layout({{"a", dtype::bf16, {10000}}, {"b", dtype::bf16, {3000}}});  // 26000 bytes
  const unsigned log2_chunk = 8;                                                   // 512-byte chunks
  const std::uint64_t chunk_bytes = 512;
  const fixed_bytes tapered{8192, 4096, 1024};  // the last 4096 bytes in buckets of 1024
  const auto plans = tapered.plan(layout, log2_chunk);
  CHECK(tiles(layout, plans));
  std::uint64_t small = 0;  // bytes of the trailing buckets of at most 1024 bytes
  for (auto it = plans.rbegin(); it != plans.rend() && it->numel() * 2 <= 1024; ++it) small += it->numel() * 2;
  CHECK(small >= 4096 - chunk_bytes);  // the tail, but for the piece that crosses into it (whole chunks)
  CHECK(small <= 4096);
  for (const auto& p : plans) CHECK(p.numel() * 2 <= 8192);
  CHECK(plans.size() > fixed_bytes{8192}.plan(layout, log2_chunk).size());

  // No tail, or a tail bucket no smaller than a bucket: the plain plan.
  for (const fixed_bytes same : {fixed_bytes{8192, 4096, 0}, fixed_bytes{8192, 0, 1024}, fixed_bytes{8192, 4096, 8192}}) {
    const auto a = same.plan(layout, log2_chunk), b = fixed_bytes{8192}.plan(layout, log2_chunk);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].segments == b[i].segments);
  }

  // A tail longer than the model: every bucket is a tail bucket.
  const auto all = fixed_bytes{8192, 1u << 30, 1024}.plan(layout, log2_chunk);
  CHECK(tiles(layout, all));
  for (const auto& p : all) CHECK(p.numel() * 2 <= 1024);
}

TEST_CASE("per_tensor gives one bucket per non-empty tensor") {
  model_layout layout({{"a", dtype::bf16, {10}}, {"e", dtype::bf16, {0}}, {"b", dtype::f16, {3, 3}}});
  const auto plans = per_tensor{}.plan(layout, 16);
  CHECK(plans.size() == 2);
  CHECK(tiles(layout, plans));
}

TEST_CASE("the tiling check refuses gaps, overlaps, wrong dtypes and missing tensors") {
  model_layout layout({{"a", dtype::bf16, {10}}, {"b", dtype::bf16, {10}}});
  CHECK_FALSE(tiles(layout, {{dtype::bf16, {{0, 0, 10}}}}));                        // b missing
  CHECK_FALSE(tiles(layout, {{dtype::bf16, {{0, 0, 10}, {1, 1, 9}}}}));             // gap
  CHECK_FALSE(tiles(layout, {{dtype::bf16, {{0, 0, 10}, {1, 0, 11}}}}));            // runs past b
  CHECK_FALSE(tiles(layout, {{dtype::bf16, {{0, 0, 5}, {0, 4, 6}, {1, 0, 10}}}}));  // overlap
  CHECK_FALSE(tiles(layout, {{dtype::f16, {{0, 0, 10}, {1, 0, 10}}}}));             // dtype
  CHECK(tiles(layout, {{dtype::bf16, {{0, 0, 4}}}, {dtype::bf16, {{0, 4, 6}, {1, 0, 10}}}}));
}
