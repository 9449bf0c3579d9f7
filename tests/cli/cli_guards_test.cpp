// Foot-guns the CLI refuses with a clear message (issue 14, found 8): an output that is one of the inputs,
// an unknown subcommand, --bucket-bytes 0, a truncated patch.
#include "cli_support.hpp"

#include <doctest/doctest.h>

using namespace cli_test;
namespace ss = sparsesync;

namespace {

void write_model(const fs::path& p, std::uint32_t step) {
  const std::uint64_t n = 4096;
  const ss::model_layout layout({{"w", ss::dtype::f32, {n}}});
  std::vector<std::uint32_t> data(n);
  for (std::uint64_t i = 0; i < n; ++i) data[i] = static_cast<std::uint32_t>(i) * step;
  const std::vector<ss::const_tensor_view> views{{data.data(), n, ss::dtype::f32}};
  write_checkpoint(p, layout, views);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("an output that is one of the inputs is refused, the inputs untouched; OUT may still be BASE") {
  temp_dir dir;
  const auto base = dir / "base.safetensors", next = dir / "new.safetensors", patch = dir / "p.ssp";
  write_model(base, 1);
  write_model(next, 3);
  const auto base_bytes = read_bytes(base), next_bytes = read_bytes(next);

  auto r = run_cli({"diff", base.string(), next.string(), "-o", next.string()}, dir.path);
  CHECK(r.rc == 1);
  CHECK(has(r.err, "same file as NEW"));
  r = run_cli({"diff", base.string(), next.string(), "-o", (dir / "." / "base.safetensors").string()}, dir.path);
  CHECK(r.rc == 1);
  CHECK(has(r.err, "same file as BASE"));
  CHECK(read_bytes(base) == base_bytes);
  CHECK(read_bytes(next) == next_bytes);

  r = run_cli({"diff", base.string(), next.string(), "-o", patch.string()}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const auto patch_bytes = read_bytes(patch);
  fs::create_hard_link(patch, dir / "link.ssp");
  r = run_cli({"apply", base.string(), patch.string(), "-o", (dir / "link.ssp").string()}, dir.path);
  CHECK(r.rc == 1);
  CHECK(has(r.err, "same file as PATCH"));
  CHECK(read_bytes(patch) == patch_bytes);

  r = run_cli({"apply", base.string(), patch.string(), "-o", base.string()}, dir.path);  // in place: allowed
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(read_bytes(base) == next_bytes);
}

TEST_CASE("unknown subcommand, --bucket-bytes 0 and a truncated patch say what is wrong") {
  temp_dir dir;
  auto r = run_cli({"difff", "a", "b"}, dir.path);
  CHECK(r.rc == 1);
  CHECK(has(r.err, "unknown subcommand 'difff'"));
  r = run_cli({"-q", "nope"}, dir.path);
  CHECK(r.rc == 1);
  CHECK(has(r.err, "unknown subcommand 'nope'"));

  const auto base = dir / "base.safetensors", next = dir / "new.safetensors", patch = dir / "p.ssp";
  write_model(base, 1);
  write_model(next, 3);
  r = run_cli({"diff", base.string(), next.string(), "-o", patch.string(), "--bucket-bytes", "0"}, dir.path);
  CHECK(r.rc == 1);
  CHECK(has(r.err, "--bucket-bytes: must be at least 1 byte"));
  CHECK(r.err.size() < 200);  // not a 309-digit range

  r = run_cli({"diff", base.string(), next.string(), "-o", patch.string()}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  auto bytes = read_bytes(patch);
  bytes.resize(40);
  write_bytes(patch, bytes);
  r = run_cli({"apply", base.string(), patch.string(), "-o", (dir / "out.safetensors").string()}, dir.path);
  CHECK(r.rc == 3);
  CHECK(has(r.err, "truncated: patch header: 40 of its 88 bytes"));
  CHECK_FALSE(has(r.err, "patch header: patch header"));
}
