// pull's version_sink: host_sink on the checkpoint image in memory, except for a full transfer into an image
// that holds nothing yet (a new worker's first pull), which goes to OUT's temporary file as it arrives.
//
// Each bucket of such a transfer is decoded and verified by host_sink into the image's range for it, with a
// page_window's warm pages lent there; the pages are then taken back, holding the bucket, and written to the
// file from there by sequential_writer (O_DIRECT where it can, on its own thread) while the next bucket is
// verified in another window. So the model is written once, from a few buckets' worth of memory, and the
// image is never faulted in: on the VMs measured, faulting a model's worth of fresh memory and copying it into
// the page cache cost more than the rest of the transfer (bench/results/full-transfer.md). Afterwards the
// image holds no version: a caller that goes on applying patches reads it back from the file (cmd_pull.cpp).
#pragma once

#include <sparsesync/cli/exit_codes.hpp>
#include <sparsesync/cli/page_window.hpp>
#include <sparsesync/cli/sequential_writer.hpp>
#include <sparsesync/sync/host_sink.hpp>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sparsesync::cli {

class pull_sink {
 public:
  explicit pull_sink(std::span<const tensor_view> buffers)
      : host_(buffers), buffers_(buffers.begin(), buffers.end()), pool_(std::make_unique<window_pool>()) {}

  // Full transfers from now on go to the file `fd` (named `path`), whose data area starts at `data_offset`,
  // until to_memory(). The image's views must lie in one private anonymous mapping, in layout order from
  // `image`, at the same offset within a page as in the file (for O_DIRECT).
  void to_file(int fd, const std::string& path, std::uint64_t data_offset, const unsigned char* image) {
    writer_.reset();
    writer_ = std::make_unique<sequential_writer>(fd, path, data_offset);
    image_ = image;
    data_offset_ = data_offset;
  }
  void to_memory() {
    writer_.reset();  // first: its queued writes hold windows
    pool_->clear();
  }
  // The last full transfer went to the file: the image holds nothing of it.
  [[nodiscard]] bool wrote_file() const noexcept { return wrote_file_; }

  void prepare(const model_layout& layout) { host_.prepare(layout); }
  std::uint64_t checksum() { return host_.checksum(); }
  void begin(bool full, std::optional<std::uint64_t> known_base) {
    filing_ = full && writer_;
    wrote_file_ = false;
    if (filing_) writer_->restart();
    host_.begin(full, known_base);
  }

  status add_bucket(std::span<const unsigned char> frame) {
    if (!filing_) return host_.add_bucket(frame);
    read_ranges(frame);
    tools::page_window* w = nullptr;
    if (!ranges_.empty()) {
      const auto [lo, hi] = span_of_ranges();
      w = pool_->acquire(static_cast<std::size_t>(hi - lo));
      if (!w->lend(lo, static_cast<std::size_t>(hi - lo))) {
        pool_->release(w);
        w = nullptr;
      }
    }
    status st;
    try {
      st = host_.add_bucket(frame);
    } catch (...) {
      if (w) {
        w->take_back();
        pool_->release(w);
      }
      throw;
    }
    if (w) w->take_back();  // the bucket's bytes now sit in the window's own pages
    if (st && ranges_.empty()) st = {errc::invalid_argument, "pull: a verified bucket's segments were not understood"};
    if (!st) {
      if (w) pool_->release(w);
      return st;
    }
    for (std::size_t i = 0; i < ranges_.size(); ++i) {
      const auto [p, n] = ranges_[i];
      const std::uint64_t at = data_offset_ + static_cast<std::uint64_t>(p - image_);
      // Without a window (the kernel refused the move) the bucket was decoded into the image's own pages.
      unsigned char* mem = w ? w->home_of(p) : p;
      window_pool* pool = pool_.get();
      writer_->write(mem, n, at, w && i + 1 == ranges_.size() ? std::function<void()>([pool, w] { pool->release(w); }) : nullptr);
    }
    wrote_file_ = true;
    return st;
  }

