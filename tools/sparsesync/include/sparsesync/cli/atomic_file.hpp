// Whole-file replacement that either fully happens or leaves nothing behind: the bytes go to a temporary
// file in the target's directory (same filesystem, so the final rename is atomic), are fsynced, and only
// then renamed over the target. Any failure removes the temporary; readers see the old file or the new
// one, never a prefix. POSIX only, like the rest of the CLI.
//
// Temporaries are named ".NAME.tmp.HOST.PID.XXXXXX" and listed in a process-wide table while they exist, so
// that (1) a SIGINT/SIGTERM handler can remove them before the process ends (unlink_pending_temps(), async-
// signal-safe) and (2) after a crash or SIGKILL the next run writing NAME removes those of this host whose
// process is gone (remove_stale_temps()).
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/error.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <dirent.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <climits>

SPARSESYNC_NS_BEGIN
namespace tools {
namespace detail {

[[noreturn]] inline void throw_io(const std::filesystem::path& path, const std::string& what, int err) {
  throw error(errc::io, path.string() + ": " + what + ": " + std::strerror(err));
}

// The mode a newly created file would get (0666 & ~umask). umask() itself cannot be read without writing
// it, which races with other threads, so read the kernel's report of it when available.
inline mode_t new_file_mode() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Umask:", 0) == 0) {
      try {
        return static_cast<mode_t>(0666 & ~std::stoul(line.substr(6), nullptr, 8));
      } catch (...) {
        break;
      }
    }
  }
  return 0644;
}

// Writes every byte or throws; retries short writes and EINTR.
// In pieces of 1 MiB: on the Linux VMs measured (bench/results/full-transfer.md) one write() of a whole
// model into the page cache took ~9x as long as the same bytes in 1 MiB writes.
inline void write_all(int fd, const unsigned char* p, std::size_t n, const std::filesystem::path& path) {
  constexpr std::size_t piece = std::size_t(1) << 20;
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n > piece ? piece : n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_io(path, "write failed", errno);
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// The temporaries this process is writing, for a signal handler: fixed slots (no allocation), each claimed
// by an atomic flag, the path a NUL-terminated copy.
struct pending_temps {
  static constexpr std::size_t slots = 16;
  std::array<std::atomic<bool>, slots> used{};
  std::array<std::array<char, PATH_MAX>, slots> path{};

  static pending_temps& get() {
    static pending_temps t;
    return t;
  }
  // The slot holding `p`, or slots when none is free (the file is then only swept by the next run).
  std::size_t add(const std::string& p) {
    if (p.size() >= PATH_MAX) return slots;
    for (std::size_t i = 0; i < slots; ++i) {
      bool expected = false;
      if (used[i].load() || !used[i].compare_exchange_strong(expected, true)) continue;
      std::memcpy(path[i].data(), p.c_str(), p.size() + 1);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      ready[i].store(true);
      return i;
    }
    return slots;
  }
  void remove(std::size_t i) {
    if (i >= slots) return;
    ready[i].store(false);
    used[i].store(false);
  }
  std::array<std::atomic<bool>, slots> ready{};
};

// "HOST" of the temporary names: the host name up to its first '.', characters other than [A-Za-z0-9-]
// dropped, at most 32; "host" when unknown.
inline std::string temp_host_tag() {
  char h[256] = {};
  std::string tag;
  if (::gethostname(h, sizeof h - 1) == 0)
    for (const char* c = h; *c && *c != '.' && tag.size() < 32; ++c)
      if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-') tag.push_back(*c);
  return tag.empty() ? std::string("host") : tag;
}

}  // namespace detail

// Removes every temporary this process is writing. Async-signal-safe: for SIGINT/SIGTERM handlers, just
// before the process ends (the writers are not told; their files are gone).
inline void unlink_pending_temps() noexcept {
  auto& t = detail::pending_temps::get();
  for (std::size_t i = 0; i < detail::pending_temps::slots; ++i)
    if (t.ready[i].load()) ::unlink(t.path[i].data());
}

// Removes the temporaries of `path` (".NAME.tmp.HOST.PID.XXXXXX") that this host's processes left behind and
// that no running process owns any more: a crash or SIGKILL during a write. Those of other hosts, of live
// processes and of other names stay. Returns how many it removed; never throws.
inline std::size_t remove_stale_temps(const std::filesystem::path& path) noexcept {
  try {
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    const std::string prefix = "." + path.filename().string() + ".tmp." + detail::temp_host_tag() + ".";
    DIR* d = ::opendir(dir.c_str());
    if (!d) return 0;
    std::vector<std::string> stale;
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() <= prefix.size() + 7 || name.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string rest = name.substr(prefix.size());  // PID.XXXXXX
      const auto dot = rest.find('.');
      if (dot == 0 || dot == std::string::npos || rest.size() - dot - 1 != 6 || dot > 9) continue;
      if (rest.find_first_not_of("0123456789") != dot) continue;
      const auto pid = static_cast<pid_t>(std::stol(rest.substr(0, dot)));
      if (pid <= 0 || pid == ::getpid()) continue;
      if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to signal): leave it
      stale.push_back((dir / name).string());
    }
    ::closedir(d);
    std::size_t removed = 0;
    for (const auto& f : stale) removed += ::unlink(f.c_str()) == 0 ? 1 : 0;
    return removed;
  } catch (...) {
    return 0;
  }
}

