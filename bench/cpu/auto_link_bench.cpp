// `auto` with the link's speed stated (encode_options::link, format/link_cost.hpp), on every step of the real RL
// stream: at each link speed and for GPU or CPU receivers, the patch's bytes and which encoder took each
// bucket, then what a version costs end to end: the bytes over the link (bytes / speed, a model of an ideal
// link), plus the receivers' decode. For CPU receivers the decode is measured here (one core, apply with the
// base known, as a sync receiver applies: median of --reps); for GPU receivers it is modelled as the buckets
// entropy took times link_cost::gpu_receiver (measured on an H100 beside rice). The `auto` row with no link
// stated is the baseline, measured in the same run.
//
//   auto_link_bench [--stream DIR] [--bucket-bytes N] [--reps R] [--out results.json]
#include "host_timing.hpp"
#include "update_stream.hpp"

#include <sparsesync/sparsesync.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace ss = sparsesync;
using json = nlohmann::json;

namespace {

using ss::bench::now_s;

struct chosen {
  std::uint64_t buckets = 0, entropy_buckets = 0, entropy_numel = 0;
};

chosen encoders_of(std::span<const unsigned char> patch) {
  ss::patch_prologue pro;
  ss::throw_if_error(ss::parse_patch_prologue(patch, pro));
  chosen c;
  std::size_t pos = pro.bytes;
  for (std::uint32_t b = 0; b < pro.header.bucket_count; ++b) {
    ss::bucket_view v;
    ss::throw_if_error(ss::parse_bucket(patch.subspan(pos), v));
    ++c.buckets;
    if (static_cast<ss::encoder_id>(v.header.encoder) == ss::encoder_id::entropy) {
      ++c.entropy_buckets;
      c.entropy_numel += v.header.numel;
    }
    pos += v.frame_bytes;
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  std::string stream = std::string(SPARSESYNC_SHARED_DIR) + "/data/rl-gpt2-small-lr1e-6";
  std::string out = "bench/results/auto-link.json";
  std::uint64_t bucket_bytes = 1 << 20;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw ss::error(ss::errc::invalid_argument, a + " needs a value");
      return argv[++i];
    };
    if (a == "--stream") stream = next();
    else if (a == "--out") out = next();
    else if (a == "--bucket-bytes") bucket_bytes = std::stoull(next());
    else if (a == "--reps") reps = std::stoi(next());
    else {
      std::fprintf(stderr, "usage: auto_link_bench [--stream DIR] [--bucket-bytes N] [--reps R] [--out results.json]\n");
      return 1;
    }
  }
  const auto s = ss::bench::load_update_stream(stream);
  const auto& layout = s.layout;
  const double numel = static_cast<double>(layout.numel());
  const std::vector<double> links_gbps{0, 400, 100, 25, 10, 1, 0.1};
  json rows = json::array();
  std::vector<std::uint16_t> before = s.base, after = s.base, work(s.base.size());
  for (std::size_t step = 0; step < s.steps.size(); ++step) {
    before = after;
    s.apply(step, after);
    const auto bv = s.views(before), av = s.views(after);
    const double changed = static_cast<double>(s.steps[step].size());
    const std::uint64_t known = ss::model_checksum(layout, bv);
    for (const char* receivers : {"gpu", "cpu"}) {
      const bool gpu = std::strcmp(receivers, "gpu") == 0;
      for (double gbps : links_gbps) {
        if (gbps == 0 && !gpu) continue;  // (one baseline row: with no link stated the receivers do not matter)
        ss::patch_options o;
        o.encode.mode = ss::value_mode::ulp;
        o.encode.link = ss::link_cost::gigabits(gbps, gpu ? ss::link_cost::gpu_receiver : ss::link_cost::cpu_receiver);
        const auto patch = ss::encode_patch<ss::auto_encoder>(layout, bv, av, o, ss::fixed_bytes{bucket_bytes});
        const chosen c = encoders_of(patch);
        // The apply a CPU sync receiver runs (its base known), one core, verified against the step's model.
        std::vector<double> t;
        ss::apply_options ao;
        ao.known_base_checksum = known;
        auto wv = s.mutable_views(work);
        for (int r = 0; r < reps; ++r) {
          work = before;
          const double t0 = now_s();
          ss::apply_patch(patch, layout, wv, ao);
          t.push_back(now_s() - t0);
        }
        if (work != after) throw ss::error(ss::errc::target_mismatch, "auto_link_bench: the patch did not rebuild the step");
        std::sort(t.begin(), t.end());
        json row{{"step", step + 1},
                 {"density", changed / numel},
                 {"receivers", std::string(gbps == 0 ? "any" : receivers)},
                 {"link_gbps", gbps},
                 {"bytes", patch.size()},
                 {"bits_per_change", 8.0 * static_cast<double>(patch.size()) / changed},
                 {"buckets", c.buckets},
                 {"entropy_buckets", c.entropy_buckets},
                 {"cpu_apply_ms_measured", 1e3 * t[t.size() / 2]},
                 {"gpu_entropy_walk_ms_modelled", 1e3 * static_cast<double>(c.entropy_numel) * ss::link_cost::gpu_receiver}};
        rows.push_back(row);
        std::printf("%s\n", row.dump().c_str());
      }
    }
  }
  json doc{{"bench", "auto_link_bench"},
           {"stream", stream},
           {"numel", layout.numel()},
           {"bucket_bytes", bucket_bytes},
           {"reps", reps},
           {"gpu_receiver_s_per_element", ss::link_cost::gpu_receiver},
           {"cpu_receiver_s_per_element", ss::link_cost::cpu_receiver},
           {"hardware_threads", std::thread::hardware_concurrency()},
           {"rows", rows}};
  std::ofstream(out) << doc.dump(1) << "\n";
  std::fprintf(stderr, "auto_link_bench: %zu rows -> %s\n", rows.size(), out.c_str());
  return 0;
}
