// The real RL update stream in ../shared/data: every step, every encoder, bit-identical, in order.
#include "shared_data.hpp"
#include "test_models.hpp"
#include "update_stream.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <cstring>

using namespace sparsesync;
using namespace sparsesync::test;

namespace {

const std::filesystem::path stream_dir = shared_dir() / "data" / "rl-gpt2-small-lr1e-6";

// The stream's flat models as test models with one buffer per tensor.
host_model to_model(const bench::update_stream& s, const std::vector<std::uint16_t>& flat) {
  host_model m(s.layout);
  for (std::size_t t = 0; t < s.layout.size(); ++t)
    std::memcpy(m.tensors[t].data(), flat.data() + s.layout.first_element(t), m.tensors[t].size());
  return m;
}

}  // namespace

TEST_CASE("real stream: all 24 steps, every encoder and value mode, applied in order") {
  require_shared_file(stream_dir / "patches.bin");
  const auto s = bench::load_update_stream(stream_dir);
  REQUIRE(s.steps.size() == 24);
  std::vector<std::uint16_t> flat = s.base;
  host_model trainer = to_model(s, flat);
  host_model rx_raw = trainer, rx_auto = trainer, rx_link = trainer;
  std::uint64_t known = 0;
  for (std::size_t step = 0; step < s.steps.size(); ++step) {
    s.apply(step, flat);
    const host_model next = to_model(s, flat);
    const double changed = static_cast<double>(s.steps[step].size());
    // Every encoder and mode reproduces the step on a copy of the trainer's previous version.
    std::size_t best_single = SIZE_MAX, auto_size = 0;
    for (auto mode : {value_mode::absolute, value_mode::ulp}) {
      auto check = [&]<class E>() {
        const auto patch = make_patch<E>(trainer, next, mode, 16, fixed_bytes{1 << 20});
        host_model rx = trainer;
        auto v = rx.mutable_views();
        REQUIRE(try_apply_patch(patch, rx.layout, v).ok());
        REQUIRE(rx == next);
        if constexpr (std::is_same_v<E, raw_index32>) {
          // Index + value layout of SparseRL-Sync plus our headers: at most 49.5 bits per change.
          CHECK(8.0 * static_cast<double>(patch.size()) / changed <= 49.5);
        }
        // With no link stated, auto chooses among its members that read no base (codec/registry.hpp).
        constexpr bool in_auto = []<class... Es>(best_of<Es...>) { return ((std::is_same_v<E, Es> && !Es::needs_base) || ...); }(auto_encoder{});
        if constexpr (encoder<E>) {
          if (in_auto) best_single = std::min(best_single, patch.size());
        } else {
          auto_size = patch.size();
        }
      };
      best_single = SIZE_MAX;
      for_each_builtin_encoder(check);
      check.template operator()<auto_encoder>();
      CHECK(auto_size <= best_single);
    }
    // Two long-lived receivers follow the whole chain, one of them touching only changed elements.
    const auto p_raw = make_patch<raw_index32>(trainer, next, value_mode::absolute, 16, fixed_bytes{1 << 20});
    const auto p_auto = make_patch<auto_encoder>(trainer, next, value_mode::ulp, 16, fixed_bytes{1 << 20});
    auto v1 = rx_raw.mutable_views();
    REQUIRE(try_apply_patch(p_raw, rx_raw.layout, v1).ok());
    auto v2 = rx_auto.mutable_views();
    apply_options opt;
    if (step > 0) opt.known_base_checksum = known;
    apply_report rep;
    REQUIRE(try_apply_patch(p_auto, rx_auto.layout, v2, opt, &rep).ok());
    // A third follows auto over a stated 1 Gb/s link to GPU receivers: entropy's bytes saved outweigh its decode
    // walk there (format/link_cost.hpp): the patch is smaller than auto's with no link, and larger than entropy's
    // own by at most the walk, counted in bytes, of each bucket (where a bucket went to another encoder).
    patch_options lo;
    lo.encode.mode = value_mode::ulp;
    lo.encode.link = link_cost::gigabits(1);
    const auto tv = trainer.views(), nv = next.views();
    const auto p_link = encode_patch<auto_encoder>(trainer.layout, tv, nv, lo, fixed_bytes{1 << 20});
    patch_prologue pro;
    REQUIRE(parse_patch_prologue(p_link, pro).ok());
    const double walks = pro.header.bucket_count * lo.encode.link.walk_as_bytes((1 << 20) / 2);
    CHECK(static_cast<double>(p_link.size()) <= static_cast<double>(make_patch<entropy>(trainer, next, value_mode::ulp, 16, fixed_bytes{1 << 20}).size()) + walks);
    CHECK(p_link.size() < p_auto.size());
    auto v3 = rx_link.mutable_views();
    REQUIRE(try_apply_patch(p_link, rx_link.layout, v3).ok());
    known = rep.target_checksum;
    CHECK(rep.changed == s.steps[step].size());
    trainer = next;
    REQUIRE(rx_raw == trainer);
    REQUIRE(rx_auto == trainer);
    REQUIRE(rx_link == trainer);
    MESSAGE("step " << step + 1 << ": " << s.steps[step].size() << " changes, auto/ulp "
                    << 8.0 * static_cast<double>(p_auto.size()) / changed << " bits per change, over a 1 Gb/s link "
                    << 8.0 * static_cast<double>(p_link.size()) / changed);
  }
}
