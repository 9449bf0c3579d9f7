// Child processes for the network tests: spawned without a shell, output to files, every wait bounded.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace net_test {

namespace fs = std::filesystem;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Polls `ready` every 20 ms until it holds or `timeout` passes.
inline bool wait_until(const std::function<bool()>& ready, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

class process {
 public:
  // Runs argv[0] with stdin from /dev/null and stdout/stderr into the given files.
  process(std::vector<std::string> argv, fs::path out, fs::path err) : out_(std::move(out)), err_(std::move(err)) {
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      const int in = ::open("/dev/null", O_RDONLY);
      const int o = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || o < 0 || e < 0) ::_exit(127);
      ::dup2(in, 0);
      ::dup2(o, 1);
      ::dup2(e, 2);
      ::execv(a[0], a.data());
      ::_exit(127);
    }
  }
  process(const process&) = delete;
  process& operator=(const process&) = delete;
  ~process() {
    if (!rc_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }

  // The exit code (128 + signal when killed), or nullopt if it is still running after `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    if (rc_) return rc_;
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        rc_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return rc_;
      }
      if (std::chrono::steady_clock::now() >= end) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  void signal(int sig) const {
    if (!rc_) ::kill(pid_, sig);
  }
  [[nodiscard]] std::string out() const { return slurp(out_); }
  [[nodiscard]] std::string err() const { return slurp(err_); }

 private:
  fs::path out_, err_;
  pid_t pid_ = -1;
  std::optional<int> rc_;
};

// Runs to completion within `timeout` (killed otherwise, which fails the caller's check on rc).
struct run_result {
  int rc = -1;
  std::string out, err;
};
inline run_result run(std::vector<std::string> argv, const fs::path& scratch, std::chrono::milliseconds timeout) {
  static int counter = 0;
  const auto stem = scratch / ("run-" + std::to_string(++counter));
  process p(std::move(argv), stem.string() + ".out", stem.string() + ".err");
  run_result r;
  const auto rc = p.wait(timeout);
  r.rc = rc ? *rc : -1;
  r.out = p.out();
  r.err = p.err();
  return r;
}

}  // namespace net_test
