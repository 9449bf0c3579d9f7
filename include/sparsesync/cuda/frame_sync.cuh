// GPU-resident sync over a channel of device frames: the trainer's GPU encodes each bucket and sends its
// frame while it encodes the next one; every worker's GPU verifies the frames and applies them in place.
// Channels: NCCL broadcast (nccl_sync.cuh) or any sparsesync transport through host memory
// (transport_frame_channel.cuh).
//
// On the channel, one version is: its bucket frames (FORMAT.md section 3), then the 88-byte patch header with
// the whole-model checksums, which ends the version. Workers check the header against the buckets and against
// the checksum of the version they hold before anything is written (atomic mode), so a worker that missed a
// version, or holds other weights, refuses the next one instead of corrupting itself.
#pragma once

#include <sparsesync/cuda/codec.cuh>
#include <sparsesync/format/wire.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace cuda {

// A type C is a `device_frame_channel` when (all calls on the channel's own CUDA stream, in the same order on
// every rank):
//  1. `c.is_root()` (const) tells whether this rank sends;
//  2. the root's `c.send(const void* device_data, std::size_t bytes)` enqueues one frame of device memory; the
//     bytes must stay valid and unchanged until the channel's stream has passed the send;
//  3. the root's `c.close()` ends the stream of frames;
//  4. the others' `c.receive_size()` -> std::optional<std::size_t> blocks for the next frame's length, or
//     returns nothing once the root closed;
//  5. the others' `c.receive_payload(void* device_data)` enqueues that frame's landing in device memory (at
//     least the announced length) on the channel's stream.
template <class C>
concept device_frame_channel = requires(C& c, const C& cc, const void* src, void* dst, std::size_t n) {
  { cc.is_root() } -> std::convertible_to<bool>;
  c.send(src, n);
  c.close();
  { c.receive_size() } -> std::same_as<std::optional<std::size_t>>;
  c.receive_payload(dst);
};

namespace detail {
template <class C>
struct device_frame_channel_diagnostics {
  static_assert(requires(const C& c) { { c.is_root() } -> std::convertible_to<bool>; },
                "sparsesync: a device frame channel needs `bool is_root() const;`");
  static_assert(requires(C& c, const void* p, std::size_t n) { c.send(p, n); },
                "sparsesync: a device frame channel needs `void send(const void* device_data, std::size_t bytes);`");
  static_assert(requires(C& c) { c.close(); }, "sparsesync: a device frame channel needs `void close();`");
  static_assert(requires(C& c) { { c.receive_size() } -> std::same_as<std::optional<std::size_t>>; },
                "sparsesync: a device frame channel needs `std::optional<std::size_t> receive_size();`");
  static_assert(requires(C& c, void* p) { c.receive_payload(p); },
                "sparsesync: a device frame channel needs `void receive_payload(void* device_data);`");
  static constexpr bool value = device_frame_channel<C>;
};
}  // namespace detail

// `static_assert(check_device_frame_channel<C>)` explains what C lacks.
template <class C>
inline constexpr bool check_device_frame_channel = detail::device_frame_channel_diagnostics<C>::value;


struct frame_publish_stats {
  std::uint64_t version = 0;
  std::uint64_t changed = 0;
  std::uint64_t payload_bytes = 0;  // bucket frames + header, sent once on the channel
  std::uint64_t target_checksum = 0;
  double encode_ms = 0;             // from publish() until the last bucket was encoded (broadcasts overlap it)
};

// Trainer side. `channel` is rooted at this rank; `stream` computes; `channel_stream` is the stream the channel
// was built with (encoding bucket i + 1 on `stream` overlaps the transfer of bucket i on `channel_stream`).
template <class Channel>
class frame_publisher {
  static_assert(check_device_frame_channel<Channel>);

