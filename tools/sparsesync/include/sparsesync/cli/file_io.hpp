// Read-only memory maps of the CLI's inputs: a 14 GB checkpoint is paged in by the kernel, never copied
// into the heap. (Outputs go through atomic_file.hpp.)
#pragma once

#include "exit_codes.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <span>
#include <string>
#include <utility>

namespace sparsesync::cli {

inline std::string errno_text(int e) { return std::strerror(e); }

// Throws failure(exit_usage) when `out` names the same file as `in` (same device and inode, so links and
// other spellings count): writing it would replace an input the command still reads.
inline void refuse_same_file(const std::string& out, const std::string& in, const std::string& out_role, const std::string& in_role) {
  struct stat a {}, b {};
  if (::stat(out.c_str(), &a) != 0 || ::stat(in.c_str(), &b) != 0) return;
  if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    throw failure(exit_usage, out_role + " " + out + " is the same file as " + in_role + " " + in + ": it would be replaced; choose another output");
}

class mapped_file {
 public:
  mapped_file() = default;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  mapped_file(mapped_file&& o) noexcept { swap(o); }
  mapped_file& operator=(mapped_file&& o) noexcept {
    swap(o);
    return *this;
  }
  ~mapped_file() {
    if (data_ && data_ != MAP_FAILED) ::munmap(data_, size_);
  }

  // Maps `path` read-only; `what` names the argument in errors ("BASE", "PATCH").
  static mapped_file open(const std::string& path, const std::string& what) {
    mapped_file m;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw failure(exit_io, "cannot open " + what + " '" + path + "': " + errno_text(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int e = errno;
      ::close(fd);
      throw failure(exit_io, "cannot stat " + what + " '" + path + "': " + errno_text(e));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw failure(exit_io, what + " '" + path + "' is not a regular file");
    }
    m.size_ = static_cast<std::size_t>(st.st_size);
    if (m.size_ > 0) {
      void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd);
        throw failure(exit_io, "cannot map " + what + " '" + path + "': " + errno_text(e));
      }
      ::madvise(p, m.size_, MADV_SEQUENTIAL);
      m.data_ = p;
    }
    ::close(fd);
    return m;
  }

  [[nodiscard]] std::span<const unsigned char> bytes() const { return {static_cast<const unsigned char*>(data_), size_}; }
  [[nodiscard]] std::size_t size() const { return size_; }

 private:
  void swap(mapped_file& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace sparsesync::cli
