// receiver<Transport, Sink>: the rollout-worker side. Each version is applied into the worker's own buffers
// atomically: a patch is verified bucket by bucket against the worker's weights and written under an exclusive
// lock only once the whole version has verified (or, with a sink that can undo, written as it arrives and
// undone when refused). A full transfer (a worker without a valid version) is written bucket by bucket while the
// worker holds no version.
//
// One engine wherever the weights live: the Sink (a version_sink, version_sink.hpp) verifies and writes:
// host_sink (host memory, the default) or device_sink (GPU memory, device_weights.hpp). The session protocol
// (handshake, ack with the verified checksum, nack) is this file, the same for both. With a device_sink on a
// device_link (nccl_link) the receiver asks for bucket frames on the link's device path: they land in the sink's
// GPU memory without passing through the host.
#pragma once

#include <sparsesync/sync/host_sink.hpp>
#include <sparsesync/sync/protocol.hpp>
#include <sparsesync/transport/device_link.hpp>
#include <sparsesync/transport/transport.hpp>

#include <array>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <shared_mutex>

SPARSESYNC_NS_BEGIN
namespace sync {

struct receiver_options {
  // The buffers already hold `version` (for example restored from disk). Its checksum is computed once at
  // construction; a sender that knows the version then sends patches instead of a full transfer.
  bool has_version = false;
  std::uint64_t version = 0;
};

struct applied_version {
  std::uint64_t version = 0;
  std::uint64_t base_version = 0;
  bool full = false;                // a full transfer (a patch from the all-zero model)
  std::uint64_t changed = 0;
  std::uint64_t payload_bytes = 0;  // wire-format bytes received for this version
  std::uint64_t checksum = 0;       // content checksum of the weights now held
  double seconds = 0;               // from the first byte of the version to its commit
};

template <class Transport, class Sink = host_sink>
class receiver {
  static_assert(check_transport<Transport>);
  static_assert(check_declared_device_link<Transport>);
  static_assert(check_version_sink<Sink>);
  using clock = std::chrono::steady_clock;
  static constexpr bool takes_device_frames = device_link<Transport> && device_frame_sink<Sink>;
  // Over a pipelined device link a frame's receive is posted as soon as it is announced, and the frames announced
  // before it are handed to the sink only while more than frames_posted_ahead are posted: the sender's next
  // transfers never wait for this thread to have handed on the last frame (a credit round trip per frame
  // otherwise; patches only: a full transfer reuses one slot of the sink for every frame). With one frame ahead
  // the credit loop still bounded a 7B version once the trainer's encode got faster (call G of session 11: the
  // trainer's session waited 8-13 ms per version for credits): as many ahead as the link takes.
  static constexpr bool pipelines_device_frames = takes_device_frames && pipelined_device_link<Transport>;
  static constexpr std::size_t frames_posted_ahead = max_posted_device_receives - 1;

 public:
  // Called under the exclusive lock right after a version is committed, with the changes it wrote
  // (tensor index, element offset, new bits); for full transfers it is called once per bucket. Use it to
  // mirror a version into buffers laid out differently (a tensor-parallel shard, a fused QKV slice).
  using commit_hook = std::function<void(const applied_version&, const std::vector<staged_change>&)>;

  // Host weights: `buffers` in layout order.
  receiver(model_layout layout, std::span<const tensor_view> buffers, Transport link, receiver_options opt = {})
    requires std::same_as<Sink, host_sink>
      : receiver(std::move(layout), host_sink(buffers), std::move(link), opt) {}

  // Any sink (device_sink for GPU weights).
  receiver(model_layout layout, Sink sink, Transport link, receiver_options opt = {})
      : layout_(std::move(layout)), sink_(std::move(sink)), link_(std::move(link)) {
    sink_.prepare(layout_);
    has_version_ = opt.has_version;
    version_ = opt.version;
    if (has_version_) checksum_ = sink_.checksum();
    link_.send(encode(hello{layout_.hash(), has_version_, version_, checksum_, takes_device_frames}));
    std::vector<std::byte> in;
    if (!link_.receive(in)) throw error(errc::io, "the sender closed the connection during the handshake");
    if (type_of(in) == message_type::refuse) {
      nack n;
      (void)decode(in, n);
      throw error(n.code == errc::ok ? errc::malformed : n.code, "the sender refused this receiver: " + n.message);
    }
    welcome w;
    throw_if_error(decode(in, w));
    if (w.layout_hash != layout_.hash()) throw error(errc::layout_mismatch, "the sender publishes another model layout");
    sender_has_version_ = w.has_version;
    sender_version_ = w.version;
  }

  void on_commit(commit_hook hook)
    requires std::same_as<Sink, host_sink>
  {
    hook_ = std::move(hook);
    if (!hook_) return sink_.on_write({});
    sink_.on_write([this](const std::vector<staged_change>& changes) { hook_(current_, changes); });
  }

