// Every encoder x value mode x dtype reproduces the target bit for bit, on random and structured data.
#include "test_models.hpp"

#include <doctest/doctest.h>

using namespace sparsesync;
using namespace sparsesync::test;

namespace {

model_layout mixed_layout(dtype t) {
  // Sizes that are not multiples of 8, 32 or 64; an empty tensor; tensors larger than a bucket and a chunk.
  return model_layout({{"emb", t, {97, 131}},
                       {"one", t, {1}},
                       {"empty", t, {0}},
                       {"bias", t, {33}},
                       {"big", t, {70001}},
                       {"norm", t, {64}}});
}

template <class E>
void check_roundtrip(const host_model& base, const host_model& target, value_mode mode, unsigned log2_chunk) {
  const auto patch = make_patch<E>(base, target, mode, log2_chunk);
  host_model rx = base;
  auto views = rx.mutable_views();
  apply_report rep;
  const auto s = try_apply_patch(patch, rx.layout, views, {}, &rep);
  INFO("encoder ", E::name, " mode ", to_string(mode), " L ", log2_chunk, ": ", s.message());
  REQUIRE(s.ok());
  CHECK(rx == target);
  // A receiver that vouches for its base checksum reaches the same result without rereading buckets.
  host_model rx2 = base;
  auto views2 = rx2.mutable_views();
  apply_options known;
  known.known_base_checksum = rep.base_checksum;
  REQUIRE(try_apply_patch(patch, rx2.layout, views2, known).ok());
  CHECK(rx2 == target);
}

void check_all(const host_model& base, const host_model& target) {
  for (auto mode : {value_mode::absolute, value_mode::ulp})
    for (unsigned L : {8u, 12u, 16u}) {
      for_each_builtin_encoder([&]<class E>() { check_roundtrip<E>(base, target, mode, L); });
      check_roundtrip<auto_encoder>(base, target, mode, L);
    }
}

void run_dtype(dtype t) {
  host_model base(mixed_layout(t));
  fill_random(base, 11);
  SUBCASE("nothing changed") { check_all(base, base); }
  SUBCASE("sparse ulp steps") {
    host_model target = base;
    perturb_ulp(target, 0.01, 12);
    check_all(base, target);
  }
  SUBCASE("everything changed") {
    host_model target = base;
    for (auto& tb : target.tensors)
      for (auto& b : tb) b = static_cast<unsigned char>(~b);
    check_all(base, target);
  }
  SUBCASE("special values: signed zeros, NaN payloads, infinities, subnormals, huge jumps") {
    host_model target = base;
    const unsigned w = size_of(t);
    const std::uint32_t sign = 1u << (8 * w - 1);
    const std::uint32_t mask = w == 4 ? 0xFFFFFFFFu : (1u << (8 * w)) - 1;
    const std::uint32_t patterns[] = {0, sign, mask, sign - 1, 1, sign | 1, mask >> 1, 0x7F80u & mask, 0x7FC1u & mask};
    std::size_t k = 0;
    for (std::uint64_t i = 0; i < base.layout[0].numel(); i += 7, ++k) {
      base.set(0, i, patterns[k % 9]);
      target.set(0, i, patterns[(k * 5 + 3) % 9]);
    }
    target.set(1, 0, base.get(1, 0) ^ sign);  // sign flip of the single element
    check_all(base, target);
  }
}

}  // namespace

TEST_CASE("round trip bf16") { run_dtype(dtype::bf16); }
TEST_CASE("round trip f16") { run_dtype(dtype::f16); }
TEST_CASE("round trip f32") { run_dtype(dtype::f32); }
TEST_CASE("round trip f8_e4m3") { run_dtype(dtype::f8_e4m3); }
TEST_CASE("round trip f8_e5m2") { run_dtype(dtype::f8_e5m2); }

TEST_CASE("mixed dtypes in one model, both bucketing policies") {
  model_layout layout({{"a", dtype::bf16, {1000}}, {"b", dtype::f32, {300}}, {"c", dtype::bf16, {5}}, {"d", dtype::f16, {4097}}});
  host_model base(layout);
  fill_random(base, 3);
  host_model target = base;
  perturb_ulp(target, 0.05, 4);
  for (auto mode : {value_mode::absolute, value_mode::ulp}) {
    const auto p1 = make_patch<auto_encoder>(base, target, mode, 8, fixed_bytes{1024});
    const auto p2 = make_patch<auto_encoder, per_tensor>(base, target, mode, 8, per_tensor{});
    for (const auto* p : {&p1, &p2}) {
      host_model rx = base;
      auto v = rx.mutable_views();
      REQUIRE(try_apply_patch(*p, layout, v).ok());
      CHECK(rx == target);
    }
  }
}

