// Weights on GPUs in the one sync engine: device_source (trainer) and device_sink (worker), the version_source
// and version_sink of weights in device memory. With them sync::sender and sync::receiver give GPU weights
// every guarantee host weights have (handshake with layout hash and held checksum, acks carrying the verified
// checksum, nack and healing, kept patches and full transfers for late or restarted workers), over any
// transport: the frames cross through host memory, or, over a device_link (nccl_link), from GPU to GPU.
//
// This header needs no CUDA compiler: the GPU work sits behind two abstract backends, which
// cuda/sync/device_engine.cuh implements (include it from a .cu file and call make_device_source /
// make_device_sink there). A program whose transport nvcc cannot compile (Boost.Asio) builds its sender or
// receiver in a .cpp file from a backend made in a .cu file.
//
// Tensor views hold DEVICE pointers here (numel and dtype as for host weights).
#pragma once

#include <sparsesync/codec/encoder_table.hpp>
#include <sparsesync/codec/registry.hpp>
#include <sparsesync/format/patch_writer.hpp>
#include <sparsesync/sync/version_sink.hpp>
#include <sparsesync/sync/version_source.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

SPARSESYNC_NS_BEGIN
namespace sync {

// Where a device_source keeps its snapshot (the base of the next patch).
enum class snapshot_place {
  device,       // GPU memory: 1x the model, the fastest compare
  host_pinned,  // pinned host memory read by the GPU over PCIe / NVLink-C2C: no GPU copy of the model
};

// The bucket size to give fixed_bytes for a device_source (fixed_bytes{device_bucket_bytes}); fixed_bytes's own
// default (256 MiB) is the host engine's. Each bucket costs the GPU a fixed time on both ends (the sequential
// coders' tails, launches, a receive), which the encode and verify lanes overlap but do not remove: on two H100s
// over NVLink a 7B BF16 version at 1% took 54.0 ms with 256 MiB buckets (93), 30.1 ms with 512 MiB (33) and
// 28.8 ms with 896 MiB (18) (bench/results/engine-nccl/h100x2-7b.md). Larger buckets cost memory only in a full
// transfer: the worker stages 8 bytes per element of the bucket being applied (4 GiB at 1 GiB of BF16), the
// trainer's full-transfer plan ~4 bytes per element plus the frame, and a full transfer's frame must stay under
// the 1 GiB frame limit (a BF16 bucket of 1 GiB makes a frame of ~1.06 GiB): 512 MiB keeps both modest.
inline constexpr std::uint64_t device_bucket_bytes = std::uint64_t{512} << 20;

// What a device backend holds beside the weights, in bytes.
struct device_memory_report {
  std::uint64_t snapshot_device = 0;  // the snapshot in GPU memory (0 with snapshot_place::host_pinned)
  std::uint64_t snapshot_host = 0;    // the snapshot in pinned host memory
  std::uint64_t scratch_device = 0;   // encode / apply scratch and frames: O(payload)
};

// Where a backend hands each bucket frame: `host` takes a frame in host memory (valid during the call); `device`
// takes a frame the backend keeps on the GPU (device_source_options::frames_on_device) with its header copied
// to the host.
struct frame_emitter {
  std::function<void(std::span<const unsigned char> frame)> host;
  std::function<void(std::span<const unsigned char> header, device_frame frame)> device;
};

// The GPU half of a device_source (cuda/sync/device_engine.cuh).
class device_encoder_backend {
 public:
  virtual ~device_encoder_backend() = default;
  // Once, before anything else: the buckets of every version and how they are encoded.
  virtual void prepare(const model_layout& layout, std::vector<bucket_plan> plans, encoder_id encoder, const encode_options& enc) = 0;
  [[nodiscard]] virtual bool has_version() const = 0;
  // Encodes `weights` (device pointers) against the snapshot, or from the all-zero model when it holds no
  // version (absolute values, bitmap), handing each bucket frame to `emit` in order; afterwards the snapshot
  // holds `weights`. Throws on failure, the snapshot then holding none. A full transfer's frames always come
  // to emit.host (a model-sized stream is not kept in GPU memory).
  virtual source_totals encode_version(std::span<const const_tensor_view> weights, const frame_emitter& emit) = 0;
  // The snapshot from the all-zero model (a full transfer), frames to `emit.host`.
  virtual void encode_full(const frame_emitter& emit) = 0;
  virtual void invalidate() = 0;
  [[nodiscard]] virtual device_memory_report memory() const = 0;
  // Waits for what encode_version left running on the GPU (a deferred snapshot advance); the seconds waited.
  virtual double settle() { return 0; }
  // Once the version's closing header is out (after encode_version, on the same thread): starts what the version
  // put off so as not to hold that header back (the deferred advance's launches); the seconds it took. A
  // decorator should forward it; one that does not only delays that start to settle(), which must then start it
  // (the advance reads the weights, which the caller may change once publish() returned).
  virtual double version_written() { return 0; }
};

// The GPU half of a device_sink (cuda/sync/device_engine.cuh); its calls are version_sink's.
class device_applier_backend {
 public:
  virtual ~device_applier_backend() = default;
  [[nodiscard]] virtual const model_layout& layout() const = 0;
  virtual std::uint64_t checksum() = 0;
  virtual void begin(bool full, std::optional<std::uint64_t> known_base) = 0;
  virtual status add_bucket(std::span<const unsigned char> frame) = 0;
  virtual device_slot device_frame_slot(std::size_t bytes) = 0;
  virtual status add_device_bucket(std::span<const unsigned char> head) = 0;
  virtual status finish(const patch_header& h) = 0;
  virtual void commit() = 0;
  virtual void abort() = 0;
  [[nodiscard]] virtual std::uint64_t changed() const = 0;
  [[nodiscard]] virtual std::uint64_t target_checksum() const = 0;
  [[nodiscard]] virtual device_memory_report memory() const = 0;
};

namespace detail {
// The GPU encodes each bucket with one encoder (no per-chunk trial of several): Sel must name it.
template <class Sel>
struct device_encoder_of {
  static_assert(requires { Sel::id; },
                "sparsesync: device_source encodes on the GPU with one encoder: name it (e.g. sparsesync::rice), not a best_of selection");
  static constexpr encoder_id value = Sel::id;
};
}  // namespace detail

// The trainer's GPU weights as a version_source. Sel: one encoder with a device twin; Policy: the buckets.
template <class Sel, class Policy = fixed_bytes>
class device_source {
  static_assert(check_bucketing_policy<Policy>);
  static_assert(encoder_table_row(detail::device_encoder_of<Sel>::value).gpu,
                "sparsesync: device_source: this encoder has no device twin (encoder_table.hpp)");
  using clock = std::chrono::steady_clock;

