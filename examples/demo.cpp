// The README demo: a trainer takes RL-style AdamW steps on a GPT-shaped model; after each step it encodes
// only what changed in the BF16 weights, a rollout worker applies the patch in place, and both sides prove
// the worker is bit-identical to the trainer.
//
//   demo [--hidden 768] [--layers 12] [--vocab 32000] [--steps 3] [--lr 1e-6]
#include <sparsesync/gen/adam_bf16.hpp>
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/sparsesync.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ss = sparsesync;

namespace {

double arg(int argc, char** argv, const char* name, double fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atof(argv[i + 1]);
  return fallback;
}

const char* const usage =
    "usage: demo [--hidden 768] [--layers 12] [--vocab 32000] [--steps 3] [--lr 1e-6]\n"
    "A GPT-shaped model takes AdamW steps; each step's BF16 change is encoded, applied by a rollout worker\n"
    "and proven bit-identical to the trainer's weights.\n";

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

template <class Sel>
std::size_t patch_size(const ss::model_layout& layout, std::span<const ss::const_tensor_view> base,
                       std::span<const ss::const_tensor_view> target, ss::value_mode mode) {
  ss::patch_options o;
  o.encode.mode = mode;
  return ss::encode_patch<Sel>(layout, base, target, o).size();
}

}  // namespace

int main(int argc, char** argv) try {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(usage, stdout);
      return 0;
    }
  }
  const auto hidden = static_cast<std::uint64_t>(arg(argc, argv, "--hidden", 768));
  const auto layers = static_cast<std::uint64_t>(arg(argc, argv, "--layers", 12));
  const auto vocab = static_cast<std::uint64_t>(arg(argc, argv, "--vocab", 32000));
  const int steps = static_cast<int>(arg(argc, argv, "--steps", 3));
  ss::gen::adam_bf16_options gopt;
  gopt.lr = arg(argc, argv, "--lr", 1e-6);
  gopt.seed = 42;

  const auto layout = ss::gen::make_gpt_like_layout(hidden, layers, vocab);
  std::printf("model: GPT-shaped, %zu tensors, %.1f M BF16 parameters (%.1f MB dense), AdamW lr %g\n", layout.size(),
              static_cast<double>(layout.numel()) / 1e6, static_cast<double>(layout.bytes()) / 1e6, gopt.lr);
  ss::gen::adam_bf16_model trainer(layout, gopt);
  ss::gen::tensor_set worker = trainer.snapshot();  // the rollout worker starts from the same weights

  for (int step = 1; step <= steps; ++step) {
    const ss::gen::tensor_set before = trainer.snapshot();
    trainer.step();
    const auto base = before.views();
    const auto target = trainer.views();

    ss::patch_options opt;
    opt.encode.mode = ss::value_mode::ulp;
    opt.base_version = static_cast<std::uint64_t>(step - 1);
    opt.target_version = static_cast<std::uint64_t>(step);
    auto t0 = std::chrono::steady_clock::now();
    const auto patch = ss::encode_patch<ss::auto_encoder>(layout, base, target, opt);
    const double encode_s = seconds_since(t0);

    auto views = worker.mutable_views();
    t0 = std::chrono::steady_clock::now();
    const auto report = ss::apply_patch(patch, layout, views);  // verifies base and target checksums
    const double apply_s = seconds_since(t0);

    bool identical = true;
    for (std::size_t i = 0; i < layout.size(); ++i)
      identical = identical && std::memcmp(worker.tensor(i).data, trainer.tensor(i).data, layout[i].bytes()) == 0;

    const double changed = static_cast<double>(report.changed);
    const double dense = static_cast<double>(layout.bytes());
    const std::size_t raw = patch_size<ss::raw_index32>(layout, base, target, ss::value_mode::absolute);
    std::printf("step %d: %llu of %llu elements changed (%.2f%%)\n", step, static_cast<unsigned long long>(report.changed),
                static_cast<unsigned long long>(report.numel), 100.0 * changed / static_cast<double>(report.numel));
    std::printf("  sparsesync auto/ulp : %10zu bytes, %5.2f bits per change, %6.1fx smaller than dense\n", patch.size(),
                8.0 * static_cast<double>(patch.size()) / changed, dense / static_cast<double>(patch.size()));
    std::printf("  int32 index + bf16  : %10zu bytes, %5.2f bits per change, %6.1fx smaller than dense\n", raw,
                8.0 * static_cast<double>(raw) / changed, dense / static_cast<double>(raw));
    std::printf("  encode %.0f ms, apply + verify %.0f ms, worker bit-identical to trainer: %s (target checksum %016llx)\n",
                encode_s * 1e3, apply_s * 1e3, identical ? "yes" : "NO", static_cast<unsigned long long>(report.target_checksum));
    if (!identical) return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "demo: %s\n", e.what());
  return 1;
}