 public:
  frame_publisher(const model_layout& layout, std::vector<bucket_plan> plans, encode_config cfg, Channel& channel,
                 cudaStream_t stream, cudaStream_t channel_stream, double expected_density = 0.02)
      : layout_(layout), plans_(std::move(plans)), channel_(channel), stream_(stream), channel_stream_(channel_stream), header_dev_(stream) {
    if (!channel.is_root()) throw error(errc::invalid_argument, "frame_publisher: the channel must be rooted at this rank");
    throw_on_cuda_error(cudaStreamCreateWithFlags(&aux_, cudaStreamNonBlocking), "cudaStreamCreate");
    throw_on_cuda_error(cudaEventCreateWithFlags(&start_, cudaEventDisableTiming), "cudaEventCreate");
    for (std::size_t i = 0; i < plans_.size(); ++i) {
      cfg.bucket_index = static_cast<std::uint32_t>(i);
      cfg.max_changes = static_cast<std::uint64_t>(static_cast<double>(plans_[i].numel()) * expected_density) + 65536;
      encoders_.push_back(std::make_unique<encode_plan>(layout, plans_[i], cfg, i % 2 ? aux_ : stream));
    }
    header_dev_.reserve(patch_header_bytes);
    throw_on_cuda_error(cudaMallocHost(&header_host_, patch_header_bytes), "cudaMallocHost");
  }
  frame_publisher(const frame_publisher&) = delete;
  frame_publisher& operator=(const frame_publisher&) = delete;
  ~frame_publisher() {
    cudaFreeHost(header_host_);
    encoders_.clear();  // their buffers are freed on aux_ before it goes
    cudaStreamSynchronize(aux_);
    cudaEventDestroy(start_);
    cudaStreamDestroy(aux_);
  }

  // Sends the change from `d_snapshot` (what the workers hold) to `d_weights` as `version`. Device arrays of
  // tensor pointers in layout order. Afterwards call update_snapshot() before the next publish().
  frame_publish_stats publish(std::uint64_t version, const void* const* d_snapshot, const void* const* d_weights) {
    frame_publish_stats st;
    st.version = version;
    patch_header h;
    h.bucket_count = static_cast<std::uint32_t>(plans_.size());
    h.layout_hash = layout_.hash();
    h.base_version = version_;
    h.target_version = version;
    h.numel = layout_.numel();
    // Bucket i + 1 is enqueued before the host waits for bucket i, and consecutive buckets alternate between
    // `stream` and a second stream: the GPU never idles while the host reads a frame's size, and one bucket's
    // short closing kernels (sizes, scans, writes) run beside the next bucket's pass over the weights.
    // Whatever the caller ordered before `stream` (the weights' last write) is ordered before both.
    throw_on_cuda_error(cudaEventRecord(start_, stream_), "cudaEventRecord");
    throw_on_cuda_error(cudaStreamWaitEvent(aux_, start_, 0), "cudaStreamWaitEvent");
    const auto enqueue = [&](std::size_t i) {
      // After the first version the snapshot's bucket checksums are known: only changed elements are hashed.
      encoders_[i]->set_known_base(known_ ? std::optional<std::uint64_t>(bucket_targets_[i]) : std::nullopt);
      encoders_[i]->encode_async(d_snapshot, d_weights);
    };
    const auto t0 = std::chrono::steady_clock::now();
    if (!encoders_.empty()) enqueue(0);
    for (std::size_t i = 0; i < encoders_.size(); ++i) {
      auto& enc = *encoders_[i];
      if (i + 1 < encoders_.size()) enqueue(i + 1);
      const auto r = enc.wait();  // the frame is complete afterwards
      if (i + 1 == encoders_.size()) st.encode_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (bucket_targets_.size() < encoders_.size()) bucket_targets_.resize(encoders_.size());
      bucket_targets_[i] = r.target_checksum;
      h.base_checksum += r.base_checksum;
      h.target_checksum += r.target_checksum;
      st.changed += r.changed;
      st.payload_bytes += r.frame_bytes;
      channel_.send(enc.frame(), r.frame_bytes);  // overlaps the next bucket's encode
    }
    sparsesync::detail::write_patch_header(header_host_, h);
    // The channel's stream orders this copy before the broadcast that reads it.
    throw_on_cuda_error(cudaMemcpyAsync(header_dev_.data(), header_host_, patch_header_bytes, cudaMemcpyHostToDevice, channel_stream_),
                        "upload patch header");
    channel_.send(header_dev_.data(), patch_header_bytes);
    // The version is on the wire once every rank took part; the frames and the header buffer may then be reused.
    throw_on_cuda_error(cudaStreamSynchronize(channel_stream_), "broadcast");
    st.payload_bytes += patch_header_bytes;
    st.target_checksum = h.target_checksum;
    known_ = true;
    version_ = version;
    return st;
  }

