// sender<Sel, Policy, Transport, Source>: the trainer side. publish() diffs the new weights against the last
// published snapshot, streams the buckets to every receiver while encoding the next one, and waits for
// their acknowledgements. Receivers that are behind catch up through the kept history of patches, or by a
// full transfer (a patch from the all-zero model). Protocol: docs/PROTOCOL.md.
//
// One engine wherever the weights live: the Source (a version_source, version_source.hpp) encodes and keeps
// the snapshot: host_source (host memory, the default) or device_source (GPU memory, device_weights.hpp).
// Everything else (sessions, history, acks, lag, full transfers) is this file, the same for both. Over a
// device_link (nccl_link) a device source's bucket frames go from GPU to GPU to receivers whose weights are on a
// GPU; every other receiver of the same sender gets them through host memory.
#pragma once

#include <sparsesync/format/dense_bitmap.hpp>
#include <sparsesync/format/patch_writer.hpp>
#include <sparsesync/sync/full_transfer.hpp>
#include <sparsesync/sync/host_source.hpp>
#include <sparsesync/sync/protocol.hpp>
#include <sparsesync/sync/version_source.hpp>
#include <sparsesync/sync/version_stream.hpp>
#include <sparsesync/transport/device_link.hpp>
#include <sparsesync/transport/transport.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <list>
#include <shared_mutex>
#include <thread>
#include <tuple>

SPARSESYNC_NS_BEGIN
namespace sync {

struct sender_options {
  encode_options encode{value_mode::ulp, default_log2_chunk};
  std::size_t history = 8;                          // patches kept to catch up receivers a few versions behind
  std::chrono::milliseconds ack_timeout{600000};    // publish() stops waiting for a receiver after this long
  // A receiver that has not acknowledged a version when max(lag_grace, twice the time the slowest in-step
  // receiver took) has passed is marked lagging: publish() no longer waits for it (so one stalled receiver
  // never sets the pace of the others) until it has caught up by kept patches or a full transfer. While no
  // receiver has acknowledged, publish() waits for all of them up to ack_timeout (docs/PROTOCOL.md, "Lag").
  std::chrono::milliseconds lag_grace{250};
  // publish() polls for the acks this long before it sleeps (0: it sleeps at once). A thread woken from sleep
  // starts again tens to hundreds of microseconds after the ack came (40-210 us on H200 hosts, session 24's
  // timelines), which a version of ~14 ms pays in full; polling costs a busy core (yielding) for as long.
  std::chrono::microseconds ack_poll{0};
};

struct receiver_status {
  std::size_t id = 0;
  bool connected = false;
  bool has_version = false;
  std::uint64_t version = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t full_transfers = 0;
  std::uint64_t times_lagging = 0;  // how often publish() stopped waiting for it
  bool lagging = false;             // behind and not waited for, until it holds the newest version
  std::string last_error;
};

struct publish_report {
  std::uint64_t version = 0;
  std::uint64_t numel = 0;
  std::uint64_t changed = 0;        // elements that differ from the previous version
  std::uint64_t payload_bytes = 0;  // wire-format bytes of the patch (sent once per receiver)
  std::uint64_t target_checksum = 0;
  double encode_seconds = 0;        // encoding time (overlaps the transfer), snapshot advance included
  double snapshot_seconds = 0;      // of which bringing the snapshot to this version (a dense copy only for the first)
  source_totals source;             // the source's own account of the encode (phases of a GPU source)
  double seconds = 0;               // publish() call, until every receiver acknowledged
  std::size_t acknowledged = 0;     // receivers at this version when publish() returned
  std::size_t lagging = 0;          // connected receivers not (yet) at this version
  std::size_t marked_lagging = 0;   // of those, marked lagging during this publish (see lag_grace)
};

// sender's default transport: not a transport. It exists so that `sender<>` or `sender<rice>` fails with
// one message saying what to write, rather than with errors about a parameter of type void.
struct no_transport_named {};

// A source that makes full transfers bucket by bucket from its snapshot (host_source): the sender then sends
// them as sessions need each bucket (full_transfer.hpp), and a first publish only captures the weights.
template <class S>
concept bucketwise_full_source = requires(S& s, const S& cs, std::span<const const_tensor_view> w, const patch_options& po) {
  s.capture(w, po).payload_bytes;
  s.full_transfer_frames(po).final_header;
  { cs.encode_full_bucket(std::size_t{0}) } -> std::convertible_to<version_stream::message>;
};

namespace detail {
template <class T>
struct sender_transport_diagnostics : sparsesync::detail::transport_diagnostics<T> {};
template <>
struct sender_transport_diagnostics<no_transport_named> {
  static constexpr bool value = true;  // sender's first static_assert says what to write; one error is enough
};
}  // namespace detail

template <class Sel = auto_encoder, class Policy = fixed_bytes, class Transport = no_transport_named,
          template <class, class> class Source = host_source>
class sender {
  static_assert(!std::same_as<Transport, no_transport_named>,
                "sparsesync: name a transport: sync::sender<Sel, Policy, Transport> needs all three, e.g. "
                "sync::sender<sparsesync::auto_encoder, sparsesync::fixed_bytes, sparsesync::inproc_transport>");
  static_assert(check_encoder_selection<Sel>);
  static_assert(check_bucketing_policy<Policy>);
  static_assert(detail::sender_transport_diagnostics<Transport>::value);
  static_assert(check_declared_device_link<Transport>);
  static_assert(check_version_source<Source<Sel, Policy>, Policy>);
  using clock = std::chrono::steady_clock;

