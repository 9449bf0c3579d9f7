// GPU-resident sync over a channel of device frames: the trainer's GPU encodes each bucket and sends its
// frame while it encodes the next one; every worker's GPU verifies the frames and applies them in place.
// Channels: NCCL broadcast (nccl_sync.cuh) or any sparsesync transport through host memory
// (transport_frame_channel.hpp; for transports that nvcc cannot compile, see frame_channel.hpp).
//
// On the channel, one version is: its bucket frames (FORMAT.md section 3), then the 88-byte patch header with
// the whole-model checksums, which ends the version. Workers check the header against the buckets and against
// the checksum of the version they hold, so a worker that missed a version, or holds other weights, refuses
// the next one instead of corrupting itself: in atomic mode before anything is written, in streamed mode by
// rolling back the buckets already written (frame_commit_mode).
#pragma once

#include <sparsesync/cuda/codec.cuh>
#include <sparsesync/cuda/sync/frame_arena.cuh>
#include <sparsesync/cuda/sync/frame_channel.hpp>
#include <sparsesync/format/wire.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace cuda {

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

// Worker side. `stream` computes; `channel_stream` is the stream the channel was built with.
template <class Channel>
class frame_subscriber {
  static_assert(check_device_frame_channel<Channel>);

 public:
  using commit_mode = frame_commit_mode;  // atomic or streamed (frame_channel.hpp)

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
  }

  // Receives one version into `d_weights` (device array of tensor pointers). Returns nothing once the
  // publisher closed the channel; throws when the version is refused (sparsesync::error) or the channel
  // fails, and the weights then hold the previous version, bit for bit, in both commit modes.
  std::optional<frame_received_version> next(void* const* d_weights) {
    applier_->begin();
    try {
      return receive_version(d_weights);
    } catch (const std::exception& e) {
      if (mode_ == commit_mode::streamed) roll_back(d_weights, e.what());
      throw;
    }
  }

 private:
  std::optional<frame_received_version> receive_version(void* const* d_weights) {
    frame_received_version out;
    std::vector<std::pair<const unsigned char*, std::size_t>> frames;
    arena_.rewind([&] {
      throw_on_cuda_error(cudaStreamSynchronize(stream_), "frame arena");
      throw_on_cuda_error(cudaStreamSynchronize(channel_stream_), "frame arena");
    });
    for (;;) {
      const auto size = channel_.receive_size();
      if (!size) {
        if (frames.empty()) return std::nullopt;
        throw error(errc::truncated, "frame_subscriber: the channel closed inside a version");
      }
      unsigned char* at = arena_.take(*size, 64u << 20);
      channel_.receive_payload(at);
      out.payload_bytes += *size;
      if (*size == patch_header_bytes) {  // the end of the version (a bucket frame is longer)
        unsigned char host[patch_header_bytes];
        throw_on_cuda_error(cudaMemcpyAsync(host, at, patch_header_bytes, cudaMemcpyDeviceToHost, channel_stream_), "read header");
        throw_on_cuda_error(cudaStreamSynchronize(channel_stream_), "read header");
        patch_header h;
        throw_if_error(sparsesync::detail::read_patch_header({host, patch_header_bytes}, h));
        if (h.layout_hash != layout_.hash()) throw error(errc::layout_mismatch, "frame_subscriber: version for another layout");
        if (h.flags & flag_from_zero) throw error(errc::malformed, "frame_subscriber: full transfers travel as bucket frames of a patch");
        applier_->check_patch(h, held_);
        const auto verdict = applier_->result();
        if (!verdict.status) throw error(verdict.status);
        if (mode_ == commit_mode::atomic) {
          applier_->commit(frames, d_weights);
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
      if (mode_ == commit_mode::streamed) applier_->apply_undoable(at, *size, d_weights);
      else applier_->verify(at, *size, d_weights);
      frames.emplace_back(at, *size);
    }
  }

  // Streamed mode, version refused: the buckets written so far get their old bits back (the frames are still
  // in the arena). If even that fails, the weights are no known version: say so.
  void roll_back(void* const* d_weights, const char* why) {
    try {
      applier_->rollback(d_weights);
    } catch (const std::exception& e) {
      throw error(errc::invalid_argument, std::string("frame_subscriber: version refused (") + why + ") and its rollback failed (" + e.what() +
                                              "): the weights hold no known version");
    }
  }

  void make_applier() {
    apply_config cfg;
    cfg.known_base = held_.has_value();
    applier_ = std::make_unique<apply_plan>(layout_, cfg, stream_);
  }

  const model_layout& layout_;
  Channel& channel_;
  cudaStream_t stream_, channel_stream_;
  commit_mode mode_;
  std::optional<std::uint64_t> held_;
  std::unique_ptr<apply_plan> applier_;
  cudaEvent_t arrived_{};
  frame_arena arena_;
};

// ---- type-erased handles (frame_channel.hpp): for callers compiled without nvcc ----

// A frame_publisher behind the any_frame_publisher interface, on a device_frame_channel_ref (the referenced
// channel must outlive the handle). Call it from a .cu file; use the handle anywhere.
inline std::unique_ptr<any_frame_publisher> make_any_frame_publisher(const model_layout& layout, std::vector<bucket_plan> plans, encode_config cfg,
                                                                     device_frame_channel_ref channel, cudaStream_t stream,
                                                                     cudaStream_t channel_stream, double expected_density = 0.02) {
  struct impl final : any_frame_publisher {
    impl(const model_layout& l, std::vector<bucket_plan> pl, encode_config c, device_frame_channel_ref ch, cudaStream_t s, cudaStream_t cs, double d)
        : channel(ch), publisher(l, std::move(pl), c, channel, s, cs, d) {}
    frame_publish_stats publish(std::uint64_t version, const void* const* d_snapshot, const void* const* d_weights) override {
      return publisher.publish(version, d_snapshot, d_weights);
    }
    void update_snapshot(void* const* d_snapshot) override { publisher.update_snapshot(d_snapshot); }
    void close() override { publisher.close(); }
    device_frame_channel_ref channel;  // before the publisher, which keeps a reference to it
    frame_publisher<device_frame_channel_ref> publisher;
  };
  return std::make_unique<impl>(layout, std::move(plans), cfg, channel, stream, channel_stream, expected_density);
}

// A frame_subscriber behind the any_frame_subscriber interface, on a device_frame_channel_ref.
inline std::unique_ptr<any_frame_subscriber> make_any_frame_subscriber(const model_layout& layout, device_frame_channel_ref channel,
                                                                       cudaStream_t stream, cudaStream_t channel_stream,
                                                                       frame_commit_mode mode = frame_commit_mode::atomic,
                                                                       std::optional<std::uint64_t> held_checksum = std::nullopt) {
  struct impl final : any_frame_subscriber {
    impl(const model_layout& l, device_frame_channel_ref ch, cudaStream_t s, cudaStream_t cs, frame_commit_mode m, std::optional<std::uint64_t> h)
        : channel(ch), subscriber(l, channel, s, cs, m, h) {}
    std::optional<frame_received_version> next(void* const* d_weights) override { return subscriber.next(d_weights); }
    device_frame_channel_ref channel;
    frame_subscriber<device_frame_channel_ref> subscriber;
  };
  return std::make_unique<impl>(layout, channel, stream, channel_stream, mode, held_checksum);
}

}  // namespace cuda
SPARSESYNC_NS_END