  // Blocks for the next version and applies it. Returns nullopt once the sender closed the connection in
  // order. A version that fails verification is refused (the sender is told, and follows with a full
  // transfer); the weights keep the last good version and the error is thrown as sparsesync::error.
  std::optional<applied_version> next() {
    auto p = receive();
    if (!p) return std::nullopt;
    if (!p->verdict) {
      refuse_pending(*p, p->verdict);
      throw error(p->verdict);
    }
    return commit_pending(*p);
  }

  // One version in two steps, for a caller that commits several receivers as one (sharded_receiver):
  // receive() reads and verifies the next version and leaves it pending (nothing of a patch is written yet; a
  // full transfer is written as it arrives, the weights holding no version meanwhile); then either
  // commit_pending() writes it and acknowledges it, or refuse_pending() gives it up (the weights keep, or get
  // back, the old version) and sends the sender a nack.
  struct pending_version {
    applied_version info;
    status verdict;  // ok: verified, ready to commit
    bool begun = false;
    clock::time_point start;
  };

  // nullopt once the sender closed the connection in order (between versions).
  std::optional<pending_version> receive() {
    std::vector<std::byte> in;
    if (!link_.receive(in)) return std::nullopt;
    pending_version p;
    p.start = clock::now();
    if (type_of(in) != message_type::version_begin) throw error(errc::malformed, "expected the start of a version");
    patch_prologue pro;
    const auto body = body_of(in);
    status& st = p.verdict;
    st = parse_patch_prologue(body, pro);
    if (st && pro.bytes != body.size()) st = {errc::malformed, "version start has trailing bytes"};
    if (st && pro.header.layout_hash != layout_.hash()) st = {errc::layout_mismatch, "version for another model layout"};
    const bool full = st && (pro.header.flags & flag_from_zero);
    if (st && !full && (!has_version_ || pro.header.base_version != version_))
      st = {errc::base_mismatch, "patch from version " + std::to_string(pro.header.base_version) + ", this receiver holds " +
                                     (has_version_ ? std::to_string(version_) : std::string("none"))};
    applied_version& info = current_;
    info = {};
    info.version = pro.header.target_version;
    info.base_version = pro.header.base_version;
    info.full = full;
    info.payload_bytes = body.size();
    try {
      if (st) {
        std::unique_lock lock(weights_mutex_, std::defer_lock);
        if (full) {
          lock.lock();
          has_version_ = false;  // the buffers are rewritten bucket by bucket from here on
        }
        sink_.begin(full, has_version_ ? std::optional<std::uint64_t>(checksum_) : std::nullopt);
        p.begun = true;
      }
      for (;;) {
        if (!link_.receive(in)) throw error(errc::io, "the sender closed the connection inside a version");
        const auto type = type_of(in);
        if (type != message_type::bucket_device) hand_posted_frames(st, 0);  // in order with what follows
        if (type == message_type::bucket) {
          info.payload_bytes += in.size() - 1;
          if (!st) continue;  // already refused: read on to the end of the version to stay in step
          std::unique_lock lock(weights_mutex_, std::defer_lock);
          if (full) lock.lock();
          st = sink_.add_bucket(body_of(in));
          if (full) info.changed = sink_.changed();
        } else if (type == message_type::bucket_device) {
          receive_device_bucket(in, st, full, info);
        } else if (type == message_type::version_end) {
          patch_header end;
          if (st) st = sparsesync::detail::read_patch_header(body_of(in), end);
          if (st && (end.target_version != pro.header.target_version || end.base_version != pro.header.base_version ||
                     end.bucket_count != pro.header.bucket_count || end.flags != pro.header.flags))
            st = {errc::malformed, "version end does not match its start"};
          if (st) st = sink_.finish(end);
          break;
        } else {
          throw error(errc::malformed, "unexpected message inside a version");
        }
      }
    } catch (...) {
      // The session cannot go on mid-version: frames the sender still has in flight on the device path, and the
      // receives posted for them, are cancelled.
      posted_frames_ = 0;
      if constexpr (device_link<Transport>) link_.abort();
      if (p.begun) abort_locked();
      throw;
    }
    p.info = info;
    return p;
  }

  // Writes a verified pending version and acknowledges it (version and the checksum of the weights now held).
  applied_version commit_pending(pending_version& p) {
    if (!p.verdict) throw error(errc::invalid_argument, "receiver: commit_pending of a refused version");
    try {
      std::unique_lock lock(weights_mutex_);
      sink_.commit();
      has_version_ = true;
      version_ = p.info.version;
      checksum_ = sink_.target_checksum();
    } catch (...) {
      abort_locked();
      throw;
    }
    p.begun = false;
    applied_version info = p.info;
    info.changed = sink_.changed();
    info.checksum = checksum_;
    info.seconds = std::chrono::duration<double>(clock::now() - p.start).count();
    link_.send(encode(ack{version_, checksum_}));
    return info;
  }