 public:
  using source_type = Source<Sel, Policy>;

  explicit sender(model_layout layout, sender_options opt = {}, Policy policy = {}, source_type source = {})
      : layout_(std::move(layout)), layout_hash_(layout_.hash()), opt_(opt), policy_(std::move(policy)), source_(std::move(source)) {
    source_.prepare(layout_, opt_.encode, policy_);
    const auto plans = policy_.plan(layout_, opt_.encode.log2_chunk);
    for (std::size_t i = 0; i < plans.size(); ++i) {
      const std::size_t bound = 1 + sparsesync::detail::dense_frame_bound(plans[i], opt_.encode.log2_chunk);  // (+ the message's tag)
      if (bound > largest_full_frame_) {
        largest_full_frame_ = bound;
        largest_full_bucket_ = i;
      }
    }
  }

  sender(const sender&) = delete;
  sender& operator=(const sender&) = delete;
  ~sender() { close(); }

  // Takes over a connected transport; the handshake and any catch-up run on the session's own thread.
  // Sessions whose receiver has gone are released here (their thread and connection), so a long-running
  // sender that receivers keep joining and leaving does not accumulate them; receivers() lists a gone
  // receiver until the next add_receiver().
  std::size_t add_receiver(Transport t) {
    // Every receiver may need a full transfer (joining, restarted, healed), whose frames carry whole buckets: a
    // link that cannot carry the largest would fail each of them, and the receiver would never get in step.
    if (const std::size_t most = t.max_frame_size(); most < largest_full_frame_)
      throw error(errc::invalid_argument, "sender: a full transfer of bucket " + std::to_string(largest_full_bucket_) + " needs frames of up to " +
                                              std::to_string(largest_full_frame_) + " bytes, and this transport carries at most " +
                                              std::to_string(most) + " (max_frame_size): choose smaller buckets (e.g. fixed_bytes{sync::device_bucket_bytes})");
    std::list<std::unique_ptr<session>> gone;
    std::size_t id = 0;
    {
      std::lock_guard lock(state_mutex_);
      if (closing_) throw error(errc::invalid_argument, "sender is closed");
      // A disconnected session's thread has finished its last use of state_mutex_ (fail_session is its end).
      for (auto it = sessions_.begin(); it != sessions_.end();) {
        auto next = std::next(it);
        if (!(*it)->connected) gone.splice(gone.end(), sessions_, it);
        it = next;
      }
      auto& s = sessions_.emplace_back(std::make_unique<session>(next_id_++, std::move(t)));
      s->thread = std::thread([this, raw = s.get()] { run_session(*raw); });
      id = s->id;
    }
    for (auto& s : gone)
      if (s->thread.joinable()) s->thread.join();
    return id;
  }

