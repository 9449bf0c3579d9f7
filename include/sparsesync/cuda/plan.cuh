// RAII plans: the host convenience layer over encode.cuh and apply.cuh. A plan owns its device scratch and
// keeps it across steps (allocation is stream-ordered: cudaMallocAsync / cudaFreeAsync on the plan's stream,
// and only when a larger size is needed). Plans throw sparsesync::cuda::cuda_error on CUDA failures and
// report payload problems as sparsesync::status, like the host reader.
//
// Host synchronization: encode_plan::wait() waits for its own encode (an event: encodes enqueued behind it
// keep running) and apply_plan::result() does one stream synchronization, each to read a 64-byte result;
// apply_plan::verify/commit/apply read a frame's counts from its host copy when the caller has one, else from
// the device (one synchronization per bucket) to size the staging list; everything else only enqueues work on
// the plan's stream (and, with apply_plan::set_lanes, on the lanes). The low-level functions (encode.cuh,
// apply.cuh) never synchronize.
#pragma once

#include <sparsesync/cuda/apply.cuh>
#include <sparsesync/cuda/cuda_error.hpp>
#include <sparsesync/cuda/encode.cuh>

#include <algorithm>
#include <array>
#include <cstring>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <span>
#include <string>
#include <utility>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace cuda {

// Stream-ordered device allocation that only grows.
class device_buffer {
 public:
  explicit device_buffer(cudaStream_t stream = nullptr) : stream_(stream) {}
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), size_(std::exchange(o.size_, 0)), stream_(o.stream_) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      size_ = std::exchange(o.size_, 0);
      stream_ = o.stream_;
    }
    return *this;
  }
  ~device_buffer() { release(); }

  // Makes room for `bytes` (old contents are lost when it grows). It grows by an eighth more than asked: scratch
  // sized by a version's changes varies a little from version to version, and each reallocation costs a free and
  // an allocation that the device's default pool may have to map again.
  void reserve(std::size_t bytes) {
    if (bytes <= size_) return;
    release();
    const std::size_t grown = bytes + bytes / 8;
    throw_on_cuda_error(cudaMallocAsync(&p_, grown, stream_), "cudaMallocAsync");
    size_ = grown;
  }
  [[nodiscard]] void* data() const noexcept { return p_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  void release() noexcept {
    if (p_) cudaFreeAsync(p_, stream_);
    p_ = nullptr;
    size_ = 0;
  }
  void* p_ = nullptr;
  std::size_t size_ = 0;
  cudaStream_t stream_ = nullptr;
};

template <class T>
class pinned {
 public:
  pinned() { throw_on_cuda_error(cudaMallocHost(&p_, sizeof(T)), "cudaMallocHost"); *p_ = T{}; }
  pinned(const pinned&) = delete;
  pinned& operator=(const pinned&) = delete;
  ~pinned() { cudaFreeHost(p_); }
  T* get() const noexcept { return p_; }

 private:
  T* p_ = nullptr;
};