  // Brings the snapshot to the version just published by applying the same frames (verified), touching only
  // changed elements. Not on the workers' critical path: call it any time before the next publish().
  void update_snapshot(void* const* d_snapshot) {
    if (!snapshot_applier_) {
      apply_config cfg;
      cfg.known_base = true;
      snapshot_applier_ = std::make_unique<apply_plan>(layout_, cfg, stream_);
    }
    snapshot_applier_->begin();
    for (auto& enc : encoders_) snapshot_applier_->apply(enc->frame(), enc->frame_bytes(), d_snapshot);
    const auto r = snapshot_applier_->result();
    if (!r.status) throw error(r.status);
  }

  // Ends the stream: subscribers' next() returns nothing.
  void close() { channel_.close(); }

 private:
  const model_layout& layout_;
  std::vector<bucket_plan> plans_;
  Channel& channel_;
  cudaStream_t stream_, channel_stream_;
  cudaStream_t aux_{};     // odd buckets are encoded here
  cudaEvent_t start_{};
  std::vector<std::unique_ptr<encode_plan>> encoders_;
  std::unique_ptr<apply_plan> snapshot_applier_;
  std::vector<std::uint64_t> bucket_targets_;
  device_buffer header_dev_;
  unsigned char* header_host_ = nullptr;
  bool known_ = false;
  std::uint64_t version_ = 0;
};

struct frame_received_version {
  std::uint64_t version = 0;
  std::uint64_t changed = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t checksum = 0;  // content checksum of the weights now held
};

// Worker side. `stream` computes; `channel_stream` is the stream the channel was built with.
template <class Channel>
class frame_subscriber {
  static_assert(check_device_frame_channel<Channel>);

 public:
  enum class commit_mode {
    atomic,    // verify every bucket and the header, then write: readers never see a mix of versions
    streamed,  // verify and write bucket by bucket as frames arrive (each bucket verified before it is
               // written; a refused version leaves earlier buckets of it written): for paused engines
  };

  // `held_checksum`: the content checksum of the weights the worker starts from (e.g. the publisher's target
  // checksum of the version it was initialised with); without it the first version re-hashes every bucket.
  frame_subscriber(const model_layout& layout, Channel& channel, cudaStream_t stream, cudaStream_t channel_stream,
                  commit_mode mode = commit_mode::atomic, std::optional<std::uint64_t> held_checksum = std::nullopt)
      : layout_(layout), channel_(channel), stream_(stream), channel_stream_(channel_stream), mode_(mode), held_(held_checksum) {
    if (channel.is_root()) throw error(errc::invalid_argument, "frame_subscriber: this rank is the channel's root");
    throw_on_cuda_error(cudaEventCreateWithFlags(&arrived_, cudaEventDisableTiming), "cudaEventCreate");
    make_applier();
  }
  frame_subscriber(const frame_subscriber&) = delete;
  frame_subscriber& operator=(const frame_subscriber&) = delete;
  ~frame_subscriber() {
    cudaEventDestroy(arrived_);
    if (arena_) cudaFree(arena_);
  }

