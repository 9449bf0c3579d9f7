// `auto` and entropy: entropy is weighed only where encode_options::link states the link's speed, and then taken
// for a bucket exactly where its bytes saved outweigh its decode walk counted as link bytes (format/link_cost.hpp).
#include "test_models.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace sparsesync;
using namespace sparsesync::test;

namespace {

using auto_without_entropy = best_of<rice, delta_varint, bitmap, raw_index32>;

// Weight-like BF16 and an optimizer-like step (test_models.hpp): where entropy's classes pay, as on real RL streams.
void fill_weightlike(host_model& base, host_model& target, double density, std::uint64_t seed) {
  fill_normal_bf16(base, seed);
  target = base;
  step_weightlike(target, density, seed + 1);
}

std::vector<unsigned char> encode_with(const host_model& base, const host_model& target, auto_encoder, link_cost link, std::uint64_t bucket_bytes) {
  patch_options o;
  o.encode.mode = value_mode::ulp;
  o.encode.log2_chunk = 16;
  o.encode.link = link;
  const auto b = base.views(), t = target.views();
  return encode_patch<auto_encoder>(base.layout, b, t, o, fixed_bytes{bucket_bytes});
}

std::vector<encoder_id> bucket_encoders(std::span<const unsigned char> patch) {
  patch_prologue pro;
  REQUIRE(parse_patch_prologue(patch, pro).ok());
  std::vector<encoder_id> out;
  std::size_t pos = pro.bytes;
  for (std::uint32_t b = 0; b < pro.header.bucket_count; ++b) {
    bucket_view v;
    REQUIRE(parse_bucket(patch.subspan(pos), v).ok());
    out.push_back(static_cast<encoder_id>(v.header.encoder));
    pos += v.frame_bytes;
  }
  CHECK(pos == patch.size());
  return out;
}

void check_applies(std::span<const unsigned char> patch, const host_model& base, const host_model& target) {
  host_model rx = base;
  auto v = rx.mutable_views();
  const auto s = try_apply_patch(patch, rx.layout, v);
  INFO(s.message());
  REQUIRE(s.ok());
  CHECK(rx == target);
}

}  // namespace

TEST_CASE("auto with no link stated: the four encoders that read no base, byte for byte, though entropy is smaller") {
  host_model base(model_layout({{"w", dtype::bf16, {200000}}, {"b", dtype::bf16, {70000}}}));
  host_model target = base;
  fill_weightlike(base, target, 0.01, 1);
  const auto plain = make_patch<auto_without_entropy>(base, target, value_mode::ulp, 16, fixed_bytes{1 << 18});
  const auto ent = make_patch<entropy>(base, target, value_mode::ulp, 16, fixed_bytes{1 << 18});
  REQUIRE(ent.size() < plain.size());  // (the inputs are ones where entropy pays)
  patch_options o;
  o.encode.mode = value_mode::ulp;
  o.encode.log2_chunk = 16;
  const auto b = base.views(), t = target.views();
  const auto a = encode_patch<auto_encoder>(base.layout, b, t, o, fixed_bytes{1 << 18});
  CHECK(a == plain);
  for (auto e : bucket_encoders(a)) CHECK(e != encoder_id::entropy);
}

TEST_CASE("auto with a link stated takes entropy exactly where its bytes saved outweigh the decode walk") {
  // One bucket: the choice is one comparison.
  host_model base(model_layout({{"w", dtype::bf16, {1 << 18}}}));
  host_model target = base;
  fill_weightlike(base, target, 0.01, 2);
  const std::uint64_t numel = 1 << 18, bucket = numel * 2;
  const auto plain = make_patch<auto_without_entropy>(base, target, value_mode::ulp, 16, fixed_bytes{bucket});
  const auto ent = make_patch<entropy>(base, target, value_mode::ulp, 16, fixed_bytes{bucket});
  REQUIRE(ent.size() < plain.size());
  const double saved = static_cast<double>(plain.size() - ent.size());
  // The link speed at which the walk counts as exactly the bytes saved, for a GPU and a CPU receiver.
  for (double extra : {link_cost::gpu_receiver, link_cost::cpu_receiver}) {
    const double even = saved / (static_cast<double>(numel) * extra);
    INFO("break-even link: " << even << " bytes/s");
    const auto slower = encode_with(base, target, auto_encoder{}, {even * 0.5, extra}, bucket);
    const auto faster = encode_with(base, target, auto_encoder{}, {even * 2, extra}, bucket);
    CHECK(slower == ent);
    CHECK(faster == plain);
    check_applies(slower, base, target);
    check_applies(faster, base, target);
  }
  // The GPU figure makes entropy pay below ~10 Gb/s at this density, not on a 100 Gb/s link.
  CHECK(encode_with(base, target, auto_encoder{}, link_cost::gigabits(1), bucket) == ent);
  CHECK(encode_with(base, target, auto_encoder{}, link_cost::gigabits(100), bucket) == plain);
  // A CPU receiver walks ~300x slower: at 1 Gb/s rice's bytes arrive first.
  CHECK(encode_with(base, target, auto_encoder{}, link_cost::gigabits(1, link_cost::cpu_receiver), bucket) == plain);
}

TEST_CASE("auto over a slow link: per bucket the smallest, entropy where it wins, and every bucket applies") {
  // Buckets of weights beside buckets of random patterns (where rice or bitmap wins even with no walk counted).
  host_model base(model_layout({{"w", dtype::bf16, {150000}}, {"r", dtype::bf16, {60000}}, {"v", dtype::bf16, {90000}}}));
  host_model target = base;
  fill_weightlike(base, target, 0.02, 3);
  std::mt19937_64 rng(4);
  for (std::uint64_t i = 0; i < 60000; ++i) {
    const auto b = static_cast<std::uint16_t>(rng());
    base.set(1, i, b);
    target.set(1, i, rng() % 3 == 0 ? static_cast<std::uint16_t>(b ^ (1u + rng() % 0xfffeu)) : b);
  }
  const std::uint64_t bucket = 1 << 17;
  const auto a = encode_with(base, target, auto_encoder{}, link_cost::gigabits(0.1), bucket);
  check_applies(a, base, target);
  const auto encs = bucket_encoders(a);
  CHECK(std::count(encs.begin(), encs.end(), encoder_id::entropy) >= 1);
  CHECK(std::count(encs.begin(), encs.end(), encoder_id::entropy) < static_cast<std::ptrdiff_t>(encs.size()));
  std::size_t best = SIZE_MAX;
  for_each_builtin_encoder([&]<class E>() { best = std::min(best, make_patch<E>(base, target, value_mode::ulp, 16, fixed_bytes{bucket}).size()); });
  CHECK(a.size() <= best);
}

TEST_CASE("best_of of base readers alone encodes with them whether or not a link is stated") {
  host_model base(model_layout({{"w", dtype::bf16, {100000}}}));
  host_model target = base;
  fill_weightlike(base, target, 0.01, 5);
  const auto ent = make_patch<entropy>(base, target, value_mode::ulp, 16, fixed_bytes{1 << 16});
  CHECK(make_patch<best_of<entropy>>(base, target, value_mode::ulp, 16, fixed_bytes{1 << 16}) == ent);
}