  // Gives up a pending version: the weights keep (or get back) the old version, or hold none after a full
  // transfer; the sender hears `why` in a nack and follows with a full transfer.
  // The nack goes even when putting the old weights back failed (a streamed version whose rollback failed: the
  // weights then hold no version, and the sender's full transfer is what heals them); without it the sender
  // would wait for this receiver's answer while it waits for the next version. That failure is thrown after.
  void refuse_pending(pending_version& p, const status& why) {
    std::exception_ptr restore_failed;
    if (p.begun) {
      try {
        abort_locked();
      } catch (...) {
        restore_failed = std::current_exception();
      }
    }
    p.begun = false;
    const status reason = why ? status{errc::invalid_argument, "refused with its peers"} : why;
    link_.send(encode(nack{p.info.version, reason.code(), reason.message()}));
    if (restore_failed) std::rethrow_exception(restore_failed);
  }

  // Readers of the weights hold this shared; a commit holds it exclusive. Weights are a valid version
  // exactly while has_version() is true under the lock.
  [[nodiscard]] std::shared_mutex& weights_mutex() const { return weights_mutex_; }
  [[nodiscard]] bool has_version() const { return has_version_; }
  [[nodiscard]] std::uint64_t version() const { return version_; }
  [[nodiscard]] std::uint64_t checksum() const { return checksum_; }
  // What the sender held at the handshake.
  [[nodiscard]] bool sender_has_version() const { return sender_has_version_; }
  [[nodiscard]] std::uint64_t sender_version() const { return sender_version_; }
  [[nodiscard]] const model_layout& layout() const { return layout_; }
  [[nodiscard]] Sink& sink() { return sink_; }
  [[nodiscard]] Transport& link() { return link_; }
  void close() { link_.close(); }

 private:
  // A bucket frame announced on the host link and received on its device path, into the sink's GPU memory. It is
  // received also when the version is already refused (the sender sends it regardless: the two ends stay in step).
  void receive_device_bucket(std::span<const std::byte> in, status& st, bool full, applied_version& info) {
    if constexpr (takes_device_frames) {
      std::uint64_t bytes = 0;
      throw_if_error(decode_bucket_device(in, bytes));  // unbounded or malformed: the stream cannot be followed
      info.payload_bytes += bytes;
      std::unique_lock lock(weights_mutex_, std::defer_lock);
      if (full) lock.lock();
      const device_slot slot = sink_.device_frame_slot(static_cast<std::size_t>(bytes));
      if constexpr (pipelines_device_frames) {
        if (!full) {
          link_.post_receive_device(slot.data, static_cast<std::size_t>(bytes), slot.after);
          ++posted_frames_;
          hand_posted_frames(st, frames_posted_ahead);
          hand_arrived_frames(st);
          return;
        }
      }
      std::array<unsigned char, bucket_header_bytes> head{};
      link_.receive_device(slot.data, static_cast<std::size_t>(bytes), slot.after, head);
      if (!st) return;
      st = sink_.add_device_bucket(head);
      if (full) info.changed = sink_.changed();
    } else {
      (void)in, (void)st, (void)full, (void)info;
      throw error(errc::malformed, "the sender announced a device frame, which this receiver did not ask for");
    }
  }

  // Completes posted receives, oldest first, until at most `keep` are left, handing each frame to the sink (the
  // frames of a refused version are received all the same: the two ends stay in step). Only a patch's frames are
  // posted ahead.
  void hand_posted_frames(status& st, std::size_t keep) {
    if constexpr (pipelines_device_frames) {
      while (posted_frames_ > keep) hand_oldest_posted_frame(st);
    } else {
      (void)st, (void)keep;
    }
  }

  // With a polled link: hands on the posted frames that have already landed, oldest first, so that their verify
  // starts now rather than when the posting window is full (three frames later: ~0.9 ms on two H100s, and the
  // last frames of a version were all verified only after the last one landed).
  void hand_arrived_frames(status& st) {
    if constexpr (pipelines_device_frames && polled_device_link<Transport>) {
      while (posted_frames_ > 0 && link_.received_device()) hand_oldest_posted_frame(st);
    } else {
      (void)st;
    }
  }

  void hand_oldest_posted_frame(status& st)
    requires pipelines_device_frames
  {
    std::array<unsigned char, bucket_header_bytes> head{};
    link_.complete_receive_device(head);
    --posted_frames_;
    if (st) st = sink_.add_device_bucket(head);
  }

  // A refused or broken version: the sink puts the old weights back (a patch) or they hold none (a full
  // transfer, has_version_ already false).
  void abort_locked() {
    std::unique_lock lock(weights_mutex_);
    try {
      sink_.abort();
    } catch (...) {
      has_version_ = false;  // the old version could not be put back: the weights hold none (a patch is refused)
      throw;
    }
  }

  model_layout layout_;
  Sink sink_;
  Transport link_;
  commit_hook hook_;
  applied_version current_;  // the version being received (what the commit hook sees)
  std::size_t posted_frames_ = 0;  // device receives posted and not yet handed to the sink (pipelines_device_frames)
  mutable std::shared_mutex weights_mutex_;
  bool has_version_ = false;
  std::uint64_t version_ = 0;
  std::uint64_t checksum_ = 0;
  bool sender_has_version_ = false;
  std::uint64_t sender_version_ = 0;
};

}  // namespace sync
SPARSESYNC_NS_END