 public:
  device_source() = default;  // no backend: prepare() throws (a sender needs one)
  explicit device_source(std::unique_ptr<device_encoder_backend> backend) : backend_(std::move(backend)) {}
  // With the encoder chosen at run time instead of Sel: any encoder_table row with a device twin. For callers that
  // take it from a name (the Python Publisher's `encoder=`) without one sender type per encoder; the GPU backend
  // encodes every such encoder either way.
  device_source(std::unique_ptr<device_encoder_backend> backend, encoder_id run_time_encoder)
      : backend_(std::move(backend)), encoder_(run_time_encoder) {
    detail::require_builtin_encoder(run_time_encoder, "device_source");
    if (!encoder_table_row(run_time_encoder).gpu)
      throw error(errc::unsupported, "device_source: " + std::string(encoder_name(run_time_encoder)) + " has no device twin (encoder_table.hpp)");
  }

  // The encoder every bucket is encoded with.
  [[nodiscard]] encoder_id encoder() const { return encoder_; }

  void prepare(const model_layout& layout, const encode_options& enc, const Policy& policy) {
    if (!backend_) throw error(errc::invalid_argument, "device_source: no GPU backend (make one with cuda::make_device_source)");
    layout_ = &layout;
    plans_ = policy.plan(layout, enc.log2_chunk);
    backend_->prepare(layout, plans_, encoder_, enc);
  }

  [[nodiscard]] bool has_version() const { return backend_ && backend_->has_version(); }

