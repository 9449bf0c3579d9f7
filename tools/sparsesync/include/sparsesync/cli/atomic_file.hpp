// Whole-file replacement that either fully happens or leaves nothing behind: the bytes go to a temporary
// file in the target's directory (same filesystem, so the final rename is atomic), are fsynced, and only
// then renamed over the target. Any failure removes the temporary; readers see the old file or the new
// one, never a prefix. POSIX only, like the rest of the CLI.
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

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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
inline void write_all(int fd, const unsigned char* p, std::size_t n, const std::filesystem::path& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n > (std::size_t(1) << 30) ? (std::size_t(1) << 30) : n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_io(path, "write failed", errno);
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

}  // namespace detail

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

// Replaces `path` with what `produce` writes to the sink. An existing target's permission bits are kept;
// a new file gets 0666 & ~umask. If `produce` throws, or any step fails, nothing is left at `path` that was
// not there before and the temporary is gone. A symlink at `path` is replaced, not followed.
inline void write_file_atomic(const std::filesystem::path& path, const std::function<void(file_sink&)>& produce) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::string temp = (dir / ("." + path.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) detail::throw_io(path, "cannot create a temporary file in " + dir.string(), errno);

  struct cleanup {
    int fd;
    const std::string& temp;
    bool committed = false;
    ~cleanup() {
      if (fd >= 0) ::close(fd);
      if (!committed) ::unlink(temp.c_str());
    }
  } guard{fd, temp};

  file_sink sink(fd, path);
  produce(sink);
  sink.flush();

  struct stat existing {};
  const mode_t mode = (::stat(path.c_str(), &existing) == 0 && S_ISREG(existing.st_mode)) ? (existing.st_mode & 07777)
                                                                                          : detail::new_file_mode();
  if (::fchmod(fd, mode) != 0) detail::throw_io(path, "cannot set permissions of the temporary file", errno);
  if (::fsync(fd) != 0) detail::throw_io(path, "fsync failed", errno);
  guard.fd = -1;
  if (::close(fd) != 0) detail::throw_io(path, "close failed", errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) detail::throw_io(path, "cannot rename the temporary file over the target", errno);
  guard.committed = true;

  // Make the rename itself durable. Best effort: the new file is complete either way, and some
  // filesystems refuse fsync on directories.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

// Replaces `path` with the concatenation of `pieces`.
inline void write_file_atomic(const std::filesystem::path& path, std::span<const std::span<const unsigned char>> pieces) {
  write_file_atomic(path, [&](file_sink& sink) {
    for (const auto& p : pieces) sink.write(p);
  });
}

}  // namespace tools
SPARSESYNC_NS_END