// A CUDA event without timing, owned.
class plan_event {
 public:
  plan_event() { throw_on_cuda_error(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreate"); }
  plan_event(const plan_event&) = delete;
  plan_event& operator=(const plan_event&) = delete;
  plan_event(plan_event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  plan_event& operator=(plan_event&&) = delete;
  ~plan_event() {
    if (e_) cudaEventDestroy(e_);
  }
  [[nodiscard]] cudaEvent_t get() const noexcept { return e_; }

 private:
  cudaEvent_t e_{};
};

// The receiver's layout as device arrays (see device_layout).
class device_layout_storage {
 public:
  explicit device_layout_storage(const model_layout& layout, cudaStream_t stream = nullptr) : buf_(stream) {
    const std::size_t t = layout.size();
    std::vector<unsigned char> host(bytes_for(t));
    auto* numel = reinterpret_cast<std::uint64_t*>(host.data());
    auto* first = numel + t;
    auto* next = reinterpret_cast<std::uint32_t*>(first + t);
    auto* dt = reinterpret_cast<std::uint8_t*>(next + t);
    std::uint32_t following = static_cast<std::uint32_t>(t);
    for (std::size_t i = t; i-- > 0;) {
      numel[i] = layout[i].numel();
      first[i] = layout.first_element(i);
      dt[i] = static_cast<std::uint8_t>(layout[i].dtype);
      next[i] = following;
      if (numel[i] != 0) following = static_cast<std::uint32_t>(i);
    }
    buf_.reserve(host.size() ? host.size() : 1);
    throw_on_cuda_error(cudaMemcpyAsync(buf_.data(), host.data(), host.size(), cudaMemcpyHostToDevice, stream), "upload layout");
    throw_on_cuda_error(cudaStreamSynchronize(stream), "upload layout");
    auto* d = static_cast<unsigned char*>(buf_.data());
    view_.numel = reinterpret_cast<const std::uint64_t*>(d);
    view_.first_element = view_.numel + t;
    view_.next_nonempty = reinterpret_cast<const std::uint32_t*>(view_.first_element + t);
    view_.dtype = reinterpret_cast<const std::uint8_t*>(view_.next_nonempty + t);
    view_.tensor_count = static_cast<std::uint32_t>(t);
    view_.first_nonempty = following;
    view_.total_numel = layout.numel();
  }
  [[nodiscard]] const device_layout& view() const noexcept { return view_; }

 private:
  static std::size_t bytes_for(std::size_t t) { return t * (8 + 8 + 4 + 1); }
  device_buffer buf_;
  device_layout view_;
};

// Encodes one bucket, step after step, keeping its scratch, output and segment table on the device.
class encode_plan {
 public:
  // cfg.max_changes == 0 reserves scratch for numel / 32 changes; output_bytes == 0 reserves the largest frame
  // that many changes can make. Both grow on demand (encode_plan::wait).
  encode_plan(const model_layout& layout, const bucket_plan& bucket, const encode_config& cfg, cudaStream_t stream = nullptr,
              std::uint64_t output_bytes = 0)
      : cfg_(cfg), stream_(stream), segs_(stream), temp_(stream), out_(stream), result_dev_(stream) {
    const auto segs = make_device_segments(layout, bucket);
    segs_.reserve(segs.size() * sizeof(device_segment));
    throw_on_cuda_error(cudaMemcpyAsync(segs_.data(), segs.data(), segs.size() * sizeof(device_segment), cudaMemcpyHostToDevice, stream),
                        "upload segments");
    throw_on_cuda_error(cudaStreamSynchronize(stream), "upload segments");
    bucket_ = {bucket.dtype, static_cast<const device_segment*>(segs_.data()), static_cast<std::uint32_t>(segs.size()), bucket.numel()};
    result_dev_.reserve(sizeof(encode_result));
    throw_on_cuda_error(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
    if (cfg_.max_changes == 0) cfg_.max_changes = std::max<std::uint64_t>(bucket_.numel / 32, 4096);
    reserve(cfg_.max_changes, output_bytes);
  }

  encode_plan(const encode_plan&) = delete;
  encode_plan& operator=(const encode_plan&) = delete;
  ~encode_plan() { cudaEventDestroy(done_); }

  // Scratch for `max_changes` changes and an output of `out_bytes` (0: the worst case for that many changes).
  void reserve(std::uint64_t max_changes, std::uint64_t out_bytes = 0) {
    cfg_.max_changes = max_changes;
    std::size_t bytes = 0;
    throw_on_cuda_error(encode_bucket(nullptr, bytes, bucket_, nullptr, nullptr, nullptr, 0, nullptr, cfg_, stream_), "encode plan");
    temp_.reserve(bytes);
    temp_bytes_ = bytes;
    out_.reserve(out_bytes ? out_bytes : max_frame_bytes(bucket_, cfg_));
  }

  // The base checksum of the next encode: nullopt = compute it (reads every base element's hash), or a
  // value the caller vouches for (e.g. previous_target_checksum()): only changed elements are hashed.
  void set_known_base(std::optional<std::uint64_t> base) {
    cfg_.known_base = base.has_value();
    cfg_.base_checksum = base.value_or(0);
    reserve(cfg_.max_changes, out_.size());  // the two paths may tile differently
  }
  void set_bucket_index(std::uint32_t index) { cfg_.bucket_index = index; }
  // The snapshot advance inside the encode (encode_config::advance_base): each encode then leaves the base at the
  // target by itself (advance_base_async does nothing), with no second pass over the changes. A retry after a
  // too small scratch puts the old bits back first. The base must be writable; not with entropy.
  void fuse_advance(bool on) {
    cfg_.advance_base = on;
    reserve(cfg_.max_changes, out_.size());  // the old bits need scratch
  }
  // The passes after the read of the weights go to `rest` (cuda::encode_bucket's split form; null: all on the plan's
  // stream). The plan's stream waits for them after each encode, so what the caller enqueues there later (the
  // snapshot advance, the next encode) comes after the whole encode. `rest` must outlive the plan.
  void split_streams(cudaStream_t rest) {
    rest_ = rest == stream_ ? nullptr : rest;
    if (rest_ && !handoff_) handoff_ = std::make_unique<plan_event>();
  }
  // Brings each written frame's header (bucket_header_bytes) to pinned host memory with the result, so that a
  // caller who needs it (the engine announces device frames by it) pays no second synchronization per bucket.
  void keep_frame_head(bool on) {
    if (on && !head_) head_ = std::make_unique<pinned<std::array<unsigned char, bucket_header_bytes>>>();
    keep_head_ = on;
  }
  // After wait() (status ok, keep_frame_head): the frame's header, valid until the next encode of this plan.
  [[nodiscard]] std::span<const unsigned char> frame_head() const noexcept { return {head_->get()->data(), bucket_header_bytes}; }

  // Enqueues one encode (device arrays of tensor pointers, layout order); returns at once. Encodes of other
  // plans may be enqueued behind it on the same stream before this one's wait(): the GPU then never idles
  // between buckets while the host reads a result.
  void encode_async(const void* const* d_base, const void* const* d_target) {
    base_ = d_base;
    target_ = d_target;
    std::size_t bytes = temp_bytes_;
    throw_on_cuda_error(encode_bucket(temp_.data(), bytes, bucket_, d_base, d_target, static_cast<unsigned char*>(out_.data()),
                                      out_.size(), static_cast<encode_result*>(result_dev_.data()), cfg_, stream_, rest_,
                                      handoff_ ? handoff_->get() : nullptr),
                        "encode_bucket");
    read_result_async(rest_ ? rest_ : stream_);
  }

  // Waits for the encode (one event synchronization: work enqueued after it is not waited for) and returns
  // its result. If the scratch was too small
  // it grows and encodes again (reading the weights again); if only the output was too small it grows the
  // output and rewrites the frame from scratch (no second read of the weights).
  encode_result wait() {
    throw_on_cuda_error(cudaEventSynchronize(done_), "encode");
    encode_result r = *result_.get();
    if (r.status == static_cast<std::int32_t>(encode_status::scratch_too_small)) {
      if (cfg_.advance_base)  // the tiles that fit were advanced: back to the base this encode read, before the scratch goes
        throw_on_cuda_error(encode_bucket_undo_advance(temp_.data(), temp_bytes_, bucket_, cfg_, stream_), "encode_bucket_undo_advance");
      reserve(r.entries_needed + r.entries_needed / 4 + 4096, 0);
      encode_async(base_, target_);
      return wait();
    }
    if (r.status == static_cast<std::int32_t>(encode_status::output_too_small)) {
      out_.reserve(r.frame_bytes + r.frame_bytes / 4);
      throw_on_cuda_error(encode_bucket_write(temp_.data(), temp_bytes_, bucket_, static_cast<unsigned char*>(out_.data()), out_.size(),
                                              static_cast<encode_result*>(result_dev_.data()), cfg_, stream_),
                          "encode_bucket_write");
      read_result_async(stream_);
      return wait();
    }
    if (r.status != 0) throw cuda_error(cudaErrorUnknown, "encode: internal error (size and write passes disagree)");
    last_ = r;
    return r;
  }

  // After wait(): writes the changed elements' target bits into the base the encode read (enqueued on the
  // plan's stream), bringing it to the target without a dense copy. The base must be writable memory.
  // With fuse_advance(true) the encode did it already: nothing is enqueued.
  void advance_base_async() {
    if (last_.status != 0) throw error(errc::invalid_argument, "encode_plan: advance_base_async without a completed encode");
    throw_on_cuda_error(encode_bucket_advance_base(temp_.data(), temp_bytes_, bucket_, cfg_, stream_), "encode_bucket_advance_base");
  }

  encode_result encode(const void* const* d_base, const void* const* d_target) {
    encode_async(d_base, d_target);
    return wait();
  }

  [[nodiscard]] const unsigned char* frame() const noexcept { return static_cast<const unsigned char*>(out_.data()); }
  [[nodiscard]] std::size_t frame_bytes() const noexcept { return last_.frame_bytes; }
  [[nodiscard]] std::uint64_t previous_target_checksum() const noexcept { return last_.target_checksum; }
  [[nodiscard]] const encode_result* device_result() const noexcept { return static_cast<const encode_result*>(result_dev_.data()); }
  [[nodiscard]] std::size_t scratch_bytes() const noexcept { return temp_.size(); }
  [[nodiscard]] std::size_t output_capacity() const noexcept { return out_.size(); }
  [[nodiscard]] const device_bucket& bucket() const noexcept { return bucket_; }
  [[nodiscard]] const encode_config& config() const noexcept { return cfg_; }

 private:
  // On `s`, the stream the encode ended on; the plan's stream then waits for it (a no-op when it is that stream).
  void read_result_async(cudaStream_t s) {
    throw_on_cuda_error(cudaMemcpyAsync(result_.get(), result_dev_.data(), sizeof(encode_result), cudaMemcpyDeviceToHost, s), "read result");
    // (Stale bytes when the encode did not write its frame: frame_head() is read only after a complete one.)
    if (keep_head_)
      throw_on_cuda_error(cudaMemcpyAsync(head_->get()->data(), out_.data(), bucket_header_bytes, cudaMemcpyDeviceToHost, s),
                          "read frame head");
    throw_on_cuda_error(cudaEventRecord(done_, s), "cudaEventRecord");
    if (s != stream_) throw_on_cuda_error(cudaStreamWaitEvent(stream_, done_, 0), "cudaStreamWaitEvent");
  }

  encode_config cfg_;
  cudaStream_t stream_;
  cudaStream_t rest_ = nullptr;              // split_streams
  std::unique_ptr<plan_event> handoff_;      // the read pass done, for rest_
  cudaEvent_t done_{};
  device_buffer segs_, temp_, out_, result_dev_;
  std::size_t temp_bytes_ = 0;
  device_bucket bucket_;
  pinned<encode_result> result_;
  std::unique_ptr<pinned<std::array<unsigned char, bucket_header_bytes>>> head_;  // only when kept (a pinned allocation)
  bool keep_head_ = false;
  encode_result last_{};
  const void* const* base_ = nullptr;
  const void* const* target_ = nullptr;
};

// What apply_plan::result() reports.
struct gpu_apply_report {
  sparsesync::status status;
  std::uint32_t buckets = 0;    // verified
  std::uint32_t committed = 0;  // committed
  std::uint64_t numel = 0, changed = 0, base_checksum = 0, target_checksum = 0;
};

// Applies bucket frames in device memory to a model in device memory (device array of tensor pointers).
//   Bucket by bucket:        begin(); apply(f0); apply(f1); ...; result()
//   Whole patch, atomically: begin(); verify(f0..fn); check_patch(header); commit(f0..fn); result()
// In the atomic form each verified bucket keeps its own scratch (its parsed tables and decoded changes,
// 8 bytes per change) until the commit of the same frame, so a commit is only the scatter; the scratch stays
// allocated for the next patch. A commit that does not match the verify of the same index (another frame
// pointer or length) re-parses and re-decodes its frame first.
class apply_plan {
 public:
  explicit apply_plan(const model_layout& layout, const apply_config& cfg = {}, cudaStream_t stream = nullptr)
      : cfg_(cfg), stream_(stream), layout_(layout, stream), temp_(stream), state_(stream), undo_state_(stream) {
    state_.reserve(sizeof(apply_state));
    begin();
  }

  void begin() {
    verified_ = committed_ = 0;
    undo_log_.clear();
    throw_on_cuda_error(reset_apply_state(state(), layout_.view(), stream_), "reset_apply_state");
    if (!lanes_.empty()) {
      // Each lane's first verify of this patch waits for everything before it on the plan's stream (the last
      // patch's commits, this reset); after that the lanes wait on nothing of the plan's stream.
      throw_on_cuda_error(cudaEventRecord(begun_.get(), stream_), "cudaEventRecord");
      lane_started_.assign(lanes_.size(), false);
      lane_next_ = 0;
    }
  }

  // Verifies on `lanes` (streams of the plan's device, which must outlive the plan): bucket n of a patch verifies
  // on lanes[n % lanes.size()] beside the buckets before it, and only its join (index, tiling, verdict) and
  // its commit run on the plan's stream, in bucket order. One bucket's sequential decoders (rice, entropy: a
  // thread per chunk) leave most of the GPU idle for a fixed time per bucket; side by side those times overlap.
  // A frame uploaded on the plan's stream would wait there behind the joins of the buckets before it: upload it on
  // lane_for_next(). Empty (the default): every pass on the plan's stream. apply() (full transfers) stays there.
  void set_lanes(std::vector<cudaStream_t> lanes) {
    lanes_ = std::move(lanes);
    lane_done_.clear();
    ring_free_.clear();
    ring_.clear();
    for (std::size_t i = 0; i < lanes_.size(); ++i) {
      lane_done_.emplace_back();
      ring_free_.emplace_back();
      ring_.emplace_back(stream_);
    }
    lane_started_.assign(lanes_.size(), false);
    lane_next_ = 0;
    // As begin() does: the lanes start after what the plan's stream holds now (the patch begun, if any).
    if (!lanes_.empty()) throw_on_cuda_error(cudaEventRecord(begun_.get(), stream_), "cudaEventRecord");
  }
  // The stream the next verify() / apply_undoable() runs on (the plan's stream without lanes), ordered after the
  // patch's begin(): enqueue the upload of that bucket's frame there.
  cudaStream_t lane_for_next() {
    if (lanes_.empty()) return stream_;
    const std::size_t j = lane_next_ % lanes_.size();
    start_lane(j);
    return lanes_[j];
  }

  // `host_copy`: the same frame's bytes in host memory, or at least its header, when the caller has them (a frame
  // that arrived over a host transport, or a device link that copied its head): its counts are then read there,
  // without a device round trip per bucket.
  void verify(const unsigned char* d_frame, std::size_t frame_bytes, void* const* d_model, std::span<const unsigned char> host_copy = {}) {
    size_staging(d_frame, frame_bytes, host_copy);
    if (!lanes_.empty()) {
      kept_bucket& k = next_kept(d_frame, frame_bytes);
      verify_on_lane(k.temp, k.cfg, d_frame, frame_bytes, d_model);
      return;
    }
    verify_sized(d_frame, frame_bytes, d_model);
  }
  void commit(const unsigned char* d_frame, std::size_t frame_bytes, void* const* d_model) {
    if (committed_ < verified_ && kept_[committed_].frame == d_frame && kept_[committed_].bytes == frame_bytes) {
      kept_bucket& k = kept_[committed_++];
      throw_on_cuda_error(commit_bucket(k.temp.data(), k.temp.size(), layout_.view(), d_model, d_frame, frame_bytes, state(), k.cfg, true,
                                        stream_),
                          "commit_bucket");
      return;
    }
    committed_ = verified_;  // out of order: from here on every commit re-parses
    size_staging(d_frame, frame_bytes);
    grow(temp_, frame_bytes);
    throw_on_cuda_error(commit_bucket(temp_.data(), temp_.size(), layout_.view(), d_model, d_frame, frame_bytes, state(), cfg_, false, stream_),
                        "commit_bucket");
  }
  // commit() of a verified patch's frames, in bucket order. With lanes, buckets whose staging was kept since their
  // verify commit side by side, in turn on each lane (they write disjoint elements, and such a commit is one
  // scatter that counts itself): one after another on the plan's stream, each scatter's tail idled the GPU before
  // the next one started. The plan's stream waits for the lanes. Other frames: one by one, as commit().
  void commit(std::span<const std::pair<const unsigned char*, std::size_t>> frames, void* const* d_model) {
    const bool side_by_side = lanes_.size() > 1 && frames.size() > 1 && committed_ == 0 && frames.size() == verified_ &&
                              std::equal(frames.begin(), frames.end(), kept_.begin(),
                                         [](const auto& f, const kept_bucket& k) { return f.first == k.frame && f.second == k.bytes; });
    if (!side_by_side) {
      for (const auto& [frame, bytes] : frames) commit(frame, bytes, d_model);
      return;
    }
    const std::size_t n = std::min(lanes_.size(), frames.size());
    throw_on_cuda_error(cudaEventRecord(joined_.get(), stream_), "cudaEventRecord");  // after the verdict's join
    for (std::size_t j = 0; j < n; ++j) throw_on_cuda_error(cudaStreamWaitEvent(lanes_[j], joined_.get(), 0), "cudaStreamWaitEvent");
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const kept_bucket& k = kept_[i];
      throw_on_cuda_error(commit_bucket(k.temp.data(), k.temp.size(), layout_.view(), d_model, k.frame, k.bytes, state(), k.cfg, true,
                                        lanes_[i % n]),
                          "commit_bucket");
    }
    committed_ = verified_;
    for (std::size_t j = 0; j < n; ++j) {
      throw_on_cuda_error(cudaEventRecord(lane_done_[j].get(), lanes_[j]), "cudaEventRecord");
      throw_on_cuda_error(cudaStreamWaitEvent(stream_, lane_done_[j].get(), 0), "cudaStreamWaitEvent");
    }
  }
  // Verifies this bucket and, if nothing has failed so far, writes it (reusing the verify pass's staging).
  void apply(const unsigned char* d_frame, std::size_t frame_bytes, void* const* d_model, std::span<const unsigned char> host_copy = {}) {
    size_staging(d_frame, frame_bytes, host_copy);
    apply_sized(d_frame, frame_bytes, d_model);
  }
  // As apply(), and rollback() can then restore every element written since begin(). A ULP-coded frame
  // needs no extra memory (the rollback decodes it again and steps back); an absolute-coded one, and an entropy
  // one (its decode reads classes from the old weights, which the commit changed), keeps its own staging with the
  // old bits until begin() (8 bytes per change, 12 for 4-byte dtypes). The frames must
  // keep their bytes, at the same address, until begin().
  void apply_undoable(const unsigned char* d_frame, std::size_t frame_bytes, void* const* d_model, std::span<const unsigned char> host_copy = {}) {
    if (committed_ != verified_) throw error(errc::invalid_argument, "apply_plan: apply_undoable after an uncommitted verify");
    size_staging(d_frame, frame_bytes, host_copy);
    const bool redecodable = frame_mode_ == value_mode::ulp && cfg_.encoder != static_cast<std::uint8_t>(encoder_id::entropy);
    if (!lanes_.empty() && redecodable) {
      // The lane's own staging, reused by the lane's next bucket once this one's commit has read it.
      const std::size_t j = lane_next_ % lanes_.size();
      if (lane_next_ >= lanes_.size()) throw_on_cuda_error(cudaStreamWaitEvent(lanes_[j], ring_free_[j].get(), 0), "cudaStreamWaitEvent");
      const apply_config cfg = cfg_;
      verify_on_lane(ring_[j], cfg, d_frame, frame_bytes, d_model);
      throw_on_cuda_error(commit_bucket(ring_[j].data(), ring_[j].size(), layout_.view(), d_model, d_frame, frame_bytes, state(), cfg, true,
                                        stream_),
                          "commit_bucket");
      throw_on_cuda_error(cudaEventRecord(ring_free_[j].get(), stream_), "cudaEventRecord");
      undo_log_.push_back({d_frame, frame_bytes, no_kept});
      return;
    }
    if (!lanes_.empty()) {
      const bool keep_old = cfg_.keep_old;
      cfg_.keep_old = true;
      kept_bucket& k = next_kept(d_frame, frame_bytes);
      cfg_.keep_old = keep_old;
      verify_on_lane(k.temp, k.cfg, d_frame, frame_bytes, d_model);
      commit(d_frame, frame_bytes, d_model);
      undo_log_.push_back({d_frame, frame_bytes, committed_ - 1});
      return;
    }
    if (redecodable) {
      apply_sized(d_frame, frame_bytes, d_model);
      undo_log_.push_back({d_frame, frame_bytes, no_kept});
    } else {
      const bool keep_old = cfg_.keep_old;
      cfg_.keep_old = true;  // this bucket's kept config (k.cfg) carries it to the commit and the undo
      verify_sized(d_frame, frame_bytes, d_model);
      cfg_.keep_old = keep_old;
      commit(d_frame, frame_bytes, d_model);  // right after its verify: the kept staging is reused
      undo_log_.push_back({d_frame, frame_bytes, committed_ - 1});
    }
  }
  // Writes back the old bits of everything apply_undoable() wrote since begin(), last bucket first, and waits
  // for the stream. Buckets are written in order and none after the first refusal, so the written ones are
  // the first `committed` of the patch's verdict.
  void rollback(void* const* d_model) {
    const std::size_t written = std::min<std::size_t>(result().committed, undo_log_.size());
    for (std::size_t i = written; i-- > 0;) {
      const undo_entry& u = undo_log_[i];
      if (u.kept != no_kept) {
        const kept_bucket& k = kept_[u.kept];
        throw_on_cuda_error(undo_bucket(k.temp.data(), k.temp.size(), layout_.view(), d_model, k.frame, k.bytes, k.cfg, stream_), "undo_bucket");
        continue;
      }
      size_staging(u.frame, u.bytes);
      grow(temp_, u.bytes);
      if (undo_state_.size() < sizeof(apply_state)) undo_state_.reserve(sizeof(apply_state));
      auto* clean = static_cast<apply_state*>(undo_state_.data());
      throw_on_cuda_error(reset_apply_state(clean, layout_.view(), stream_), "reset_apply_state");
      throw_on_cuda_error(undo_bucket_by_redecode(temp_.data(), temp_.size(), layout_.view(), d_model, u.frame, u.bytes, clean, cfg_, stream_),
                          "undo_bucket_by_redecode");
      std::int32_t verdict[2] = {0, 0};  // detail::bucket_info starts with status, decode_status
      throw_on_cuda_error(cudaMemcpyAsync(verdict, temp_.data(), sizeof verdict, cudaMemcpyDeviceToHost, stream_), "read undo verdict");
      throw_on_cuda_error(cudaStreamSynchronize(stream_), "rollback");
      if (verdict[0] != 0 || verdict[1] != 0)
        throw error(static_cast<errc>(verdict[0] != 0 ? verdict[0] : verdict[1]), "apply_plan: a written bucket could not be decoded again to roll it back");
    }
    undo_log_.clear();
    throw_on_cuda_error(cudaStreamSynchronize(stream_), "rollback");
  }
  void check_patch(const patch_header& h, std::optional<std::uint64_t> known_base_checksum = std::nullopt) {
    known_ = known_base_checksum.value_or(0);
    throw_on_cuda_error(cuda::check_patch(state(), layout_.view(), h, known_base_checksum ? &known_ : nullptr, stream_), "check_patch");
  }

  // One stream synchronization: the verdict so far.
  gpu_apply_report result() {
    apply_state st{};
    throw_on_cuda_error(cudaMemcpyAsync(readback_.get(), state(), sizeof st, cudaMemcpyDeviceToHost, stream_), "read apply state");
    throw_on_cuda_error(cudaStreamSynchronize(stream_), "apply");
    std::memcpy(&st, readback_.get(), sizeof st);
    gpu_apply_report r{st.status != 0 ? sparsesync::status(static_cast<errc>(st.status),
                                                           "bucket " + std::to_string(st.failed_bucket) + " refused on the GPU")
                                      : sparsesync::status{},
                       st.buckets,
                       static_cast<std::uint32_t>(st.committed),
                       st.numel,
                       st.changed,
                       st.base_checksum,
                       st.target_checksum};
    return r;
  }

  [[nodiscard]] apply_state* state() const noexcept { return static_cast<apply_state*>(state_.data()); }
  [[nodiscard]] const device_layout& layout() const noexcept { return layout_.view(); }
  [[nodiscard]] std::size_t scratch_bytes() const noexcept {
    std::size_t b = temp_.size();
    for (const auto& k : kept_) b += k.temp.size();
    for (const auto& r : ring_) b += r.size();
    return b;
  }

 private:
  // verify() once size_staging() has read this frame's counts: into this bucket's own kept staging.
  void verify_sized(const unsigned char* d_frame, std::size_t frame_bytes, void* const* d_model) {
    if (kept_.size() <= verified_) kept_.emplace_back(stream_);
    kept_bucket& k = kept_[verified_++];
    grow(k.temp, frame_bytes);
    k.frame = d_frame;
    k.bytes = frame_bytes;
    k.cfg = cfg_;  // the scratch's carving depends on it: the commit must carve alike
    std::size_t b = k.temp.size();
    throw_on_cuda_error(verify_bucket(k.temp.data(), b, layout_.view(), d_model, d_frame, frame_bytes, state(), cfg_, stream_),
                        "verify_bucket");
  }

  // apply() once size_staging() has read this frame's counts.
  void apply_sized(const unsigned char* d_frame, std::size_t frame_bytes, void* const* d_model) {
    grow(temp_, frame_bytes);
    std::size_t b = temp_.size();
    throw_on_cuda_error(verify_bucket(temp_.data(), b, layout_.view(), d_model, d_frame, frame_bytes, state(), cfg_, stream_),
                        "verify_bucket");
    throw_on_cuda_error(commit_bucket(temp_.data(), temp_.size(), layout_.view(), d_model, d_frame, frame_bytes, state(), cfg_, true, stream_),
                        "commit_bucket");
  }

  static constexpr std::size_t no_kept = ~std::size_t{0};
  struct undo_entry {
    const unsigned char* frame;
    std::size_t bytes;
    std::size_t kept;  // index into kept_, or no_kept: undone by decoding the frame again (ULP-coded)
  };

  struct kept_bucket {
    explicit kept_bucket(cudaStream_t s) : temp(s) {}
    device_buffer temp;
    const unsigned char* frame = nullptr;
    std::size_t bytes = 0;
    apply_config cfg;
  };

  void start_lane(std::size_t j) {
    if (lane_started_[j]) return;
    throw_on_cuda_error(cudaStreamWaitEvent(lanes_[j], begun_.get(), 0), "cudaStreamWaitEvent");
    lane_started_[j] = true;
  }

  // The next verified bucket's kept staging, sized for this frame under the current cfg_.
  kept_bucket& next_kept(const unsigned char* d_frame, std::size_t frame_bytes) {
    if (kept_.size() <= verified_) kept_.emplace_back(stream_);
    kept_bucket& k = kept_[verified_++];
    k.frame = d_frame;
    k.bytes = frame_bytes;
    k.cfg = cfg_;
    return k;
  }

  // The verify of the next bucket on its lane into `buf` (grown here), joined on the plan's stream.
  void verify_on_lane(device_buffer& buf, const apply_config& cfg, const unsigned char* d_frame, std::size_t frame_bytes, void* const* d_model) {
    const std::size_t j = lane_next_++ % lanes_.size();
    cudaStream_t lane = lanes_[j];
    start_lane(j);
    const void* before = buf.data();
    const apply_config saved = cfg_;
    cfg_ = cfg;
    grow(buf, frame_bytes);
    cfg_ = saved;
    if (buf.data() != before) {  // allocated on the plan's stream (rare: the first versions): the lane waits for it
      throw_on_cuda_error(cudaEventRecord(grown_.get(), stream_), "cudaEventRecord");
      throw_on_cuda_error(cudaStreamWaitEvent(lane, grown_.get(), 0), "cudaStreamWaitEvent");
    }
    std::size_t b = buf.size();
    throw_on_cuda_error(verify_bucket_unordered(buf.data(), b, layout_.view(), d_model, d_frame, frame_bytes, state(), cfg, lane),
                        "verify_bucket_unordered");
    throw_on_cuda_error(cudaEventRecord(lane_done_[j].get(), lane), "cudaEventRecord");
    throw_on_cuda_error(cudaStreamWaitEvent(stream_, lane_done_[j].get(), 0), "cudaStreamWaitEvent");
    throw_on_cuda_error(join_verified_bucket(buf.data(), buf.size(), layout_.view(), d_model, d_frame, frame_bytes, state(), cfg, stream_),
                        "join_verified_bucket");
  }

  // Decoded changes are staged between verify and commit: reads the frame's value mode and its change and
  // chunk counts (header bytes 8..35, one stream synchronization) and keeps room for them. The counts are untrusted: they are
  // capped by what the frame could hold (one bit per change, 8 bytes per chunk entry) and by the layout; the
  // device checks them again and refuses a frame that lied.
  void size_staging(const unsigned char* d_frame, std::size_t frame_bytes, std::span<const unsigned char> host_copy = {}) {
    if (frame_bytes < bucket_header_bytes) return;
    unsigned char hm[28] = {};
    if (host_copy.size() >= bucket_header_bytes && host_copy.size() <= frame_bytes) {  // the frame, or its header
      std::memcpy(hm, host_copy.data() + 8, sizeof hm);
    } else {
      throw_on_cuda_error(cudaMemcpyAsync(readback_.get(), d_frame + 8, sizeof hm, cudaMemcpyDeviceToHost, stream_), "read frame counts");
      throw_on_cuda_error(cudaStreamSynchronize(stream_), "read frame counts");
      std::memcpy(hm, readback_.get(), sizeof hm);
    }
    // Untrusted like the counts: a frame whose header lies is refused by the device before anything is written.
    frame_mode_ = hm[1] == static_cast<unsigned char>(value_mode::ulp) ? value_mode::ulp : value_mode::absolute;
    // Only that encoder's decoders are launched; a frame whose header (on the device) names another is refused.
    cfg_.encoder = hm[0] >= 1 && hm[0] <= detail::device_encoder_count ? hm[0] : 0;
    const unsigned char* h = hm + 16;
    const std::uint64_t changed = std::min<std::uint64_t>({::sparsesync::detail::load_le<std::uint64_t>(h), 8ull * frame_bytes,
                                                           layout_.view().total_numel});
    const std::uint64_t chunks = std::min<std::uint64_t>(::sparsesync::detail::load_le<std::uint32_t>(h + 8), frame_bytes / 8);
    cfg_.max_changes = changed + changed / 8 + 64;
    cfg_.max_chunks = chunks + 1;
  }

  // Room in `buf` for the scratch of a frame of `frame_bytes` under the current cfg_.
  void grow(device_buffer& buf, std::size_t frame_bytes) {
    std::size_t b = 0;
    throw_on_cuda_error(verify_bucket(nullptr, b, layout_.view(), nullptr, nullptr, frame_bytes, nullptr, cfg_, stream_), "apply plan");
    buf.reserve(b);
  }

  apply_config cfg_;
  cudaStream_t stream_;
  device_layout_storage layout_;
  device_buffer temp_, state_;
  std::vector<kept_bucket> kept_;  // per verified bucket of the current patch, reused by the next
  std::size_t verified_ = 0, committed_ = 0;
  std::vector<undo_entry> undo_log_;  // buckets given to apply_undoable() since begin(), in order
  // Lanes (set_lanes): the caller's streams, an event per lane for its last verify and for its staging's last
  // commit (ring_: a lane's staging for redecodable streamed buckets), and the patch's start.
  std::vector<cudaStream_t> lanes_;
  std::vector<plan_event> lane_done_, ring_free_;
  std::vector<device_buffer> ring_;
  std::vector<bool> lane_started_;
  std::size_t lane_next_ = 0;  // buckets given to the lanes since begin()
  plan_event begun_, grown_, joined_;  // (joined_: commit of a whole patch, its lanes start after the verdict)
  device_buffer undo_state_;         // a clean apply_state for undo_bucket_by_redecode
  // Small device-to-host reads (frame counts, the verdict) land in pinned memory: a copy to pageable memory
  // would block in the driver, holding up other threads' launches on the same context meanwhile.
  pinned<std::array<unsigned char, 64>> readback_;
  static_assert(sizeof(apply_state) <= 64, "sparsesync: apply_plan reads the apply state back through a 64-byte pinned buffer");
  value_mode frame_mode_ = value_mode::absolute;  // of the frame size_staging() read last (its encoder: cfg_.encoder)
  std::uint64_t known_ = 0;
};

}  // namespace cuda
SPARSESYNC_NS_END