  // Publishes `weights` (laid out as the constructor's layout) as `version`, which must exceed the last.
  publish_report publish(std::uint64_t version, std::span<const const_tensor_view> weights, std::span<const unsigned char> metadata = {}) {
    std::lock_guard publishing(publish_mutex_);
    throw_if_error(check_views(layout_, weights, "weights"));
    const auto start = clock::now();
    auto stream = std::make_shared<version_stream>();
    stream->pool = pool_;
    publish_report report;
    report.version = version;
    report.numel = layout_.numel();
    bool capture = false;  // a first version of a bucketwise source: captured, sent as full transfers
    // Versions leaving the history are released after the encode, not before it: a device source's kept frames
    // cost a free and an event each (~0.15 ms for a 7B version's 33 frames, on the trainer's thread, ahead of
    // the encode: session 22's timelines). The frame pool then holds one version's frames more at its peak.
    std::vector<std::shared_ptr<version_stream>> retired;
    {
      std::unique_lock snap(snapshot_mutex_);  // held while encoding: full transfers wait for the new snapshot
      {
        std::lock_guard lock(state_mutex_);
        if (has_version_ && version <= version_) throw error(errc::invalid_argument, "versions must increase");
      }
      park_full_transfers();  // before anything changes: the snapshot still holds what they send
      {
        std::lock_guard lock(state_mutex_);
        stream->from_zero = !has_version_;
        stream->base_version = version_;
        stream->base_checksum = checksum_;
        stream->target_version = version;
        capture = bucketwise_full_source<source_type> && stream->from_zero;
        if (!capture) {
          history_.push_back(stream);
          while (history_.size() > opt_.history) {
            retired.push_back(std::move(history_.front()));
            history_.pop_front();
          }
        }
        publishing_from_zero_ = capture;
        latest_ = version;
        has_latest_ = true;
        full_.reset();
      }
      notify_state();  // sessions in sync start sending while buckets are encoded
      patch_options po;
      po.base_version = stream->base_version;
      po.target_version = version;
      po.metadata = metadata;
      po.include_layout = false;  // the handshake already proved both sides hold this layout
      source_totals totals;
      try {
        if constexpr (bucketwise_full_source<source_type>) {
          if (capture) {
            const auto c = source_.capture(weights, po);
            totals = c.totals;
            stream->target_checksum = c.target_checksum;
            stream->payload_bytes = c.payload_bytes;
          }
        }
        if (!capture) totals = source_.encode_version(weights, po, *stream);
      } catch (...) {
        stream->finish(false);
        std::lock_guard lock(state_mutex_);
        if (!capture) history_.pop_back();
        publishing_from_zero_ = false;
        forget_snapshot_locked();
        throw;
      }
      report.changed = totals.changed;
      report.snapshot_seconds = totals.snapshot_seconds;
      report.source = totals;
      report.encode_seconds = std::chrono::duration<double>(clock::now() - start).count();
      std::lock_guard lock(state_mutex_);
      has_version_ = true;
      version_ = version;
      checksum_ = stream->target_checksum;
      metadata_.assign(metadata.begin(), metadata.end());
      if (stream->from_zero && !capture) {
        // A model-sized stream: not kept as history beside the snapshot; the sessions sending it own it, and
        // later full transfers reuse it while any of them is still alive.
        std::erase(history_, stream);
        full_ = stream;
        published_from_zero_ = stream;
      }
    }
    notify_state();
    retired.clear();
    report.target_checksum = stream->target_checksum;
    report.payload_bytes = stream->payload_bytes;
    // Wait for every connected receiver to reach this version (or drop out, or lag: see lag_grace).
    std::unique_lock lock(state_mutex_);
    published_at_ = start;
    const std::size_t marked_before = marked_lagging_;
    wait_for_acks_locked(lock, start + opt_.ack_timeout);
    publishing_from_zero_ = false;  // sessions that take it from now on catch up by a full transfer
    if constexpr (settling_source<source_type>) {
      lock.unlock();
      settle_source(report);
      lock.lock();
    }
    report.marked_lagging = marked_lagging_ - marked_before;
    for (const auto& s : sessions_) {
      if (!s->connected) continue;
      if (in_sync(*s)) ++report.acknowledged;
      else ++report.lagging;
    }
    report.seconds = std::chrono::duration<double>(clock::now() - start).count();
    return report;
  }

