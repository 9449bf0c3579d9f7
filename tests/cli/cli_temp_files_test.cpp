// No stray temporary files (issue 14, found 3): a SIGTERM during apply's write removes the temporary; one
// left by a process killed with SIGKILL is removed by the next run writing the same output, while those of
// live processes and of other outputs stay.
#include "cli_support.hpp"

#include <sparsesync/cli/atomic_file.hpp>

#include <doctest/doctest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <thread>

using namespace cli_test;
namespace ss = sparsesync;

namespace {

// Names in `dir` containing ".tmp.".
std::vector<std::string> temps_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// One f32 tensor of `n` elements, element i = i * step (so two steps differ everywhere).
void write_model(const fs::path& p, std::uint64_t n, std::uint32_t step) {
  const ss::model_layout layout({{"w", ss::dtype::f32, {n}}});
  std::vector<std::uint32_t> data(n);
  for (std::uint64_t i = 0; i < n; ++i) data[i] = static_cast<std::uint32_t>(i) * step;
  const std::vector<ss::const_tensor_view> views{{data.data(), n, ss::dtype::f32}};
  write_checkpoint(p, layout, views);
}

// A pid that no process holds: a child that has already been reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

pid_t spawn(std::vector<std::string> args) {
  args.insert(args.begin(), SPARSESYNC_CLI_PATH);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

TEST_CASE("a temporary left by a dead process is removed by the next run on that output; others stay") {
  temp_dir dir;
  write_model(dir / "base.safetensors", 4096, 1);
  write_model(dir / "new.safetensors", 4096, 3);
  const std::string host = ss::tools::detail::temp_host_tag();
  const std::string dead = ".out.ssp.tmp." + host + "." + std::to_string(dead_pid()) + ".a1B2c3";
  const std::string live = ".out.ssp.tmp." + host + "." + std::to_string(::getpid()) + ".d4E5f6";
  const std::string other_host = ".out.ssp.tmp.elsewhere." + std::to_string(dead_pid()) + ".g7H8i9";
  const std::string other_name = ".other.ssp.tmp." + host + "." + std::to_string(dead_pid()) + ".j0K1l2";
  for (const auto& n : {dead, live, other_host, other_name}) write_bytes(dir / n, std::vector<unsigned char>(1000, 7));

  const auto r = run_cli({"diff", (dir / "base.safetensors").string(), (dir / "new.safetensors").string(), "-o", (dir / "out.ssp").string()},
                         dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  std::vector<std::string> expected{live, other_host, other_name};
  std::sort(expected.begin(), expected.end());
  CHECK(temps_in(dir.path) == expected);
}

TEST_CASE("SIGTERM or SIGKILL during apply's write: no temporary survives (SIGKILL's is swept by the next run)") {
  temp_dir dir;
  const std::uint64_t n = 48ull << 20;  // 192 MiB: the write takes long enough to be caught in the middle
  write_model(dir / "base.safetensors", n, 1);
  write_model(dir / "new.safetensors", n, 3);
  const auto patch = dir / "p.ssp";
  auto r = run_cli({"diff", (dir / "base.safetensors").string(), (dir / "new.safetensors").string(), "-o", patch.string()}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);

  for (const int sig : {SIGTERM, SIGKILL}) {
    CAPTURE(sig);
    const auto out = dir / ("out-" + std::to_string(sig) + ".safetensors");
    const pid_t pid = spawn({"apply", (dir / "base.safetensors").string(), patch.string(), "-o", out.string()});
    bool caught = false;
    int status = 0;
    for (;;) {
      if (!temps_in(dir.path).empty()) {
        ::kill(pid, sig);
        caught = true;
        break;
      }
      if (::waitpid(pid, &status, WNOHANG) == pid) break;  // finished before its temporary was seen
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (caught) ::waitpid(pid, &status, 0);
    if (!caught || !WIFSIGNALED(status)) {
      MESSAGE("apply finished before the signal; nothing to check for this signal");
      continue;
    }
    CHECK(WTERMSIG(status) == sig);
    CHECK_FALSE(fs::exists(out));
    if (sig == SIGTERM) CHECK(temps_in(dir.path).empty());
    // The next run on that output: removes whatever the killed one left, and writes OUT.
    r = run_cli({"apply", (dir / "base.safetensors").string(), patch.string(), "-o", out.string()}, dir.path);
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(temps_in(dir.path).empty());
    CHECK(read_bytes(out) == read_bytes(dir / "new.safetensors"));
    fs::remove(out);
  }
}
