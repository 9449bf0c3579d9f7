// Where one version's time goes, on one clock: host-side events of the trainer and of worker 0 (threads of one
// process), in ms since publish() began. Each event name keeps its first and last time and how often it came,
// so a version of 33 buckets gives, e.g., when the first and the last frame left the encoder, when worker 0
// got them, and when its finish, commit and the trainer's settle began and ended; and its last `kept` times, which
// follow the last frames one by one (which hop of theirs waited). Cheap enough to stay on
// (a steady_clock read and a short lock per event), unlike a CUPTI trace, which slows the host side.
#pragma once

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

namespace bench_gpu {

class version_timeline {
 public:
  void start() {
    std::lock_guard g(m_);
    events_.clear();
    t0_ = std::chrono::steady_clock::now();
  }
  void mark(const char* what) {
    const auto t = std::chrono::steady_clock::now();
    std::lock_guard g(m_);
    const double ms = std::chrono::duration<double, std::milli>(t - t0_).count();
    auto [it, fresh] = events_.try_emplace(what, event{ms, ms, 0, {}});
    it->second.last = ms;
    it->second.recent[it->second.count++ % kept] = ms;
  }
  // {"name":[first_ms,last_ms,count,[the last kept times, oldest first]],...}
  std::string json() const {
    std::lock_guard g(m_);
    std::string s = "{";
    char buf[160];
    for (const auto& [name, e] : events_) {
      std::snprintf(buf, sizeof buf, "%s\"%s\":[%.3f,%.3f,%u,[", s.size() > 1 ? "," : "", name.c_str(), e.first, e.last, e.count);
      s += buf;
      const unsigned n = e.count < kept ? e.count : kept;
      for (unsigned i = 0; i < n; ++i) {
        std::snprintf(buf, sizeof buf, "%s%.3f", i ? "," : "", e.recent[(e.count - n + i) % kept]);
        s += buf;
      }
      s += "]]";
    }
    return s + "}";
  }

 private:
  static constexpr unsigned kept = 6;
  struct event {
    double first, last;
    unsigned count;
    double recent[kept];  // ring: time i at recent[i % kept]
  };
  mutable std::mutex m_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::map<std::string, event> events_;
};

}  // namespace bench_gpu
