// The real RL update stream in ../shared/data: every step, every encoder, bit-identical, in order.
#include "test_models.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

using namespace sparsesync;
using namespace sparsesync::test;

namespace {

const std::filesystem::path stream_dir = std::filesystem::path(SPARSESYNC_SHARED_DIR) / "data" / "rl-gpt2-small-lr1e-6";

std::vector<unsigned char> read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct stream {
  host_model base{model_layout{}};
  std::vector<std::vector<std::pair<std::uint32_t, std::uint16_t>>> steps;
};

stream load() {
  const auto manifest = nlohmann::json::parse(read_file(stream_dir / "manifest.json"));
  std::vector<tensor_info> tensors;
  for (const auto& t : manifest["tensors"]) tensors.push_back({t["name"], dtype::bf16, t["shape"].get<std::vector<std::uint64_t>>()});
  stream s{host_model(model_layout(std::move(tensors)))};
  const auto flat = read_file(stream_dir / "base.bf16");
  REQUIRE(flat.size() == s.base.layout.numel() * 2);
  std::size_t at = 0;
  for (auto& t : s.base.tensors) {
    std::copy(flat.begin() + at, flat.begin() + at + t.size(), t.begin());
    at += t.size();
  }
  const auto patches = read_file(stream_dir / "patches.bin");
  std::size_t p = 0;
  while (p + 4 <= patches.size()) {
    const auto count = detail::load_le<std::uint32_t>(patches.data() + p);
    p += 4;
    REQUIRE(p + 6ull * count <= patches.size());
    std::vector<std::pair<std::uint32_t, std::uint16_t>> step(count);
    for (std::uint32_t i = 0; i < count; ++i) {
      step[i].first = detail::load_le<std::uint32_t>(patches.data() + p + 4ull * i);
      step[i].second = detail::load_le<std::uint16_t>(patches.data() + p + 4ull * count + 2ull * i);
    }
    p += 6ull * count;
    s.steps.push_back(std::move(step));
  }
  return s;
}

// Applies a step given as flat positions (the dataset's own format) to a model.
void apply_flat(host_model& m, const std::vector<std::pair<std::uint32_t, std::uint16_t>>& step) {
  std::size_t t = 0;
  for (auto [pos, bits] : step) {
    while (pos >= m.layout.first_element(t + 1)) ++t;
    m.set(t, pos - m.layout.first_element(t), bits);
  }
}

}  // namespace

TEST_CASE("real stream: all 24 steps, every encoder and value mode, applied in order") {
  if (!std::filesystem::exists(stream_dir / "patches.bin")) {
    MESSAGE("skipped: real update stream not found at " << stream_dir.string() << " (only present beside the project's checkout)");
    return;
  }
  auto s = load();
  REQUIRE(s.steps.size() == 24);
  host_model trainer = s.base;
  host_model rx_raw = s.base, rx_auto = s.base;
  std::uint64_t known = 0;
  for (std::size_t step = 0; step < s.steps.size(); ++step) {
    host_model next = trainer;
    apply_flat(next, s.steps[step]);
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
        if constexpr (encoder<E>) best_single = std::min(best_single, patch.size());
        else auto_size = patch.size();
      };
      best_single = SIZE_MAX;
      check.template operator()<raw_index32>();
      check.template operator()<bitmap>();
      check.template operator()<delta_varint>();
      check.template operator()<rice>();
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
    known = rep.target_checksum;
    CHECK(rep.changed == s.steps[step].size());
    trainer = next;
    REQUIRE(rx_raw == trainer);
    REQUIRE(rx_auto == trainer);
    MESSAGE("step " << step + 1 << ": " << s.steps[step].size() << " changes, auto/ulp "
                    << 8.0 * static_cast<double>(p_auto.size()) / changed << " bits per change");
  }
}
