// A child process whose stdout the test reads line by line (spawned without a shell; killed when it goes out of
// scope): the fault tests' workers print one line per version and the test waits for the line it expects.
#pragma once

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace sparsesync_test {

class line_process {
 public:
  // Runs argv[0] (a path) with the test's environment, its stdout on a pipe.
  explicit line_process(std::vector<std::string> argv) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    const int rc = posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    if (rc != 0) {
      ::close(fds[0]);
      pid = -1;
      throw std::runtime_error("posix_spawn " + argv[0] + " failed");
    }
    out_ = fds[0];
  }
  line_process(const line_process&) = delete;
  line_process& operator=(const line_process&) = delete;
  ~line_process() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }

  // Reads stdout lines until one contains `text` (true) or the timeout / end of output (false).
  bool wait_for_line(const std::string& text, std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      for (std::size_t nl; (nl = buffered_.find('\n')) != std::string::npos;) {
        const std::string line = buffered_.substr(0, nl);
        buffered_.erase(0, nl + 1);
        last_line = line;
        if (line.find(text) != std::string::npos) return true;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
      if (left <= 0) return false;
      pollfd pf{out_, POLLIN, 0};
      if (::poll(&pf, 1, static_cast<int>(left)) <= 0) return false;
      char buf[4096];
      const auto n = ::read(out_, buf, sizeof buf);
      if (n <= 0) return false;
      buffered_.append(buf, static_cast<std::size_t>(n));
    }
  }
  // Exit status once it ends (-1 if killed by a signal).
  int join() {
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

  pid_t pid = -1;
  std::string last_line;

 private:
  int out_ = -1;
  std::string buffered_;
};

}  // namespace sparsesync_test
