// A one-line progress bar on stderr, drawn only when stderr is a terminal (never in pipes, logs or tests).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace sparsesync::cli {

class progress {
 public:
  // `total` units of work (buckets); `enabled` false forces silence (for --quiet).
  progress(std::string label, std::uint64_t total, bool enabled = true)
      : label_(std::move(label)), total_(total), on_(enabled && total > 0 && ::isatty(STDERR_FILENO) == 1) {
    if (on_) draw(0);
  }
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;
  ~progress() { done(); }

  void update(std::uint64_t done_units) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done_units < total_ && now - last_ < std::chrono::milliseconds(100)) return;  // at most ~10 redraws a second
    last_ = now;
    draw(done_units);
  }

  // Erases the bar so that what follows starts on a clean line.
  void done() {
    if (!on_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    on_ = false;
  }

 private:
  void draw(std::uint64_t n) {
    constexpr int width = 30;
    const double f = total_ ? static_cast<double>(n) / static_cast<double>(total_) : 1.0;
    const int fill = static_cast<int>(f * width);
    std::string bar(static_cast<std::size_t>(fill), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r%s [%s] %3d%% (%llu/%llu buckets)\033[K", label_.c_str(), bar.c_str(), static_cast<int>(f * 100.0),
                 static_cast<unsigned long long>(n), static_cast<unsigned long long>(total_));
    std::fflush(stderr);
  }

  std::string label_;
  std::uint64_t total_;
  bool on_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace sparsesync::cli
