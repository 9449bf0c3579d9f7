// Writes a checkpoint's data area to its file in order, piece by piece, on a thread of its own. Whole 4 KiB
// blocks go with O_DIRECT where the filesystem takes it: straight from the caller's memory to the device,
// through no page cache.
//
// Why: on the VMs measured (bench/results/full-transfer.md) memory the kernel has not used lately costs the
// hypervisor a fault per page on first touch, and a model-sized file written through the page cache needs a
// model's worth of it: 1.2-3.6 s per GiB, against 0.85 s for the same bytes with O_DIRECT (and no fsync left
// to wait for). Those writes block, hence the thread: the next bucket is verified meanwhile. The partial
// blocks at either end (the one the header shares, the last one), pieces out of order and every piece on a
// filesystem without O_DIRECT are written with plain pwrite().
#pragma once

#include <sparsesync/cli/exit_codes.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sparsesync::cli {

class sequential_writer {
 public:
  static constexpr std::uint64_t block = 4096;

  // `fd`: the file, open for writing; `path` its name (opened again with O_DIRECT where possible); the data
  // area starts at file offset `data_offset`.
  sequential_writer(int fd, const std::string& path, std::uint64_t data_offset) : fd_(fd), data_offset_(data_offset) {
    direct_fd_ = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
    thread_ = std::thread([this] { run(); });
  }
  sequential_writer(const sequential_writer&) = delete;
  sequential_writer& operator=(const sequential_writer&) = delete;
  ~sequential_writer() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();  // after the queued writes (their memory is the caller's until their `done` ran)
    if (direct_fd_ >= 0) ::close(direct_fd_);
  }

  // From the start of the data area again (a new version); waits for the writes queued so far.
  void restart() {
    wait_idle();
    next_ = data_offset_;
    carry_.clear();
    in_order_ = true;
  }

  // Queues the `n` bytes at `mem` for file offset `at`, and then `done()` (on the writer thread, once they are
  // written or failed): until then the memory [mem - at % 4096, mem + n) is the writer's, and the bytes before
  // `mem` in that range may be overwritten (with the held tail of the previous piece, so that a block goes
  // whole). Throws the error of an earlier write, if any.
  void write(unsigned char* mem, std::size_t n, std::uint64_t at, std::function<void()> done) {
    rethrow_error();
    job j;
    j.done = std::move(done);
    plan(mem, n, at, j);
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(j));
    }
    cv_.notify_all();
  }

  // Waits for every queued write and writes the held partial block: the data area is complete on the file.
  void finish() {
    wait_idle();
    if (!carry_.empty()) write_all(fd_, carry_.data(), carry_.size(), carry_at_);
    carry_.clear();
    rethrow_error();
  }

 private:
  struct piece {
    const unsigned char* p = nullptr;
    std::size_t n = 0;
    std::uint64_t at = 0;
    bool direct = false;
    std::vector<unsigned char> own;  // the bytes, when they are not the caller's (a held tail)
  };
  struct job {
    std::vector<piece> pieces;
    std::function<void()> done;
  };

  // Splits [at, at + n) into pieces: blocks before the first whole one and pieces out of order plain, whole
  // blocks direct (starting with the tail held from the previous piece), the last partial block held back.
  void plan(unsigned char* mem, std::size_t n, std::uint64_t at, job& j) {
    if (n == 0) return;
    const std::uint64_t end = at + n;
    const bool aligned = (reinterpret_cast<std::uintptr_t>(mem) - at) % block == 0;
    if (direct_fd_ < 0 || !aligned || !in_order_ || at != next_) {
      if (!carry_.empty()) {
        piece held;
        held.n = carry_.size();
        held.at = carry_at_;
        held.own = std::move(carry_);
        j.pieces.push_back(std::move(held));
      }
      carry_.clear();
      in_order_ = false;
      j.pieces.push_back({mem, n, at, false, {}});
      return;
    }
    const std::uint64_t direct_from = (data_offset_ + block - 1) / block * block;  // the header's block goes plain
    std::uint64_t from = at;
    if (from < direct_from) {
      const std::uint64_t plain_end = std::min(end, direct_from);
      j.pieces.push_back({mem, static_cast<std::size_t>(plain_end - from), from, false, {}});
      from = plain_end;
    }
    if (from < end) {
      const std::uint64_t a = from / block * block;
      unsigned char* const base = mem - static_cast<std::ptrdiff_t>(at - a);  // memory of file offset a (a <= at)
      const auto mem_of = [&](std::uint64_t x) { return base + (x - a); };
      if (a < from) {  // the block's start is the previous piece's tail, held back
        if (carry_at_ != a || carry_.size() != from - a) throw failure(exit_internal, "pull: the file's pieces lost their order");
        std::memcpy(base, carry_.data(), carry_.size());
      }
      const std::uint64_t b = end / block * block;
      if (b > a) j.pieces.push_back({base, static_cast<std::size_t>(b - a), a, true, {}});
      carry_.assign(mem_of(b), mem_of(end));  // [b, end): less than a block
      carry_at_ = b;
    }
    next_ = end;
  }

  void run() {
    for (;;) {
      job j;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        j = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      try {
        for (const auto& pc : j.pieces) {
          const unsigned char* src = pc.own.empty() ? pc.p : pc.own.data();
          if (pc.direct) write_direct(src, pc.n, pc.at);
          else write_all(fd_, src, pc.n, pc.at);
        }
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      if (j.done) j.done();
      {
        std::lock_guard lock(mutex_);
        busy_ = false;
      }
      cv_.notify_all();
    }
  }

  void write_direct(const unsigned char* p, std::size_t n, std::uint64_t at) {
    if (!write_all(direct_fd_, p, n, at, /*may_refuse=*/true)) {  // O_DIRECT refused after all: plain from now on
      write_all(fd_, p, n, at);
      std::lock_guard lock(mutex_);
      refused_direct_ = true;
    }
  }

  void wait_idle() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
    if (refused_direct_ && direct_fd_ >= 0) {
      ::close(direct_fd_);
      direct_fd_ = -1;
    }
  }

  void rethrow_error() {
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
  }

  // False when `may_refuse` and the first write is refused as invalid (O_DIRECT on an unsuitable device).
  static bool write_all(int fd, const unsigned char* p, std::size_t n, std::uint64_t at, bool may_refuse = false) {
    bool first = true;
    while (n > 0) {
      const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(at));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EINVAL && may_refuse && first) return false;
      first = false;
      if (w <= 0) throw failure(exit_io, std::string("cannot write OUT: ") + (w < 0 ? std::strerror(errno) : "short write"));
      p += w;
      n -= static_cast<std::size_t>(w);
      at += static_cast<std::uint64_t>(w);
    }
    return true;
  }

  const int fd_;
  int direct_fd_ = -1;
  const std::uint64_t data_offset_;
  // Planning, on the caller's thread.
  std::uint64_t next_ = 0;            // file offset where the next piece starts, in order
  std::vector<unsigned char> carry_;  // bytes [carry_at_, next_) of a block not yet written
  std::uint64_t carry_at_ = 0;
  bool in_order_ = true;
  // The writer thread.
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<job> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  bool refused_direct_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace sparsesync::cli
