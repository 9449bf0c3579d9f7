// apply's memory on a patch that changes every element (issue 14, found 5): the mapped inputs plus one
// chunk's changes, not 16 bytes per changed element of the whole patch.
#include "cli_support.hpp"

#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>

using namespace cli_test;
namespace ss = sparsesync;

namespace {

void write_model(const fs::path& p, std::uint64_t n, bool inverted) {
  const ss::model_layout layout({{"w", ss::dtype::f32, {n}}});
  std::vector<std::uint32_t> data(n);
  for (std::uint64_t i = 0; i < n; ++i) data[i] = inverted ? ~static_cast<std::uint32_t>(i * 2654435761u) : static_cast<std::uint32_t>(i * 2654435761u);
  const std::vector<ss::const_tensor_view> views{{data.data(), n, ss::dtype::f32}};
  write_checkpoint(p, layout, views);
}

// Runs the CLI; returns its exit status and peak resident set (bytes).
std::pair<int, std::uint64_t> run_measured(std::vector<std::string> args) {
  args.insert(args.begin(), SPARSESYNC_CLI_PATH);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  rusage use{};
  ::wait4(pid, &status, 0, &use);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, static_cast<std::uint64_t>(use.ru_maxrss) * 1024};
}

}  // namespace

TEST_CASE("apply of a patch changing every element: peak memory about the mapped inputs, not 16 B per change") {
  temp_dir dir;
  const std::uint64_t n = 16ull << 20;  // 64 MiB of f32: staging every change would add 256 MiB
  write_model(dir / "base.safetensors", n, false);
  write_model(dir / "new.safetensors", n, true);
  const auto patch = dir / "p.ssp";
  auto r = run_cli({"diff", (dir / "base.safetensors").string(), (dir / "new.safetensors").string(), "-o", patch.string(), "-q"}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const auto [rc, peak] = run_measured({"apply", (dir / "base.safetensors").string(), patch.string(), "-o", (dir / "out.safetensors").string(), "-q"});
  REQUIRE(rc == 0);
  CHECK(read_bytes(dir / "out.safetensors") == read_bytes(dir / "new.safetensors"));
  const std::uint64_t inputs = fs::file_size(dir / "base.safetensors") + fs::file_size(patch);
  MESSAGE("apply peak RSS " << peak / 1048576 << " MiB; inputs " << inputs / 1048576 << " MiB");
  CHECK(peak < inputs + (64ull << 20));
}