  // Receives one version into `d_weights` (device array of tensor pointers). Returns nothing once the
  // publisher closed the channel; throws sparsesync::error when the version is refused.
  std::optional<frame_received_version> next(void* const* d_weights) {
    frame_received_version out;
    applier_->begin();
    std::vector<std::pair<std::size_t, std::size_t>> frames;
    std::size_t used = 0;
    for (;;) {
      const auto size = channel_.receive_size();
      if (!size) {
        if (frames.empty()) return std::nullopt;
        throw error(errc::truncated, "frame_subscriber: the channel closed inside a version");
      }
      grow(used + *size, used);
      channel_.receive_payload(arena_ + used);
      out.payload_bytes += *size;
      if (*size == patch_header_bytes) {  // the end of the version (a bucket frame is longer)
        unsigned char host[patch_header_bytes];
        throw_on_cuda_error(cudaMemcpyAsync(host, arena_ + used, patch_header_bytes, cudaMemcpyDeviceToHost, channel_stream_), "read header");
        throw_on_cuda_error(cudaStreamSynchronize(channel_stream_), "read header");
        patch_header h;
        throw_if_error(sparsesync::detail::read_patch_header({host, patch_header_bytes}, h));
        if (h.layout_hash != layout_.hash()) throw error(errc::layout_mismatch, "frame_subscriber: version for another layout");
        if (h.flags & flag_from_zero) throw error(errc::malformed, "frame_subscriber: full transfers travel as bucket frames of a patch");
        applier_->check_patch(h, held_);
        const auto verdict = applier_->result();
        if (!verdict.status) throw error(verdict.status);
        if (mode_ == commit_mode::atomic) {
          for (const auto& [off, bytes] : frames) applier_->commit(arena_ + off, bytes, d_weights);
          const auto done = applier_->result();
          if (!done.status) throw error(done.status);
        }
        out.version = h.target_version;
        out.changed = verdict.changed;
        out.checksum = h.target_checksum;
        if (!held_) {
          held_ = h.target_checksum;
          make_applier();  // from now on only changed elements are read
        } else {
          held_ = h.target_checksum;
        }
        return out;
      }
      throw_on_cuda_error(cudaEventRecord(arrived_, channel_stream_), "cudaEventRecord");
      throw_on_cuda_error(cudaStreamWaitEvent(stream_, arrived_, 0), "cudaStreamWaitEvent");
      if (mode_ == commit_mode::streamed) applier_->apply(arena_ + used, *size, d_weights);
      else applier_->verify(arena_ + used, *size, d_weights);
      frames.emplace_back(used, *size);
      used += *size;
    }
  }

 private:
  void make_applier() {
    apply_config cfg;
    cfg.known_base = held_.has_value();
    applier_ = std::make_unique<apply_plan>(layout_, cfg, stream_);
  }
  // Room for `need` bytes, keeping the first `keep` (both streams idle first: rare, the first versions).
  void grow(std::size_t need, std::size_t keep) {
    if (need <= arena_bytes_) return;
    throw_on_cuda_error(cudaStreamSynchronize(stream_), "grow");
    throw_on_cuda_error(cudaStreamSynchronize(channel_stream_), "grow");
    unsigned char* bigger = nullptr;
    const std::size_t cap = std::max<std::size_t>(2 * arena_bytes_, need + (64u << 20));
    throw_on_cuda_error(cudaMalloc(reinterpret_cast<void**>(&bigger), cap), "cudaMalloc");
    if (keep) throw_on_cuda_error(cudaMemcpy(bigger, arena_, keep, cudaMemcpyDeviceToDevice), "cudaMemcpy");
    if (arena_) cudaFree(arena_);
    arena_ = bigger;
    arena_bytes_ = cap;
  }

  const model_layout& layout_;
  Channel& channel_;
  cudaStream_t stream_, channel_stream_;
  commit_mode mode_;
  std::optional<std::uint64_t> held_;
  std::unique_ptr<apply_plan> applier_;
  cudaEvent_t arrived_{};
  unsigned char* arena_ = nullptr;
  std::size_t arena_bytes_ = 0;
};

}  // namespace cuda
SPARSESYNC_NS_END