TEST_CASE("auto is never larger than the best single encoder") {
  host_model base(mixed_layout(dtype::bf16));
  fill_random(base, 21);
  for (double density : {0.001, 0.01, 0.1, 0.5}) {
    host_model target = base;
    perturb_ulp(target, density, 22);
    for (auto mode : {value_mode::absolute, value_mode::ulp}) {
      const auto a = make_patch<auto_encoder>(base, target, mode).size();
      std::size_t best = SIZE_MAX;
      for_each_builtin_encoder([&]<class E>() { best = std::min(best, make_patch<E>(base, target, mode).size()); });
      CHECK(a <= best);
    }
  }
}

TEST_CASE("encoding is deterministic: same input, same bytes") {
  host_model base(mixed_layout(dtype::bf16));
  fill_random(base, 5);
  host_model target = base;
  perturb_ulp(target, 0.02, 6);
  CHECK(make_patch<auto_encoder>(base, target, value_mode::ulp) == make_patch<auto_encoder>(base, target, value_mode::ulp));
}

TEST_CASE("a full transfer is a patch from the all-zero model and ignores the receiver's contents") {
  model_layout layout({{"a", dtype::bf16, {1000}}, {"b", dtype::f32, {300}}, {"z", dtype::bf16, {0}}});
  host_model target(layout);
  fill_random(target, 8);
  target.set(0, 5, 0);  // zeros in the target stay zeros
  std::vector<const_tensor_view> zero(layout.size());
  for (std::size_t i = 0; i < layout.size(); ++i) zero[i] = {nullptr, layout[i].numel(), layout[i].dtype};
  const auto t = target.views();
  for (auto mode : {value_mode::absolute, value_mode::ulp}) {
    patch_options o;
    o.encode.mode = mode;
    const auto patch = encode_patch<auto_encoder>(layout, zero, t, o);
    patch_prologue pro;
    REQUIRE(parse_patch_prologue(patch, pro).ok());
    CHECK((pro.header.flags & flag_from_zero) != 0);
    host_model rx(layout);
    fill_random(rx, 99);  // stale contents of a receiver without a version
    auto v = rx.mutable_views();
    REQUIRE(try_apply_patch(patch, layout, v).ok());
    CHECK(rx == target);
  }
}

TEST_CASE("known per-bucket base checksums give the same bytes as hashing the base") {
  model_layout layout({{"a", dtype::bf16, {5000}}, {"b", dtype::f32, {700}}, {"c", dtype::bf16, {3000}}});
  host_model v1(layout), v0(layout);
  fill_random(v1, 31);
  host_model v2 = v1;
  perturb_ulp(v2, 0.02, 32);
  host_model v3 = v2;
  perturb_ulp(v3, 0.02, 33);
  patch_options o;
  o.encode.mode = value_mode::ulp;
  o.encode.log2_chunk = 10;
  const fixed_bytes policy{4096};
  // Encoding v1 -> v2 yields v2's bucket checksums; they serve as the known base of v2 -> v3.
  const auto a1 = v1.views(), a2 = v2.views(), a3 = v3.views();
  patch_encoder<auto_encoder> first(layout, a1, a2, o, policy);
  std::vector<unsigned char> scratch;
  first.prologue(scratch);
  while (first.next_bucket() < first.bucket_count()) first.encode_next(scratch);
  const auto hashed = encode_patch<auto_encoder>(layout, a2, a3, o, policy);
  patch_encoder<auto_encoder> second(layout, a2, a3, o, policy);
  second.use_known_base_checksums(first.bucket_target_checksums());
  std::vector<unsigned char> known;
  second.prologue(known);
  while (second.next_bucket() < second.bucket_count()) second.encode_next(known);
  second.final_header(known.data());
  CHECK(known == hashed);
  CHECK_THROWS_AS(second.use_known_base_checksums({1, 2}), sparsesync::error);
}
