// The CLI on the real RL update stream (../shared/data/rl-gpt2-small-lr1e-6): BASE and the model after each of
// the 24 steps as safetensors checkpoints (same header each time, as a trainer's saves have); every step diffed
// and applied with `auto` and `raw`, byte-identical; at step 24 every encoder x value mode, with the sizes that
// issue 2's acceptance asks for, measured on the whole patch file as inspect reports it.
#include "cli_support.hpp"
#include "shared_data.hpp"
#include "update_stream.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <map>

using namespace cli_test;
namespace ss = sparsesync;

TEST_CASE("real stream: every step of rl-gpt2-small-lr1e-6 through diff and apply, auto and raw" * doctest::test_suite("cli-real")) {
  const fs::path stream_dir = ss::test::shared_dir() / "data" / "rl-gpt2-small-lr1e-6";
  ss::test::require_shared_file(stream_dir / "patches.bin");
  const auto s = ss::bench::load_update_stream(stream_dir);
  REQUIRE(s.steps.size() == 24);
  temp_dir dir;
  std::vector<std::uint16_t> flat = s.base;
  auto write_step = [&](std::size_t k) {
    const auto path = dir / ("step" + std::to_string(k) + ".safetensors");
    const auto v = s.views(flat);
    write_checkpoint(path, s.layout, v, {{"format", "pt"}});
    return path;
  };
  const auto out = dir / "out.safetensors";
  // diff + apply + byte comparison; returns inspect's JSON of the patch.
  auto round_trip = [&](const fs::path& prev, const fs::path& next, const std::vector<unsigned char>& expected, const std::string& enc,
                        const std::string& mode) {
    const auto patch = dir / "p.ssp";
    auto r = run_cli({"diff", prev.string(), next.string(), "-o", patch.string(), "--encoder", enc, "--values", mode}, dir.path);
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    r = run_cli({"apply", prev.string(), patch.string(), "-o", out.string()}, dir.path);
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    REQUIRE(read_bytes(out) == expected);
    r = run_cli({"inspect", patch.string(), "--json"}, dir.path);
    REQUIRE(r.rc == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("payload_bytes").get<std::uint64_t>() == fs::file_size(patch));
    return j;
  };

  fs::path prev = write_step(0);
  for (std::size_t k = 1; k <= s.steps.size(); ++k) {
    CAPTURE(k);
    s.apply(k - 1, flat);
    const fs::path next = write_step(k);
    const auto expected = read_bytes(next);
    const bool last = k == s.steps.size();
    std::map<std::string, double> bits;
    for (const std::string mode : {"ulp", "absolute"}) {
      for (const std::string enc : {"auto", "raw", "varint", "rice", "bitmap"}) {
        if (!last && (mode != "ulp" || (enc != "auto" && enc != "raw"))) continue;
        CAPTURE(enc);
        CAPTURE(mode);
        const auto j = round_trip(prev, next, expected, enc, mode);
        CHECK(j.at("changed").get<std::uint64_t>() == s.steps[k - 1].size());
        CHECK(j.at("numel").get<std::uint64_t>() == s.layout.numel());
        CHECK(j.at("target_header").at("form") == "same_as_base");
        bits[enc + "/" + mode] = j.at("bits_per_changed").get<double>();
        if (last)
          MESSAGE("step 24, " << enc << "/" << mode << ": " << j.at("bits_per_changed").get<double>() << " bits/changed element ("
                              << j.at("data_bits_per_changed").get<double>() << " in chunk data), ratio " << j.at("ratio_vs_dense").get<double>()
                              << "x, density " << j.at("density").get<double>() * 100 << "%");
      }
    }
    CHECK(bits["auto/ulp"] <= bits["raw/ulp"]);
    if (last) {
      // Issue 2's acceptance, on the whole file: raw <= 49.5 bits, varint <= 1.05 x PULSE-style (~27 bits),
      // auto no worse than the best single encoder.
      CHECK(bits["raw/absolute"] <= 49.5);
      CHECK(bits["varint/absolute"] <= 1.05 * 27.0);
      for (const auto& [name, b] : bits) CHECK(bits["auto/ulp"] <= b);
    }
    fs::remove(prev);
    prev = next;
  }
}
