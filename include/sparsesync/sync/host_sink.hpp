// host_sink: the version_sink for weights in host memory. A patch is staged bucket by bucket (each bucket
// verified against the worker's memory) and written only once the whole version verified; a full transfer is
// written while the worker holds no version, each chunk's elements as soon as they decode (nothing to protect:
// memory holds one chunk's changes, not 16 bytes per element of a bucket; a dense bitmap bucket is copied into
// the buffers without a change list at all), or bucket by bucket where a write hook wants each bucket's changes.
#pragma once

#include <sparsesync/core/model_checksum.hpp>
#include <sparsesync/format/apply.hpp>
#include <sparsesync/sync/version_sink.hpp>

#include <functional>
#include <optional>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace sync {

class host_sink {
 public:
  // Gets the changes each write made (after commit(); for a full transfer, after each bucket).
  using write_hook = std::function<void(const std::vector<staged_change>&)>;

  explicit host_sink(std::span<const tensor_view> buffers) : buffers_(buffers.begin(), buffers.end()) {}

  void prepare(const model_layout& layout) {
    layout_ = &layout;
    throw_if_error(check_views(layout, std::span<const tensor_view>(buffers_), "receiver buffers"));
  }
  void on_write(write_hook hook) { hook_ = std::move(hook); }

  std::uint64_t checksum() { return model_checksum(*layout_, std::vector<const_tensor_view>(buffers_.begin(), buffers_.end())); }

  void begin(bool full, std::optional<std::uint64_t> known_base) {
    full_ = full;
    changed_ = 0;
    current_.assign(buffers_.begin(), buffers_.end());
    streaming_ = full && !hook_;
    if (full) {
      // Streamed, every bucket is written whole (write_full_into): no zero-fill of the model first.
      if (!streaming_) zero_fill(buffers_);
      for (auto& v : current_) v.data = nullptr;
    }
    apply_options opt;
    if (!full) opt.known_base_checksum = known_base;  // touch only changed elements
    staged_.emplace(*layout_, current_, opt);
    staged_->reuse_storage(std::move(storage_));
    if (streaming_) {
      staged_->stream_to([this](std::uint64_t, std::span<const staged_change> changes) { sparsesync::detail::write_changes(buffers_, changes); });
      staged_->write_full_into(buffers_);
    }
  }

  status add_bucket(std::span<const unsigned char> frame) {
    std::size_t used = 0;
    status st = staged_->add_bucket(frame, used);
    if (st && used != frame.size()) st = {errc::malformed, "bucket message has trailing bytes"};
    if (st && streaming_) {
      changed_ = staged_->changed();  // written as decoded; counts every bucket so far
    } else if (st && full_) {
      changed_ += staged_->changed();
      if (hook_) hook_(staged_->changes());
      staged_->commit_and_clear(buffers_);
    }
    return st;
  }

  status finish(const patch_header& h) { return staged_->finish(h); }

  void commit() {
    if (!full_) {
      changed_ = staged_->changed();
      staged_->commit(buffers_);
      if (hook_) hook_(staged_->changes());
    }
    target_ = staged_->target_checksum();
    release();
  }

  // Nothing of a refused patch was written; a refused full transfer leaves no version (the receiver says so).
  void abort() { release(); }

  [[nodiscard]] std::uint64_t changed() const { return changed_; }
  [[nodiscard]] std::uint64_t target_checksum() const { return target_; }
  [[nodiscard]] std::span<const tensor_view> buffers() const { return buffers_; }

 private:
  void release() {
    if (staged_) storage_ = std::move(*staged_).take_storage();  // kept for its capacity
    staged_.reset();
  }

  const model_layout* layout_ = nullptr;
  std::vector<tensor_view> buffers_;
  std::vector<const_tensor_view> current_;
  std::optional<staged_patch> staged_;
  std::vector<staged_change> storage_;
  write_hook hook_;
  bool full_ = false;
  bool streaming_ = false;  // a full transfer written chunk by chunk
  std::uint64_t changed_ = 0, target_ = 0;
};

static_assert(check_version_sink<host_sink>);

}  // namespace sync
SPARSESYNC_NS_END
