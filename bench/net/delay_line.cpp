// A one-way delay between two network namespaces, for kernels without sch_netem (this CI kernel has
// tbf and htb but no netem). Each namespace holds a TUN device; this process reads every IP packet the
// kernel routes into one TUN device, holds it for --delay-ms, and writes it into the other, in both
// directions. Rate shaping stays with the kernel: `tc ... tbf` on each TUN device's egress runs before the
// packet reaches this process, so a packet waits in the tbf queue for its turn on the "wire", then
// travels the delay line.
//
//   net_delay_line --ns-a A --dev-a tunA --ns-b B --dev-b tunB --delay-ms 5 [--max-seconds 1800]
//
// Needs root (setns, TUNSETIFF). The TUN devices must exist (ip tuntap add dev tunA mode tun). Ends on
// SIGINT/SIGTERM or after --max-seconds, and prints per-direction packet and byte counts.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

std::atomic<bool> stop{false};
void on_signal(int) { stop = true; }

std::string arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  if (!fallback) throw std::runtime_error(std::string("missing ") + name);
  return fallback;
}

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

// Opens the existing TUN device `dev` of network namespace `ns` (the device is looked up in the caller's
// namespace at TUNSETIFF, so enter it first; the descriptor keeps working from anywhere).
int open_tun(const std::string& ns, const std::string& dev) {
  const std::string path = "/var/run/netns/" + ns;
  const int nsfd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (nsfd < 0) fail("open " + path);
  if (::setns(nsfd, CLONE_NEWNET) != 0) fail("setns " + ns);
  ::close(nsfd);
  const int fd = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) fail("open /dev/net/tun");
  ifreq ifr{};
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", dev.c_str());
  if (::ioctl(fd, TUNSETIFF, &ifr) != 0) fail("TUNSETIFF " + dev + " in " + ns);
  return fd;
}

struct packet {
  clock_type::time_point due;
  std::vector<unsigned char> bytes;
};

// One direction: a reader stamps each packet with its due time, a writer releases it then.
class direction {
 public:
  direction(int from, int to, std::chrono::microseconds delay, std::size_t max_queued_bytes)
      : from_(from), to_(to), delay_(delay), max_queued_(max_queued_bytes) {}

  void start() {
    reader_ = std::thread([this] { read_loop(); });
    writer_ = std::thread([this] { write_loop(); });
  }
  void join() {
    cv_.notify_all();
    reader_.join();
    writer_.join();
  }
  [[nodiscard]] std::string stats() const {
    return std::to_string(packets_.load()) + " packets, " + std::to_string(bytes_.load()) + " bytes, " + std::to_string(dropped_.load()) +
           " dropped";
  }

 private:
  void read_loop() {
    std::vector<unsigned char> buf(70000);
    pollfd p{from_, POLLIN, 0};
    while (!stop) {
      if (::poll(&p, 1, 100) <= 0) continue;  // wakes up to notice stop
      const ssize_t n = ::read(from_, buf.data(), buf.size());
      if (n <= 0) continue;
      const auto due = clock_type::now() + delay_;
      std::lock_guard lock(mutex_);
      if (queued_ + static_cast<std::size_t>(n) > max_queued_) {  // a full queue drops, as a qdisc limit does
        ++dropped_;
        continue;
      }
      queued_ += static_cast<std::size_t>(n);
      queue_.push_back({due, std::vector<unsigned char>(buf.begin(), buf.begin() + n)});
      cv_.notify_one();
    }
  }

  void write_loop() {
    std::unique_lock lock(mutex_);
    while (!stop) {
      if (queue_.empty()) {
        cv_.wait_for(lock, std::chrono::milliseconds(100));
        continue;
      }
      const auto due = queue_.front().due;
      if (clock_type::now() < due) {
        cv_.wait_until(lock, due);  // a packet read later is due later: the front is always next
        continue;
      }
      packet p = std::move(queue_.front());
      queue_.pop_front();
      queued_ -= p.bytes.size();
      lock.unlock();
      if (::write(to_, p.bytes.data(), p.bytes.size()) == static_cast<ssize_t>(p.bytes.size())) {
        ++packets_;
        bytes_ += p.bytes.size();
      } else {
        ++dropped_;
      }
      lock.lock();
    }
  }

  int from_, to_;
  std::chrono::microseconds delay_;
  std::size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<packet> queue_;
  std::size_t queued_ = 0;
  std::atomic<std::uint64_t> packets_{0}, bytes_{0}, dropped_{0};
  std::thread reader_, writer_;
};

}  // namespace

int main(int argc, char** argv) try {
  const std::string ns_a = arg(argc, argv, "--ns-a", nullptr), dev_a = arg(argc, argv, "--dev-a", nullptr);
  const std::string ns_b = arg(argc, argv, "--ns-b", nullptr), dev_b = arg(argc, argv, "--dev-b", nullptr);
  const auto delay = std::chrono::microseconds(static_cast<long>(std::stod(arg(argc, argv, "--delay-ms", "5")) * 1000));
  const int max_seconds = std::stoi(arg(argc, argv, "--max-seconds", "1800"));
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  const int fd_a = open_tun(ns_a, dev_a);
  const int fd_b = open_tun(ns_b, dev_b);
  // 256 MiB per direction: far above what a 10 Gbit/s link holds in 5 ms; the tbf queue limits the rest.
  direction ab(fd_a, fd_b, delay, 256u << 20), ba(fd_b, fd_a, delay, 256u << 20);
  ab.start();
  ba.start();
  std::printf("net_delay_line: %s/%s <-> %s/%s, %.3f ms each way\n", ns_a.c_str(), dev_a.c_str(), ns_b.c_str(), dev_b.c_str(),
              static_cast<double>(delay.count()) / 1000.0);
  std::fflush(stdout);
  const auto end = clock_type::now() + std::chrono::seconds(max_seconds);
  while (!stop && clock_type::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  stop = true;
  ab.join();
  ba.join();
  std::printf("net_delay_line: %s -> %s: %s; %s -> %s: %s\n", ns_a.c_str(), ns_b.c_str(), ab.stats().c_str(), ns_b.c_str(), ns_a.c_str(),
              ba.stats().c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "net_delay_line: %s\n", e.what());
  return 1;
}