  [[nodiscard]] std::vector<receiver_status> receivers() const {
    std::lock_guard lock(state_mutex_);
    std::vector<receiver_status> out;
    for (const auto& s : sessions_)
      out.push_back({s->id, s->connected, s->has_version, s->version, s->bytes_sent, s->full_transfers, s->times_lagging, s->lagging,
                     s->last_error});
    return out;
  }

  // Blocks until `n` receivers are connected and at the newest version (or the timeout passes).
  bool wait_for_receivers(std::size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(state_mutex_);
    return state_cv_.wait_for(lock, timeout, [&] {
      std::size_t ready = 0;
      for (const auto& s : sessions_)
        if (s->connected && s->handshaken && (!has_version_ || in_sync(*s))) ++ready;
      return ready >= n;
    });
  }

  // What publish() does after encoding, for a caller that publishes with ack_timeout 0 and waits itself (in
  // slices, to stay responsive): waits up to `timeout` for the receivers of the newest version, marking late
  // ones lagging (see lag_grace). True when none is left to wait for.
  bool wait_for_acks(std::chrono::milliseconds timeout) {
    std::unique_lock lock(state_mutex_);
    return wait_for_acks_locked(lock, clock::now() + timeout);
  }

  // Ends every session (in order: each receiver sees the end after what it was sent) and joins the threads.
  void close() {
    {
      std::lock_guard lock(state_mutex_);
      if (closing_ && sessions_.empty()) return;
      closing_ = true;
    }
    notify_state();
    std::list<std::unique_ptr<session>> sessions;
    {
      std::lock_guard lock(state_mutex_);
      sessions.swap(sessions_);
    }
    for (auto& s : sessions) {
      if (s->thread.joinable()) s->thread.join();
    }
  }

  [[nodiscard]] const model_layout& layout() const { return layout_; }
  // Where the snapshot lives and what it holds (device_source: memory()); not while publish() runs.
  [[nodiscard]] const source_type& source() const { return source_; }

 private:
  struct session {
    session(std::size_t i, Transport t) : id(i), link(std::move(t)) {}
    std::size_t id;
    Transport link;
    std::thread thread;
    bool connected = true;
    bool handshaken = false;
    bool device_frames = false;  // it asked for bucket frames on the device path of its (device) link
    bool has_version = false;
    std::uint64_t version = 0;
    std::uint64_t checksum = 0;
    std::uint64_t bytes_sent = 0;
    std::uint64_t full_transfers = 0;
    std::uint64_t times_lagging = 0;
    bool lagging = false;
    clock::time_point synced_at{};  // when it acknowledged the newest version
    std::string last_error;
  };

  // The session holds the newest published version (callers hold state_mutex_).
  bool in_sync(const session& s) const { return has_version_ && s.has_version && s.version == version_ && s.checksum == checksum_; }

