// A few MiB of memory whose pages are already faulted in, lent to one range at a time of a large anonymous
// mapping that is otherwise never touched (mremap moves the pages themselves: no copy, no fault).
//
// Why: on the VMs measured (bench/results/full-transfer.md), the first touch of fresh memory, a model's worth
// of it, costs more than receiving and verifying the model (0.4-2.5 s per GiB, most of it the hypervisor
// backing the pages). pull writes a full transfer to OUT's file bucket by bucket: each bucket is decoded into
// the image's range for it, with these pages lent there, written to the file, and the pages taken back for
// the next bucket. The image's range is left fresh (it reads as zeros, and holds no version).
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/error.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

SPARSESYNC_NS_BEGIN
namespace tools {

class page_window {
#ifdef MREMAP_DONTUNMAP
  static constexpr int dont_unmap = MREMAP_DONTUNMAP;
#else
  static constexpr int dont_unmap = 4;  // Linux's value; older headers lack the name
#endif

 public:
  // Room for any range of `bytes` bytes, wherever it starts.
  explicit page_window(std::size_t bytes) : page_(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))) {
    capacity_ = (bytes + page_ - 1) / page_ * page_ + page_;
    void* p = ::mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw error(errc::io, std::string("page window: mmap failed: ") + std::strerror(errno));
    base_ = static_cast<unsigned char*>(p);
  }
  page_window(page_window&& o) noexcept
      : page_(o.page_), capacity_(std::exchange(o.capacity_, 0)), base_(std::exchange(o.base_, nullptr)), lent_(std::exchange(o.lent_, nullptr)),
        last_lent_(o.last_lent_), lent_bytes_(std::exchange(o.lent_bytes_, 0)) {}
  page_window(const page_window&) = delete;
  page_window& operator=(const page_window&) = delete;
  page_window& operator=(page_window&&) = delete;
  ~page_window() {
    if (lent_) {
      try {
        take_back();
      } catch (...) {
      }
    }
    if (base_) ::munmap(base_, capacity_);
  }

  [[nodiscard]] bool lent() const noexcept { return lent_ != nullptr; }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  // After take_back(): where the byte that was at `p` (in the range last lent) is now.
  [[nodiscard]] unsigned char* home_of(const unsigned char* p) const noexcept { return base_ + (p - last_lent_); }

  // Moves the window's pages onto the pages that hold [p, p + n), which must lie inside a private anonymous
  // mapping of the caller's: what was there is dropped. False (nothing moved) when the range needs more
  // pages than the window has, or when the kernel refuses the move (MREMAP_DONTUNMAP needs Linux 5.7); the
  // range then faults in as usual.
  //
  // Every move keeps both ranges mapped (MREMAP_DONTUNMAP, and mmap MAP_FIXED over a mapping): a range left
  // unmapped even for a moment could be taken by another thread's mmap, and then overwritten by ours.
  bool lend(unsigned char* p, std::size_t n) {
    if (lent_ || n == 0) return false;
    const auto first = reinterpret_cast<std::uintptr_t>(p) / page_ * page_;
    const auto end = (reinterpret_cast<std::uintptr_t>(p) + n + page_ - 1) / page_ * page_;
    const std::size_t len = end - first;
    if (len > capacity_) return false;
    void* to = reinterpret_cast<void*>(first);
    if (::mremap(base_, len, len, MREMAP_MAYMOVE | MREMAP_FIXED | dont_unmap, to) == MAP_FAILED) return false;
    lent_ = static_cast<unsigned char*>(to);
    last_lent_ = lent_;
    lent_bytes_ = len;
    return true;
  }

  // Moves the pages back; the range they covered becomes fresh anonymous memory again.
  void take_back() {
    if (!lent_) return;
    unsigned char* at = lent_;
    const std::size_t len = lent_bytes_;
    if (::mremap(at, len, len, MREMAP_MAYMOVE | MREMAP_FIXED | dont_unmap, base_) == MAP_FAILED)
      throw error(errc::io, std::string("page window: mremap back failed: ") + std::strerror(errno));
    lent_ = nullptr;
    lent_bytes_ = 0;
    // A fresh mapping over the emptied range (atomically) lets it merge with its neighbours again: otherwise
    // each move would leave one more mapping behind, up to the kernel's limit on their number.
    (void)::mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  }

 private:
  std::size_t page_;
  std::size_t capacity_ = 0;
  unsigned char* base_ = nullptr;
  unsigned char* lent_ = nullptr;
  const unsigned char* last_lent_ = nullptr;
  std::size_t lent_bytes_ = 0;
};

}  // namespace tools
SPARSESYNC_NS_END
