// Calibration against the shared real stream: started from that model's real weights, the generator's
// step-1 and step-24 densities and ULP shares must land near what real GRPO training produced. Its own test
// program (gen_real_stream_tests), which reports itself skipped where the shared data is absent.
#include "shared_data.hpp"

#include <sparsesync/gen/adam_bf16.hpp>
#include <sparsesync/gen/change_stats.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gen = sparsesync::gen;
using sparsesync::const_tensor_view;

TEST_CASE("generator started from the real GPT-2 weights tracks the real update stream") {
  const std::filesystem::path dir = sparsesync::test::shared_dir() / "data" / "rl-gpt2-small-lr1e-6";
  sparsesync::test::require_shared_file(dir / "base.bf16");
  sparsesync::test::require_shared_file(dir / "stats.json");
  const auto manifest = nlohmann::json::parse(std::ifstream(dir / "manifest.json"));
  const auto stats = nlohmann::json::parse(std::ifstream(dir / "stats.json"));
  std::vector<sparsesync::tensor_info> tensors;
  for (const auto& t : manifest.at("tensors"))
    tensors.push_back({t.at("name").get<std::string>(), sparsesync::dtype::bf16, t.at("shape").get<std::vector<std::uint64_t>>()});
  const sparsesync::model_layout layout(std::move(tensors));
  std::vector<std::uint16_t> base(layout.numel());
  std::ifstream(dir / "base.bf16", std::ios::binary).read(reinterpret_cast<char*>(base.data()), static_cast<std::streamsize>(base.size() * 2));
  std::vector<const_tensor_view> views;
  for (std::size_t i = 0; i < layout.size(); ++i) views.push_back({base.data() + layout.first_element(i), layout[i].numel(), sparsesync::dtype::bf16});

  gen::adam_bf16_model m(layout, std::span<const const_tensor_view>(views), {});
  for (int step = 1; step <= 24; ++step) {
    const auto before = m.snapshot();
    m.step();
    if (step != 1 && step != 24) continue;
    const auto a = before.views();
    const auto b = m.views();
    const auto s = gen::compare(std::span<const const_tensor_view>(a), std::span<const const_tensor_view>(b));
    const auto& real = stats.at("steps").at(step - 1);
    double real_within2 = 0, real_changed = 0;
    for (const auto& [k, v] : real.at("ulp_hist").items()) {
      real_changed += v.get<double>();
      if (std::abs(std::stoi(k)) <= 2) real_within2 += v.get<double>();
    }
    const double real_density = real.at("density").get<double>();
    MESSAGE("step " << step << ": generated density " << s.density() * 100 << "% (real " << real_density * 100
                    << "%), within +-2 ULP " << s.share_within(2) << " (real " << real_within2 / real_changed << ")");
    CHECK(s.density() > real_density / 1.5);
    CHECK(s.density() < real_density * 1.5);
    CHECK(std::fabs(s.share_within(2) - real_within2 / real_changed) < 0.05);
  }
}