  status finish(const patch_header& h) { return host_.finish(h); }
  void commit() {
    host_.commit();
    if (filing_ && wrote_file_) writer_->finish();
  }
  void abort() { host_.abort(); }
  [[nodiscard]] std::uint64_t changed() const { return host_.changed(); }
  [[nodiscard]] std::uint64_t target_checksum() const { return host_.target_checksum(); }

 private:
  // Windows for the buckets in flight: one being verified, the ones before it being written.
  class window_pool {
   public:
    static constexpr std::size_t windows = 3;

    // A free window with room for `bytes` (waits for the writer to free one).
    tools::page_window* acquire(std::size_t bytes) {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return !free_.empty() || all_.size() < windows; });
      tools::page_window* w = nullptr;
      if (!free_.empty()) {
        w = free_.back();
        free_.pop_back();
      }
      if (w && w->capacity() >= bytes) return w;
      // Sized by the first bucket, replaced for a larger one (the sender picks the bucket size).
      if (w) std::erase_if(all_, [&](const auto& x) { return x.get() == w; });
      lock.unlock();
      auto fresh = std::make_unique<tools::page_window>(bytes);
      lock.lock();
      all_.push_back(std::move(fresh));
      return all_.back().get();
    }
    void release(tools::page_window* w) {
      {
        std::lock_guard lock(mutex_);
        free_.push_back(w);
      }
      cv_.notify_all();
    }
    void clear() {
      std::lock_guard lock(mutex_);
      free_.clear();
      all_.clear();
    }

   private:
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<std::unique_ptr<tools::page_window>> all_;
    std::vector<tools::page_window*> free_;
  };

  // The image ranges of the bucket's segments, read off its segment table (host_sink checks the frame; a
  // frame whose segments do not fit the image gets none, and is refused by host_sink).
  void read_ranges(std::span<const unsigned char> frame) {
    ranges_.clear();
    bucket_header h;
    if (!sparsesync::detail::read_bucket_header(frame, h) || (frame.size() - bucket_header_bytes) / segment_entry_bytes < h.segment_count) return;
    for (std::uint32_t s = 0; s < h.segment_count; ++s) {
      const unsigned char* p = frame.data() + bucket_header_bytes + segment_entry_bytes * s;
      const auto t = sparsesync::detail::load_le<std::uint32_t>(p);
      const auto offset = sparsesync::detail::load_le<std::uint64_t>(p + 8);
      const auto count = sparsesync::detail::load_le<std::uint64_t>(p + 16);
      if (t >= buffers_.size() || offset > buffers_[t].numel || count > buffers_[t].numel - offset) {
        ranges_.clear();
        return;
      }
      const std::size_t w = size_of(buffers_[t].dtype);
      ranges_.push_back({static_cast<unsigned char*>(buffers_[t].data) + offset * w, static_cast<std::size_t>(count * w)});
    }
  }
  [[nodiscard]] std::pair<unsigned char*, unsigned char*> span_of_ranges() const {
    unsigned char* lo = ranges_.front().first;
    unsigned char* hi = lo;
    for (const auto& [p, n] : ranges_) {
      lo = std::min(lo, p);
      hi = std::max(hi, p + n);
    }
    return {lo, hi};
  }

  sync::host_sink host_;
  std::vector<tensor_view> buffers_;
  std::unique_ptr<window_pool> pool_;
  std::unique_ptr<sequential_writer> writer_;  // after pool_: destroyed first (its queued writes hold windows)
  const unsigned char* image_ = nullptr;
  std::uint64_t data_offset_ = 0;
  bool filing_ = false;
  bool wrote_file_ = false;
  std::vector<std::pair<unsigned char*, std::size_t>> ranges_;
};

static_assert(sync::check_version_sink<pull_sink>);

}  // namespace sparsesync::cli
