// check_patch (format/patch_check.hpp): a whole patch checked without the base, as inspect tools use it.
#include "test_models.hpp"

#include <sparsesync/format/patch_check.hpp>

#include <doctest/doctest.h>

using namespace sparsesync;
using namespace sparsesync::test;

namespace {

struct fixture {
  host_model base{model_layout({{"w", dtype::bf16, {300, 70}}, {"b", dtype::bf16, {70}}, {"s", dtype::f32, {50}}})};
  host_model target = base;
  fixture() {
    fill_random(base, 3);
    target = base;
    perturb_ulp(target, 0.03, 4);
  }
};

}  // namespace

TEST_CASE("check_patch describes every bucket of an intact patch, for every encoder") {
  fixture f;
  for_each_builtin_encoder([&]<class E>() {
    const auto patch = make_patch<E>(f.base, f.target, value_mode::ulp, 10, fixed_bytes{8192});
    checked_patch p;
    std::vector<std::uint32_t> reports;
    const status s = check_patch(patch, p, true, [&](std::uint32_t done, std::uint32_t total) {
      CHECK(total == p.prologue.header.bucket_count);
      reports.push_back(done);
    });
    INFO(E::name, ": ", s.message());
    REQUIRE(s.ok());
    const auto& h = p.prologue.header;
    REQUIRE(p.buckets.size() == h.bucket_count);
    REQUIRE(reports.size() == h.bucket_count + 1);
    std::uint64_t at = p.prologue.bytes, numel = 0, changed = 0;
    for (std::size_t i = 0; i < p.buckets.size(); ++i) {
      const auto& b = p.buckets[i];
      CHECK(reports[i + 1] == i + 1);
      CHECK(b.header.index == i);
      CHECK(b.offset == at);
      CHECK(b.decoded == !E::needs_base);
      at += b.frame_bytes;
      numel += b.header.numel;
      changed += b.header.changed;
    }
    CHECK(at == patch.size());
    CHECK(numel == h.numel);
    CHECK(changed > 0);
  });
}

TEST_CASE("check_patch refuses truncation, trailing bytes and a bad chunk (the last only when decoding)") {
  fixture f;
  auto patch = make_patch<raw_index32>(f.base, f.target, value_mode::absolute, 10, fixed_bytes{1 << 20});
  checked_patch p;
  REQUIRE(check_patch(patch, p).ok());
  CHECK_FALSE(check_patch(std::span(patch).first(patch.size() - 1), p).ok());
  auto longer = patch;
  longer.push_back(0);
  CHECK(check_patch(longer, p).code() == errc::malformed);

  // Chunk 0's first index past its chunk, every checksum recomputed: only decoding finds it.
  REQUIRE(check_patch(patch, p).ok());
  REQUIRE_FALSE(p.buckets.empty());
  const std::size_t at = p.buckets[0].offset;
  bucket_view view;
  REQUIRE(parse_bucket(std::span(patch).subspan(at), view).ok());
  const std::size_t seg_at = at + bucket_header_bytes;
  const std::size_t table_at = seg_at + segment_entry_bytes * view.segments.size();
  const std::size_t data_at = table_at + chunk_entry_bytes * view.chunks.size();
  REQUIRE(view.chunks[0].changes > 0);
  detail::store_le<std::uint32_t>(patch.data() + data_at, 5000);  // the chunk holds 1024 elements
  std::uint64_t payload = stream_hash(patch.data() + seg_at, table_at - seg_at, 0);
  for (std::size_t c = 0; c < view.chunks.size(); ++c) {
    stream_hasher h(c);
    h.update(patch.data() + table_at + chunk_entry_bytes * c, chunk_entry_bytes);
    h.update(patch.data() + data_at + view.chunk_offsets[c], view.chunks[c].data_bytes);
    payload += h.digest();
  }
  detail::store_le<std::uint64_t>(patch.data() + at + 64, payload);
  detail::store_le<std::uint64_t>(patch.data() + at + 72, stream_hash(patch.data() + at, 72, 0));
  CHECK(check_patch(patch, p, false).ok());
  const status s = check_patch(patch, p);
  CHECK(s.code() == errc::index_out_of_range);
  CHECK(s.message().find("bucket 0") != std::string::npos);
}