  // Waits until no connected receiver is left to wait for, or `until`. Receivers not in step once
  // max(lag_grace, 2 x the slowest in-step one's time) has passed since the publish are marked lagging and
  // not waited for; while none is in step, all are waited for. True when none is left.
  bool wait_for_acks_locked(std::unique_lock<std::mutex>& lock, clock::time_point until) {
    const auto poll_until = clock::now() + opt_.ack_poll;
    for (;;) {
      const std::uint64_t seen = state_changes_.load(std::memory_order_acquire);
      bool pending = false, any_in_step = false;
      clock::duration slowest{0};
      for (const auto& s : sessions_) {
        if (!s->connected) continue;
        if (in_sync(*s)) {
          any_in_step = true;
          slowest = std::max(slowest, s->synced_at - published_at_);
        } else if (!s->lagging) {
          pending = true;
        }
      }
      if (!pending) return true;
      const auto now = clock::now();
      auto wake = until;
      if (any_in_step) {
        const auto mark_at = published_at_ + std::max<clock::duration>(opt_.lag_grace, 2 * slowest);
        if (now >= mark_at) {
          for (auto& s : sessions_) {
            if (!s->connected || in_sync(*s) || s->lagging) continue;
            s->lagging = true;
            ++s->times_lagging;
            ++marked_lagging_;
          }
          return true;
        }
        wake = std::min(wake, mark_at);
      }
      if (now >= until) return false;
      if (now < poll_until) {  // (ack_poll) until the state changes, the poll ends or `wake` comes
        const auto stop = std::min(poll_until, wake);
        lock.unlock();
        while (state_changes_.load(std::memory_order_acquire) == seen && clock::now() < stop) std::this_thread::yield();
        lock.lock();
        continue;
      }
      state_cv_.wait_until(lock, wake);
    }
  }

  // A full transfer of the newest version, encoded once and shared by every session sending it (it is
  // freed once the last of them is done: full_ does not keep it).
  std::shared_ptr<version_stream> full_stream() {
    std::shared_lock snap(snapshot_mutex_);
    std::lock_guard build(full_mutex_);
    {
      std::lock_guard lock(state_mutex_);
      if (auto f = full_.lock(); f && f->target_version == version_) return f;
    }
    auto stream = std::make_shared<version_stream>();  // model-sized and rare: fresh buffers, not pooled
    stream->from_zero = true;
    std::uint64_t version;
    std::vector<unsigned char> metadata;
    {
      std::lock_guard lock(state_mutex_);
      version = version_;
      metadata = metadata_;
    }
    stream->target_version = version;
    patch_options po;
    po.base_version = 0;
    po.target_version = version;
    po.metadata = metadata;
    po.include_layout = false;
    source_.encode_full(po, *stream);
    std::lock_guard lock(state_mutex_);
    full_ = stream;
    return stream;
  }

  // A bucketwise full transfer of the newest version, joined by session s (null while the snapshot holds no
  // version: after a failed publish, until the next one).
  std::shared_ptr<full_transfer> full_for(const session& s) {
    if constexpr (bucketwise_full_source<source_type>) {
      std::shared_lock snap(snapshot_mutex_);
      std::lock_guard build(full_mutex_);
      std::uint64_t version;
      std::vector<unsigned char> metadata;
      {
        std::lock_guard lock(state_mutex_);
        if (!has_version_ || !source_.has_version()) return nullptr;
        for (const auto& w : fulls_)
          if (auto f = w.lock(); f && f->version() == version_) {
            f->join(s.id);
            return f;
          }
        version = version_;
        metadata = metadata_;
      }
      patch_options po;
      po.base_version = 0;
      po.target_version = version;
      po.metadata = metadata;
      po.include_layout = false;
      auto frames = source_.full_transfer_frames(po);
      const auto msg = [](message_type t, const std::vector<unsigned char>& body) {
        auto m = std::make_shared<std::vector<std::byte>>(body.size() + 1);
        (*m)[0] = static_cast<std::byte>(t);
        std::memcpy(m->data() + 1, body.data(), body.size());
        return version_stream::message(std::move(m));
      };
      auto f = std::make_shared<full_transfer>(version, frames.target_checksum, msg(message_type::version_begin, frames.prologue),
                                               msg(message_type::version_end, frames.final_header), frames.buckets);
      f->join(s.id);
      std::erase_if(fulls_, [](const auto& w) { return w.expired(); });
      fulls_.push_back(f);
      return f;
    } else {
      (void)s;
      return nullptr;
    }
  }

