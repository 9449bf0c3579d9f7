// What the entropy decoder's first pass costs when it also hashes the base (a patch file applied without a known
// base checksum), on the real stream's step-1 base, one core: the class count alone, the count fused with the
// content checksum (what apply runs: entropy_count_classes_hashed), and the content checksum alone (the AVX-512
// loop model_checksum runs), each over the model's 2^16-element chunks; beside them the whole entropy apply of
// step 1 (3.6% changed) with the base known and hashed, and its encode hashing the base (encode_patch). The question it answers: how far the fused pass sits
// above its own parts, and how much of the gap between the two applies the checksum alone explains.
//   entropy_hash_pass_probe [--stream DIR] [--reps N] [--out FILE.json]
// Timings are medians of N passes; the variants are interleaved pass by pass so that drifts of a shared VM
// fall on all of them alike.
#include "host_timing.hpp"
#include "update_stream.hpp"
#include <sparsesync/codec/entropy.hpp>
#include <sparsesync/sparsesync.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace ss = sparsesync;
using json = nlohmann::json;

using ss::bench::cpu_name;
using ss::bench::median;
using ss::bench::now_s;

int main(int argc, char** argv) try {
  std::string stream = SPARSESYNC_SHARED_DIR "/data/rl-gpt2-small-lr1e-6", out;
  int reps = 101;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--stream") stream = argv[i + 1];
    else if (a == "--reps") reps = std::stoi(argv[i + 1]);
    else if (a == "--out") out = argv[i + 1];
    else throw std::invalid_argument("unknown option " + a);
  }
#if SPARSESYNC_HASH_AVX512
  if (!ss::detail::cpu_has_avx512_hash()) {
    std::puts("this CPU has no AVX-512 (F, DQ, BW): the fused pass does not run here");
    return 0;
  }
  const auto s = ss::bench::load_update_stream(stream);
  const std::vector<std::uint16_t>& base = s.base;
  std::vector<std::uint16_t> target = s.base;
  s.apply(0, target);
  const std::size_t n = base.size(), chunk = std::size_t{1} << 16;
  ss::detail::entropy_lane_counts h{}, h_fused{};

  // The parts agree with each other before they are timed: the fused pass's counts are the count's, its sum
  // the checksum's.
  for (std::size_t c = 0; c < n; c += chunk) {
    const std::span<const std::uint16_t> part(base.data() + c, std::min(chunk, n - c));
    ss::detail::entropy_count_classes<std::uint16_t>(part, h);
    const std::uint64_t fused = ss::detail::entropy_count_classes_hashed(part, h_fused, c);
    if (h != h_fused || fused != ss::detail::checksums_avx512<false>(part.data(), part.size(), c).target)
      throw std::runtime_error("the fused pass disagrees with its parts at chunk " + std::to_string(c / chunk));
  }

  ss::patch_options o;
  o.encode.mode = ss::value_mode::ulp;
  const auto bv = s.views(base), tv = s.views(target);
  const auto patch = ss::encode_patch<ss::entropy>(s.layout, bv, tv, o);
  std::vector<std::uint16_t> flat(n);
  const auto views = s.mutable_views(flat);
  ss::apply_options known;
  known.known_base_checksum = ss::model_checksum(s.layout, bv);

  std::uint64_t sink = 0;
  std::vector<double> t_count, t_fused, t_hash, t_apply_known, t_apply_hashed, t_encode;
  const auto timed = [](std::vector<double>& into, auto&& f) {
    const double t0 = now_s();
    f();
    into.push_back(now_s() - t0);
  };
  const auto apply = [&](std::vector<double>& into, const ss::apply_options& opt) {
    std::memcpy(flat.data(), base.data(), n * sizeof(std::uint16_t));
    timed(into, [&] { ss::apply_patch(patch, s.layout, views, opt); });
    if (flat != target) throw std::runtime_error("the apply did not rebuild step 1");
  };
  for (int r = 0; r < reps; ++r) {
    timed(t_count, [&] {
      for (std::size_t c = 0; c < n; c += chunk) {
        ss::detail::entropy_count_classes<std::uint16_t>(std::span<const std::uint16_t>(base.data() + c, std::min(chunk, n - c)), h);
        sink += h[0][c % 7];
      }
    });
    timed(t_fused, [&] {
      for (std::size_t c = 0; c < n; c += chunk)
        sink += ss::detail::entropy_count_classes_hashed(std::span<const std::uint16_t>(base.data() + c, std::min(chunk, n - c)), h, c);
    });
    timed(t_hash, [&] {
      for (std::size_t c = 0; c < n; c += chunk) sink += ss::detail::checksums_avx512<false>(base.data() + c, std::min(chunk, n - c), c).target;
    });
    apply(t_apply_known, known);
    apply(t_apply_hashed, {});
    std::vector<unsigned char> again;
    timed(t_encode, [&] { again = ss::encode_patch<ss::entropy>(s.layout, bv, tv, o); });
    if (again != patch) throw std::runtime_error("the encode wrote other bytes");
  }
  const double bytes = static_cast<double>(n * sizeof(std::uint16_t));
  const auto row = [&](const char* what, const std::vector<double>& t) {
    const double m = median(t);
    std::printf("  %-34s %7.3f ms  %6.3f GB/s of BF16\n", what, m * 1e3, bytes / m / 1e9);
    return json{{"ms", m * 1e3}, {"gbps", bytes / m / 1e9}};
  };
  std::printf("real stream %s, step 1 (%zu of %zu elements changed), one core, medians of %d:\n", stream.c_str(), s.steps[0].size(), n, reps);
  json r = {{"benchmark", "entropy-hash-pass-probe"},
            {"machine", {{"cpu", cpu_name()}, {"hardware_threads", std::thread::hardware_concurrency()}}},
            {"stream", stream},
            {"numel", n},
            {"changed", s.steps[0].size()},
            {"reps", reps},
            {"count_classes", row("class count", t_count)},
            {"count_classes_hashed", row("class count + base checksum (fused)", t_fused)},
            {"checksum", row("base checksum alone", t_hash)},
            {"apply_known_base", row("entropy apply, base known", t_apply_known)},
            {"apply_hashed", row("entropy apply, base hashed", t_apply_hashed)},
            {"encode_hashed", row("entropy encode, base hashed", t_encode)},
            {"sink", sink & 1}};
  if (!out.empty()) {
    std::ofstream(out) << r.dump(1) << "\n";
    std::printf("wrote %s\n", out.c_str());
  }
  return 0;
#else
  (void)reps;
  std::puts("built without the AVX-512 checksum (SPARSESYNC_HASH_AVX512): nothing to probe");
  return 0;
#endif
} catch (const std::exception& e) {
  std::fprintf(stderr, "entropy_hash_pass_probe: %s\n", e.what());
  return 1;
}