  source_totals encode_version(std::span<const const_tensor_view> weights, const patch_options& po, version_stream& out) {
    source_totals totals = write(out, po, !has_version(), [&](const frame_emitter& emit) { return backend_->encode_version(weights, emit); });
    totals.snapshot_seconds += backend_->version_written();
    return totals;
  }

  void encode_full(const patch_options& po, version_stream& out) {
    (void)write(out, po, true, [&](const frame_emitter& emit) {
      backend_->encode_full(emit);
      return source_totals{};
    });
  }

  void invalidate() {
    if (backend_) backend_->invalidate();
  }

  // version_source requirement 6: the snapshot advance a backend deferred past the version's last frame.
  double settle() { return backend_ ? backend_->settle() : 0.0; }

  [[nodiscard]] device_memory_report memory() const { return backend_ ? backend_->memory() : device_memory_report{}; }

 private:
  // Frames the backend's buckets as one version: prologue, buckets as they come, the closing header with the
  // whole-model checksums the bucket headers add up to.
  template <class Encode>
  source_totals write(version_stream& out, const patch_options& po, bool from_zero, Encode&& encode) {
    stream_writer w(out);
    patch_header h = sparsesync::detail::patch_header_for(*layout_, plans_.size(), po, from_zero, 0);
    if (po.include_layout) throw error(errc::invalid_argument, "device_source: the layout travels in the handshake, not in versions");
    std::vector<unsigned char> bytes;
    sparsesync::detail::write_patch_prologue(bytes, h, {}, po.metadata);
    source_totals totals;
    try {
      w.prologue(bytes);
      frame_emitter emit;
      emit.host = [&](std::span<const unsigned char> frame) { (void)w.bucket(frame); };
      emit.device = [&](std::span<const unsigned char> header, device_frame frame) { (void)w.bucket_on_device(header, std::move(frame)); };
      totals = encode(emit);
    } catch (...) {
      out.finish(false);
      throw;
    }
    h.base_checksum = w.base_checksum();
    h.target_checksum = w.target_checksum();
    unsigned char end[patch_header_bytes];
    sparsesync::detail::write_patch_header(end, h);
    w.end(end, h.target_checksum);
    totals.changed = w.changed();
    return totals;
  }

  std::unique_ptr<device_encoder_backend> backend_;
  encoder_id encoder_ = detail::device_encoder_of<Sel>::value;
  const model_layout* layout_ = nullptr;
  std::vector<bucket_plan> plans_;
};

// A worker's GPU weights as a version_sink.
class device_sink {
 public:
  explicit device_sink(std::unique_ptr<device_applier_backend> backend) : backend_(std::move(backend)) {
    if (!backend_) throw error(errc::invalid_argument, "device_sink: no GPU backend (make one with cuda::make_device_sink)");
  }

  void prepare(const model_layout& layout) {
    if (layout.hash() != backend_->layout().hash()) throw error(errc::layout_mismatch, "device_sink: the backend was made for another layout");
  }
  std::uint64_t checksum() { return backend_->checksum(); }
  void begin(bool full, std::optional<std::uint64_t> known_base) { backend_->begin(full, known_base); }
  status add_bucket(std::span<const unsigned char> frame) { return backend_->add_bucket(frame); }
  // device_frame_sink: bucket frames that arrive on a device link land in the sink's own GPU memory.
  device_slot device_frame_slot(std::size_t bytes) { return backend_->device_frame_slot(bytes); }
  status add_device_bucket(std::span<const unsigned char> head) { return backend_->add_device_bucket(head); }
  status finish(const patch_header& h) { return backend_->finish(h); }
  void commit() { backend_->commit(); }
  void abort() { backend_->abort(); }
  [[nodiscard]] std::uint64_t changed() const { return backend_->changed(); }
  [[nodiscard]] std::uint64_t target_checksum() const { return backend_->target_checksum(); }
  [[nodiscard]] device_memory_report memory() const { return backend_->memory(); }

 private:
  std::unique_ptr<device_applier_backend> backend_;
};

static_assert(check_version_sink<device_sink>);
static_assert(device_frame_sink<device_sink>);

}  // namespace sync
SPARSESYNC_NS_END