  // publish() holds the snapshot exclusively: full transfers in flight keep every bucket they still need.
  void park_full_transfers() {
    if constexpr (bucketwise_full_source<source_type>) {
      std::lock_guard build(full_mutex_);
      for (const auto& w : fulls_)
        if (auto f = w.lock(); f && source_.has_version()) f->park_remaining([&](std::size_t i) { return source_.encode_full_bucket(i); });
    }
  }

  // Sends full transfer f (which session s joined); returns its version and checksum.
  std::pair<std::uint64_t, std::uint64_t> send_full(session& s, full_transfer& f) {
    struct leave_guard {
      full_transfer& f;
      std::size_t id;
      ~leave_guard() { f.leave(id); }
    } guard{f, s.id};
    const auto count = [&](std::size_t bytes) {
      std::lock_guard lock(state_mutex_);
      s.bytes_sent += bytes;
    };
    s.link.send(*f.begin_message());
    count(f.begin_message()->size());
    for (std::size_t i = 0; i < f.buckets(); ++i) {
      const auto m = f.bucket(i, [&](std::size_t j) -> version_stream::message {
        std::shared_lock snap(snapshot_mutex_);
        if (auto p = f.parked(j)) return p;  // parked by a publish while this session waited for the snapshot
        {
          std::lock_guard lock(state_mutex_);
          if (!has_version_ || version_ != f.version())
            throw error(errc::invalid_argument, "full transfer: the snapshot moved on before bucket " + std::to_string(j) + " was kept");
        }
        if constexpr (bucketwise_full_source<source_type>) return source_.encode_full_bucket(j);
        else return nullptr;
      });
      s.link.send(*m);
      f.advance(s.id, i + 1);
      count(m->size());
    }
    s.link.send(*f.end_message());
    count(f.end_message()->size());
    return {f.version(), f.target_checksum()};
  }

  // What session s needs next: a kept patch from its version, a full transfer, or nothing (null).
  std::shared_ptr<version_stream> next_for(const session& s) {
    for (const auto& h : history_)
      if (!h->from_zero && s.has_version && h->base_version == s.version && h->base_checksum == s.checksum) return h;
    if (history_.size() == 1 && history_.front()->from_zero && !s.has_version) return history_.front();  // the first publish
    // ... and once encoded, while a session still sends it: a receiver without a version that was too late to
    // take it from the history gets the same stream, as part of the publish (not as a full transfer).
    if (auto f = published_from_zero_.lock(); f && !s.has_version && f->target_version == latest_) return f;
    return nullptr;
  }

  // Every change of the state under state_mutex_ that a waiter might await: counted (publish()'s poll watches
  // the count without the lock), then the sleepers woken.
  void notify_state() {
    state_changes_.fetch_add(1, std::memory_order_release);
    state_cv_.notify_all();
  }

  void fail_session(session& s, const std::string& why) {
    {
      std::lock_guard lock(state_mutex_);
      s.connected = false;
      s.last_error = why;
    }
    notify_state();
  }