// Buffered sequential writer handed to the producer of an atomic file.
class file_sink {
 public:
  file_sink(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) { buffer_.reserve(capacity); }

  void write(std::span<const unsigned char> bytes) {
    if (bytes.size() >= capacity) {
      flush();
      detail::write_all(fd_, bytes.data(), bytes.size(), path_);
    } else {
      if (buffer_.size() + bytes.size() > capacity) flush();
      buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
    }
    written_ += bytes.size();
  }
  void write(const void* data, std::size_t size) { write({static_cast<const unsigned char*>(data), size}); }

  void flush() {
    detail::write_all(fd_, buffer_.data(), buffer_.size(), path_);
    buffer_.clear();
  }

  [[nodiscard]] std::uint64_t written() const noexcept { return written_; }

 private:
  static constexpr std::size_t capacity = std::size_t(1) << 20;
  int fd_;
  std::filesystem::path path_;
  std::vector<unsigned char> buffer_;
  std::uint64_t written_ = 0;
};

// The temporary of one atomic replacement of `path`, created empty in its directory and listed for the
// signal handler: written through fd() by whatever means suits the writer (write(), pwrite() at any offset),
// then commit() makes it `path`. Destroyed without commit(), it is removed.
class atomic_temp_file {
 public:
  explicit atomic_temp_file(std::filesystem::path path)
      : path_(std::move(path)), dir_(path_.has_parent_path() ? path_.parent_path() : std::filesystem::path(".")) {
    (void)remove_stale_temps(path_);
    temp_ = (dir_ / ("." + path_.filename().string() + ".tmp." + detail::temp_host_tag() + "." + std::to_string(::getpid()) + ".XXXXXX"))
                .string();
    // Blocked while the temporary is created and listed, so that a signal handler never misses it.
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &block, &old);
    fd_ = ::mkostemp(temp_.data(), O_CLOEXEC);
    const int create_errno = errno;
    slot_ = fd_ >= 0 ? detail::pending_temps::get().add(temp_) : detail::pending_temps::slots;
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (fd_ < 0) detail::throw_io(path_, "cannot create a temporary file in " + dir_.string(), create_errno);
  }
  atomic_temp_file(const atomic_temp_file&) = delete;
  atomic_temp_file& operator=(const atomic_temp_file&) = delete;
  ~atomic_temp_file() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
    detail::pending_temps::get().remove(slot_);
  }

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] const std::string& temp_path() const noexcept { return temp_; }
  [[nodiscard]] const std::filesystem::path& target() const noexcept { return path_; }

  // Makes the temporary `path`: an existing target's permission bits are kept (a new file gets 0666 & ~umask),
  // the bytes are fsynced, the temporary renamed over the target, and the rename made durable.
  void commit() {
    if (committed_ || fd_ < 0) throw error(errc::invalid_argument, "atomic_temp_file: commit() twice");
    struct stat existing {};
    const mode_t mode = (::stat(path_.c_str(), &existing) == 0 && S_ISREG(existing.st_mode)) ? (existing.st_mode & 07777)
                                                                                            : detail::new_file_mode();
    if (::fchmod(fd_, mode) != 0) detail::throw_io(path_, "cannot set permissions of the temporary file", errno);
    if (::fsync(fd_) != 0) detail::throw_io(path_, "fsync failed", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) detail::throw_io(path_, "close failed", errno);
    if (::rename(temp_.c_str(), path_.c_str()) != 0) detail::throw_io(path_, "cannot rename the temporary file over the target", errno);
    committed_ = true;
    // Make the rename itself durable. Best effort: the new file is complete either way, and some
    // filesystems refuse fsync on directories.
    const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::filesystem::path path_, dir_;
  std::string temp_;
  int fd_ = -1;
  std::size_t slot_ = detail::pending_temps::slots;
  bool committed_ = false;
};

// Replaces `path` with what `produce` writes to the sink. An existing target's permission bits are kept;
// a new file gets 0666 & ~umask. If `produce` throws, or any step fails, nothing is left at `path` that was
// not there before and the temporary is gone. A symlink at `path` is replaced, not followed.
inline void write_file_atomic(const std::filesystem::path& path, const std::function<void(file_sink&)>& produce) {
  atomic_temp_file temp(path);
  file_sink sink(temp.fd(), path);
  produce(sink);
  sink.flush();
  temp.commit();
}

// Replaces `path` with the concatenation of `pieces`.
inline void write_file_atomic(const std::filesystem::path& path, std::span<const std::span<const unsigned char>> pieces) {
  write_file_atomic(path, [&](file_sink& sink) {
    for (const auto& p : pieces) sink.write(p);
  });
}

}  // namespace tools
SPARSESYNC_NS_END
