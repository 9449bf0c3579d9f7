// What the CLI network tests share: a training model that drops checkpoints, `sparsesync serve` as a child
// process, `sparsesync pull` runs, and the throwaway PKI for TLS. Everything talks only to 127.0.0.1.
#pragma once

#include "temp_dir.hpp"
#include "process.hpp"
#include <sparsesync/cli/safetensors.hpp>
#include "tls_fixtures.hpp"
#include <sparsesync/gen/adam_bf16.hpp>
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/transport/key.hpp>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <sstream>

namespace net_test {

namespace ss = sparsesync;
using namespace std::chrono_literals;

using temp_dir = sparsesync::test::temp_dir;

inline std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A small GPT-shaped model taking AdamW steps; each checkpoint gets its step in the header's __metadata__,
// so consecutive headers differ too (the puller must reproduce each one).
class trainer {
 public:
  explicit trainer(std::uint64_t layers = 2) : model_(ss::gen::make_gpt_like_layout(64, layers, 512), options()) {}

  // Takes a step and renames the checkpoint into `dir` (the temporary name starts with '.').
  fs::path drop(const fs::path& dir, const std::string& name) {
    model_.step();
    const auto path = dir / name;
    const auto views = model_.views();
    ss::tools::write_safetensors_atomic(path, model_.layout(), views, {{"step", std::to_string(model_.step_count())}});
    return path;
  }

 private:
  static ss::gen::adam_bf16_options options() {
    ss::gen::adam_bf16_options o;
    o.seed = 7;
    o.lr = 2e-5;  // a tiny model needs a larger step than lr 1e-6 to change a few % of its elements
    o.threads = 1;
    return o;
  }
  ss::gen::adam_bf16_model model_;
};

// `sparsesync serve` on 127.0.0.1 with an ephemeral port, watching dir/watch (without --key-file if `key` is empty).
class server {
 public:
  server(const fs::path& dir, const fs::path& key, std::vector<std::string> extra = {}) : dir_(dir) {
    fs::create_directories(dir / "watch");
    std::vector<std::string> argv{SPARSESYNC_CLI_PATH, "serve", "--listen", "127.0.0.1:0", "--port-file", (dir / "port").string(),
                                  "--watch", (dir / "watch").string(), "--poll-ms", "50"};
    if (!key.empty()) argv.insert(argv.end(), {"--key-file", key.string()});
    argv.insert(argv.end(), extra.begin(), extra.end());
    proc_ = std::make_unique<process>(argv, dir / "serve.out", dir / "serve.err");
    REQUIRE_MESSAGE(wait_until([&] { return fs::exists(dir / "port"); }, 20s), "serve did not start: " << proc_->err());
    port_ = std::stoi(slurp(dir / "port"));
  }
  ~server() { stop(); }

  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] fs::path watch() const { return dir_ / "watch"; }
  [[nodiscard]] std::string log() const { return proc_->err(); }

  void wait_published(std::uint64_t version) const {
    const std::string mark = "version " + std::to_string(version) + " <- ";
    REQUIRE_MESSAGE(wait_until([&] { return log().find(mark) != std::string::npos; }, 60s), "version " << version << " not published:\n" << log());
  }

  // SIGTERM: serve must stop in order and exit 0.
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    proc_->signal(SIGTERM);
    const auto rc = proc_->wait(30s);
    CHECK_MESSAGE(rc == std::optional<int>(0), "serve did not stop cleanly:\n" << log());
  }

 private:
  fs::path dir_;
  std::unique_ptr<process> proc_;
  int port_ = 0;
  bool stopped_ = false;
};

inline fs::path make_key(const fs::path& p) {
  ss::write_key_file(p, ss::pre_shared_key::generate());
  return p;
}

inline std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// `sparsesync pull` of s's newest version into `out` (without --key-file if `key` is empty).
inline run_result pull(const temp_dir& t, const server& s, const fs::path& out, const fs::path& key, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{SPARSESYNC_CLI_PATH, "pull", s.address(), "-o", out.string(), "--timeout", "60"};
  if (!key.empty()) argv.insert(argv.end(), {"--key-file", key.string()});
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run(argv, t.path, 90s);
}

inline bool same_file(const fs::path& a, const fs::path& b) { return fs::exists(a) && fs::exists(b) && slurp(a) == slurp(b); }

// A pull that must succeed and bring `out` to `expected` by exactly one version, a full transfer or a patch.
inline void check_one_version(const run_result& r, const fs::path& out, const fs::path& expected, bool full) {
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["full"] == full);
  CHECK(same_file(out, expected));
}

// The transport tests' throwaway PKI (tls_fixtures.hpp) under dir: a CA with server and client certificates,
// and a rogue CA with a client certificate of its own.
struct test_pki {
  fs::path dir;
  explicit test_pki(fs::path d) : dir(std::move(d)) {
    fs::create_directories(dir);
    sparsesync_test::make_test_pki(dir);
  }
  // --tls-ca, --tls-cert, --tls-key for `who` ("server", "client", "rogue-client"), trusting `ca`.
  [[nodiscard]] std::vector<std::string> args(const std::string& who, const std::string& ca = "ca.pem") const {
    return {"--tls-ca", (dir / ca).string(), "--tls-cert", (dir / (who + ".pem")).string(), "--tls-key", (dir / (who + ".key")).string()};
  }
};

inline std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}


}  // namespace net_test