  void run_session(session& s) {
    std::vector<std::byte> in;
    try {
      if (!s.link.receive(in)) return fail_session(s, "receiver closed before the handshake");
      hello h;
      if (auto st = decode(in, h); !st) {
        s.link.send(encode_text(message_type::refuse, 0, st.code(), st.message()));
        fail_session(s, "handshake: " + st.message());  // (before the link closes: see the catch below)
        return s.link.close();
      }
      if (h.layout_hash != layout_hash_) {
        s.link.send(encode_text(message_type::refuse, 0, errc::layout_mismatch, "the sender publishes another model layout"));
        fail_session(s, "handshake: layout mismatch");
        return s.link.close();
      }
      {
        std::lock_guard lock(state_mutex_);
        s.has_version = h.has_version;
        s.version = h.version;
        s.checksum = h.checksum;
        s.device_frames = h.device_frames && device_link<Transport>;
        s.handshaken = true;
        s.link.send(encode(welcome{layout_hash_, has_latest_, latest_}));
      }
      notify_state();
      for (;;) {
        std::shared_ptr<version_stream> stream;
        bool need_full = false;
        {
          std::unique_lock lock(state_mutex_);
          state_cv_.wait(lock, [&] {
            return closing_ || (has_latest_ && !(s.has_version && s.version == latest_ && (s.checksum == checksum_ || latest_ != version_)));
          });
          if (closing_) break;
          stream = next_for(s);
          need_full = !stream;
        }
        std::uint64_t sent_version = 0, sent_checksum = 0;
        if (need_full && bucketwise_full_source<source_type>) {
          bool part_of_publish = false;
          {
            std::lock_guard lock(state_mutex_);
            part_of_publish = publishing_from_zero_ && !s.has_version;  // the first version, as it is published
          }
          const auto f = full_for(s);
          if (!f) {
            // No version to send (a publish failed): wait for the next one.
            std::unique_lock lock(state_mutex_);
            const auto latest = latest_;
            state_cv_.wait(lock, [&] { return closing_ || latest_ != latest || has_version_; });
            continue;
          }
          if (!part_of_publish) {
            std::lock_guard lock(state_mutex_);
            ++s.full_transfers;
          }
          std::tie(sent_version, sent_checksum) = send_full(s, *f);
        } else {
          if (need_full) {
            stream = full_stream();
            std::lock_guard lock(state_mutex_);
            ++s.full_transfers;
          }
          const stream_sent sent = send_stream(s, *stream);
          if (sent == stream_sent::part)  // (the catch below ends the session)
            throw error(errc::invalid_argument, "version " + std::to_string(stream->target_version) +
                                                    " failed to encode after part of it was sent: the receiver cannot finish it");
          if (sent == stream_sent::nothing) continue;
          sent_version = stream->target_version;
          sent_checksum = stream->target_checksum;
        }
        if (!s.link.receive(in)) return fail_session(s, "receiver closed the connection");
        if (type_of(in) == message_type::ack) {
          ack a;
          if (auto st = decode(in, a); !st) throw error(st);
          std::lock_guard lock(state_mutex_);
          if (a.version != sent_version || a.checksum != sent_checksum) {
            s.has_version = false;  // it claims something else: resynchronise with a full transfer
            s.last_error = "receiver acknowledged an unexpected version or checksum";
          } else {
            s.has_version = true;
            s.version = a.version;
            s.checksum = a.checksum;
            if (in_sync(s)) {
              s.synced_at = clock::now();
              s.lagging = false;  // caught up: waited for again from the next version on
            }
          }
        } else if (type_of(in) == message_type::nack) {
          nack n;
          (void)decode(in, n);
          std::lock_guard lock(state_mutex_);
          s.has_version = false;
          s.last_error = "receiver refused version " + std::to_string(n.version) + ": " + n.message;
        } else {
          throw error(errc::malformed, "unexpected message from the receiver");
        }
        notify_state();
      }
      s.link.close();
    } catch (const std::exception& e) {
      // Marked over before its link closes, so that receivers() never reports connected a receiver that has
      // seen its link close. (The thread's last use of the link follows; add_receiver joins it before freeing.)
      fail_session(s, e.what());
      // Frames in flight on a device path are cancelled: the session is over, and a transfer its receiver will
      // never take must not hold the GPU (docs/PROTOCOL.md, "Timeouts").
      if constexpr (device_link<Transport>) s.link.abort();
      s.link.close();
    }
  }

  // Sends every message of `stream`: all of them, none (the stream failed to encode, or held nothing), or part of
  // them before it failed, which leaves the receiver inside a version it cannot finish: there is no message that
  // calls a version off, so the session ends (the receiver sees its link close, puts its old weights back, and a
  // reconnect gets a full transfer) rather than leave it waiting and publish() waiting for its ack. A bucket kept
  // in GPU memory goes on the device path where the receiver asked for it, else as a host copy.
  enum class stream_sent { all, nothing, part };
  stream_sent send_stream(session& s, version_stream& stream) {
    for (std::size_t i = 0;; ++i) {
      const auto e = stream.wait_for_entry(i);
      if (!e.host) {
        if (i == 0) return stream_sent::nothing;
        return stream.failed() ? stream_sent::part : stream_sent::all;
      }
      std::size_t bytes = 0;
      if (!e.device) {
        s.link.send(*e.host);
        bytes = e.host->size();
      } else if (send_device(s, *e.host, *e.device)) {
        bytes = e.host->size() + e.device->bytes;
      } else {
        const auto m = stream.host_bucket(i);
        s.link.send(*m);
        bytes = m->size();
      }
      std::lock_guard lock(state_mutex_);
      s.bytes_sent += bytes;
    }
  }

  // The source's work after its last frame (a GPU snapshot advance), waited for before publish() returns; a
  // failure leaves the snapshot holding no version, as a failed encode does.
  void settle_source(publish_report& report) {
    try {
      report.snapshot_seconds += source_.settle();
      report.source.snapshot_seconds = report.snapshot_seconds;
    } catch (...) {
      std::unique_lock snap(snapshot_mutex_);
      std::lock_guard lock(state_mutex_);
      forget_snapshot_locked();
      throw;
    }
  }

  // The source's snapshot holds no version now: the next publish is a full transfer; receivers keep theirs until
  // then. (snapshot_mutex_ exclusive and state_mutex_ held.)
  void forget_snapshot_locked() {
    source_.invalidate();
    has_version_ = false;
    history_.clear();
    full_.reset();
    has_latest_ = false;
    latest_ = version_;
  }

  bool send_device(session& s, const std::vector<std::byte>& announce, const device_frame& f) {
    if constexpr (device_link<Transport>) {
      if (!s.device_frames) return false;
      s.link.send(announce);
      s.link.send_device(f);
      return true;
    } else {
      (void)s, (void)announce, (void)f;
      return false;
    }
  }

  model_layout layout_;
  std::uint64_t layout_hash_;
  sender_options opt_;
  Policy policy_;
  std::size_t largest_full_frame_ = 0;   // the largest full-transfer message of a bucket (the policy's plans)
  std::size_t largest_full_bucket_ = 0;

  std::mutex publish_mutex_;            // one publish at a time
  std::shared_mutex snapshot_mutex_;    // exclusive while publish() encodes and replaces the snapshot
  std::mutex full_mutex_;               // one full-transfer encoding at a time; fulls_
  source_type source_;                  // the snapshot and the encoder (snapshot_mutex_)
  std::shared_ptr<message_pool> pool_ = std::make_shared<message_pool>();  // buffers of the versions' messages

  mutable std::mutex state_mutex_;      // everything below
  std::condition_variable state_cv_;
  std::atomic<std::uint64_t> state_changes_{0};  // notify_state() calls
  std::list<std::unique_ptr<session>> sessions_;
  std::deque<std::shared_ptr<version_stream>> history_;
  std::weak_ptr<version_stream> full_;  // the full transfer being sent, if any (sessions own it)
  std::weak_ptr<version_stream> published_from_zero_;  // a publish from zero, while sessions send it
  std::vector<std::weak_ptr<full_transfer>> fulls_;    // bucketwise full transfers being sent (full_mutex_)
  bool publishing_from_zero_ = false;  // a first version being captured and published (bucketwise sources)
  std::vector<unsigned char> metadata_;
  bool has_version_ = false;            // the snapshot holds a published version
  std::uint64_t version_ = 0, checksum_ = 0;
  bool has_latest_ = false;             // a version is published or being published
  std::uint64_t latest_ = 0;
  bool closing_ = false;
  std::size_t next_id_ = 0;
  clock::time_point published_at_{};    // start of the newest publish()
  std::size_t marked_lagging_ = 0;      // receivers marked lagging, ever
};

}  // namespace sync
SPARSESYNC_NS_END
