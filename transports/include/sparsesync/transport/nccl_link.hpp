// nccl_link<Control>: the sync engine's link between a trainer GPU and one worker GPU. The protocol's host
// messages travel on `Control` (asio_tcp with a key, ucx, inproc: any transport, which also authenticates the
// NCCL bootstrap), and bucket frames travel GPU to GPU with ncclSend / ncclRecv on a communicator of these two
// ranks alone. A `device_link` (device_link.hpp).
//
// Why one communicator per trainer-worker pair rather than one broadcast communicator for all: NCCL operations of
// one communicator run in order, so a worker that dies or stalls inside a collective stalls every rank behind it.
// With a pair communicator a dead worker holds only its own; each link aborts it after `timeout` without progress
// (ncclCommAbort, from the link's watchdog thread), and the trainer's other links never notice. The pair's
// communicator is made non-blocking (a peer that never joins costs `timeout`); frames travel on a blocking one split
// from it, whose calls take 7-18 us instead of 42-156 (nccl_link_options::blocking_transfers), connected at setup and
// called without the link's mutex, so that the watchdog can abort any call that waits. Sparse versions
// are a few hundred MB at most, so sending them once per worker costs little NVLink time next to the encode; the
// dense NCCL broadcast stays the baseline we measure against (bench/gpu/engine_nccl_bench.cpp).
//
// Never-hang argument (docs/PROTOCOL.md, "Timeouts" and "Device frames: credits"): the trainer's end enqueues
// a frame's ncclSend only once the worker has said, on the control link, that its ncclRecv for that frame is
// enqueued (a credit). The engine's send_device() only queues the frame: a credit reader thread per link waits
// for the credits and enqueues the sends, so the engine announces the next frame meanwhile. The worker's end is a
// pipelined_device_link: it posts a frame's receive (and sends its credit) as soon as the frame is announced, up to
// max_posted_device_receives ahead (waiting for each credit on the engine's thread cost ~0.3 ms per frame, and
// posting only after the last frame was handed on ~7 ms per 7B version: bench/results/engine-nccl/). So no send
// kernel ever waits on the trainer's GPU for a peer that stopped: a stalled or dead worker holds no SM, no
// hardware queue and no device-wide synchronization of the trainer, and the other links never notice it. Every
// device transfer is enqueued on the link's own stream; the engine's streams wait on nothing of it (a frame is
// handed on only once complete_receive_device saw it arrive, and the sender's frames are released only once the
// host saw them leave). A watchdog thread per link aborts the link when a credit has not come, the oldest posted
// receive has not completed, or the oldest send has made no progress, for `timeout`; a credit wait is ended by
// aborting the control link too (the session is over). The thread in complete_receive_device sleeps on a
// blocking-sync event meanwhile (no polling of the driver: a spinning thread would slow every other CUDA call of the process),
// and the abort wakes it.
//
// A worker that dies after its credit, mid-transfer, can still hold its one transfer on the trainer's GPU until
// the link aborts (NCCL kernels wait for their peer, and a CUDA call that synchronizes the device waits for them:
// NCCL's "using multiple communicators" caveat). Give workers a longer timeout than the trainer (the defaults do:
// 10 s and 30 s), so that a healthy worker never gives up on a trainer that is waiting out another worker's death.
#pragma once

#include <sparsesync/cuda/device_scope.hpp>
#include <sparsesync/cuda/urgent_stream.hpp>
#include <sparsesync/transport/detail/device_link_forwarding.hpp>
#include <sparsesync/transport/device_link.hpp>
#include <sparsesync/transport/nccl.hpp>

#include <sparsesync/core/little_endian.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

SPARSESYNC_NS_BEGIN

struct nccl_link_options {
  int device = -1;                            // CUDA device of this end (-1: the current one)
  // Setup, and a transfer without progress for this long, abort the link. 0: 10 s for the trainer's end, 30 s for
  // a worker's (longer: see above).
  std::chrono::milliseconds timeout{0};
  nccl_comm_options comm{8, 0};               // a few CTAs carry sparse frames; the rest of the GPU encodes and applies
  // Sends enqueued on the GPU and not yet left, at most: send_device() waits for the oldest beyond this. Work a
  // dead peer will never take fills the GPU's queue of pending work, and once that is full every launch of the
  // process waits (the trainer's encode and its other links' transfers too) until the link aborts.
  std::size_t max_frames_in_flight = 4;
  // Frames travel on a blocking communicator split from the pair's non-blocking one (whose setup the timeout
  // bounds): a non-blocking communicator finishes every ncclSend / ncclRecv on a thread of its own, 42-156 us a
  // call against 7-18 us blocking (bench/gpu/nccl_p2p_probe.cu), paid twice per frame on the credit path; at a
  // version's end, when the last frames come out together, those calls queue behind each other (on two H200s an
  // atomic 7B version at 1% took 14.64 ms non-blocking, 14.18 / 14.13 blocking in alternating runs; 1 -> 3 workers
  // 16.23 / 15.01 against 14.57 / 14.49: bench/results/gpu-test-runs/s23/, calls F and H). Its channels are
  // connected at setup by one transfer, so that no later call waits for the peer;
  // every blocking call is made without the link's mutex, so the watchdog can still abort it. false: every call
  // on the non-blocking communicator, as before.
  bool blocking_transfers = true;
};

namespace detail {
// When any nccl_link of this process last aborted. A transfer stuck on a dead peer holds up work queued behind
// it on the GPU (NCCL kernels wait for their peer, and streams share the device's hardware queues), so other
// links may make no progress until it is aborted: their stall clocks restart then, rather than aborting healthy
// links too.
inline std::atomic<std::int64_t>& last_link_abort() {
  static std::atomic<std::int64_t> at{0};
  return at;
}

// The link's own control message, consumed by the trainer's end and never seen by the engine: "my receive for
// your next device frame, of u64 bytes, is enqueued" (docs/PROTOCOL.md, "Device frames: credits"). Its type byte
// is outside the protocol's message types.
inline constexpr std::byte device_credit_type{0xC0};
inline constexpr std::size_t device_credit_size = 9;

inline std::array<std::byte, device_credit_size> encode_device_credit(std::uint64_t bytes) {
  std::array<std::byte, device_credit_size> m{};
  m[0] = device_credit_type;
  store_le<std::uint64_t>(reinterpret_cast<unsigned char*>(m.data()) + 1, bytes);
  return m;
}
inline bool is_device_credit(std::span<const std::byte> m) { return !m.empty() && m[0] == device_credit_type; }

// SPARSESYNC_NCCL_LINK_TRACE=1 prints each credit, transfer and abort of every link to stderr with a time stamp:
// what a stalled link waited for is then on record (docs/PROTOCOL.md, "Timeouts").
inline bool nccl_link_trace_on() {
  static const bool on = [] {
    const char* e = std::getenv("SPARSESYNC_NCCL_LINK_TRACE");
    return e && *e && *e != '0';
  }();
  return on;
}
inline void nccl_link_trace(bool trainer, int device, const std::string& what) {
  static const auto t0 = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "[nccl_link %s gpu %d +%.3f ms] %s\n", trainer ? "trainer" : "worker", device, ms, what.c_str());
}

// With the trace on, a line when the GPU gets past this point of `stream` (a host function queued behind the
// transfer, run by CUDA's callback thread some microseconds later): when a frame left or landed on the GPU, next
// to when the host enqueued or noticed it. It holds the stream up by that much, so only traced runs pay it.
inline void nccl_link_trace_on_gpu(cudaStream_t stream, bool trainer, int device, std::string what) {
  struct line {
    bool trainer;
    int device;
    std::string what;
  };
  auto* l = new line{trainer, device, std::move(what)};
  const cudaError_t e = cudaLaunchHostFunc(
      stream,
      [](void* p) {
        std::unique_ptr<line> l(static_cast<line*>(p));
        nccl_link_trace(l->trainer, l->device, l->what);
      },
      l);
  if (e != cudaSuccess) delete l;
}
}  // namespace detail

// What a link moved on its device path, and how often NCCL deferred a call (ncclInProgress: the caller then
// waited for it to be enqueued).
struct nccl_link_stats {
  std::uint64_t frames_sent = 0, bytes_sent = 0, frames_received = 0, bytes_received = 0, deferred_calls = 0;
  double abort_ms = -1;  // how long the communicator's ncclCommAbort took, once the link aborted (-1: not yet)
};

template <class Control>
class nccl_link : public detail::device_link_forwarding<nccl_link<Control>, /*Pipelined=*/true> {
  static_assert(check_transport<Control>);
  friend class detail::device_link_forwarding<nccl_link, true>;
  using clock = std::chrono::steady_clock;

 public:
  using transport_concept = transport_tag;
  using device_link_concept = device_link_tag;

  // The trainer's end (rank 0) and the worker's end (rank 1) of a connected, authenticated control link: both ends
  // call at the same time (the communicator is made by both); either throws transport_error after `timeout`.
  static nccl_link connect_sender(Control control, const nccl_link_options& opt = {}) { return connect(std::move(control), true, opt); }
  static nccl_link connect_receiver(Control control, const nccl_link_options& opt = {}) { return connect(std::move(control), false, opt); }

  nccl_link(nccl_link&&) noexcept = default;
  nccl_link& operator=(nccl_link&&) noexcept = default;
  nccl_link(const nccl_link&) = delete;
  nccl_link& operator=(const nccl_link&) = delete;
  ~nccl_link() = default;

  // The transport: the protocol's host messages, on the control link (credits are taken out on the way).
  void send(std::span<const std::byte> m) { s_->send_control(m); }
  bool receive(std::vector<std::byte>& m) { return s_->receive_control(m); }
  // close(), max_frame_size(), send_device(), receive_device(), post_receive_device(), complete_receive_device(),
  // abort(), aborted(), control() and stats() forward to the state: detail::device_link_forwarding.

 private:
  // The link's calls come on the engine's threads, whose current device is theirs: each makes the link's current.
  using on_device = cuda::device_scope;

  struct state {
    state(Control c, const nccl_link_options& o, bool sender) : control(std::move(c)), opt(o), trainer(sender) {
      if (opt.timeout.count() <= 0) opt.timeout = sender ? std::chrono::milliseconds(10000) : std::chrono::milliseconds(30000);
    }
    state(const state&) = delete;
    state& operator=(const state&) = delete;

    ~state() {
      {
        std::lock_guard lock(mutex);
        stopping = true;
      }
      cv.notify_all();
      if (credit_reader.joinable()) {
        control.close();  // it may be reading the control link, for a frame whose credit never came
        credit_reader.join();
      }
      if (watchdog.joinable()) watchdog.join();
      if (device < 0) return;
      on_device guard(device, std::nothrow);
      // Abort, not destroy: it never waits for the peer, and frames still on their way when the link goes are
      // cancelled (the peer may be gone). An abort the watchdog had not got to yet happens here.
      if (doomed) ncclCommAbort(doomed);
      if (comm) ncclCommAbort(comm);
      if (setup_comm) ncclCommAbort(setup_comm);
      doomed = comm = setup_comm = nullptr;
      if (stream) cudaStreamSynchronize(stream);  // the aborted kernels have left
      for (auto& s : sends) cudaEventDestroy(s.done);
      sends.clear();
      for (auto e : spare_events) cudaEventDestroy(e);
      if (after_event) cudaEventDestroy(after_event);
      for (auto e : recv_done)
        if (e) cudaEventDestroy(e);
      if (heads) cudaFreeHost(heads);
      if (stream) cudaStreamDestroy(stream);
    }

    // Makes the pair communicator (non-blocking, so that a peer that never joins costs `timeout`, not forever).
    void init(const nccl_bootstrap& b) {
      if (opt.device < 0) detail::check_cuda(cudaGetDevice(&opt.device), "cudaGetDevice");
      on_device guard(opt.device, std::nothrow);
      device = opt.device;
      peer = 1 - b.rank;
      detail::check_cuda(cuda::create_urgent_stream(&stream), "cudaStreamCreateWithPriority");  // frames are not held up by the codec's passes
      detail::check_cuda(cudaEventCreateWithFlags(&after_event, cudaEventDisableTiming), "cudaEventCreate");
      for (auto& e : recv_done) detail::check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventBlockingSync), "cudaEventCreate");
      detail::check_cuda(cudaMallocHost(reinterpret_cast<void**>(&heads), max_posted_device_receives * max_device_frame_head), "cudaMallocHost");
      ncclConfig_t config = detail::nccl_config(opt.comm, false, "nccl_link");
      std::lock_guard lock(mutex);
      const ncclResult_t r = ncclCommInitRankConfig(&comm, 2, b.id, b.rank, &config);
      if (r != ncclSuccess && r != ncclInProgress) {
        comm = nullptr;
        detail::check_nccl(r, "ncclCommInitRankConfig");
      }
      settle_locked("the NCCL communicator of the pair (did the peer join?)");
      if (opt.blocking_transfers) make_transfer_comm_locked(b.rank);
    }

    // The frames' blocking communicator (nccl_link_options::blocking_transfers): split from the pair's, then its
    // channels connected by one transfer of connect_bytes, each step bounded by the timeout (a step still running
    // then is aborted: NCCL's blocked call returns, and this throws).
    static constexpr std::size_t connect_bytes = std::size_t{64} << 20;  // past the size at which NCCL uses every p2p channel
    void make_transfer_comm_locked(int rank) {
      const auto deadline = clock::now() + opt.timeout;
      ncclConfig_t config = detail::nccl_config(opt.comm, true, "nccl_link");
      ncclComm_t child = nullptr;
      {
        setup_watch watch(comm, deadline, device);
        ncclResult_t r = ncclCommSplit(comm, 0, rank, &child, &config);
        // A non-blocking parent finishes the split in the background: the child's handle is written when it is made
        // (by NCCL's thread), then the child says when it is ready.
        while ((r == ncclSuccess || r == ncclInProgress) && !watch.fired()) {
          if (ncclComm_t made = std::atomic_ref<ncclComm_t>(child).load()) {
            ncclCommGetAsyncError(made, &r);
            if (r != ncclInProgress) break;
          } else {
            ncclResult_t parent = ncclSuccess;
            ncclCommGetAsyncError(comm, &parent);
            if (parent != ncclSuccess && parent != ncclInProgress) r = parent;
          }
          std::this_thread::yield();
        }
        if (watch.finish() || r != ncclSuccess || !child) {
          if (child) ncclCommAbort(child);
          if (watch.fired()) comm = nullptr;  // aborted by the watch
          throw transport_error(watch.fired() ? transport_errc::timed_out : transport_errc::backend,
                                std::string("nccl_link: the frames' communicator: ") +
                                    (watch.fired() ? "no answer within the timeout" : ncclGetErrorString(r)));
        }
      }
      setup_comm = comm;
      comm = child;
      blocking = true;
      // Stream-ordered: a cudaFree would wait for the whole device, so a late or restarted worker's setup would
      // wait for the trainer's other links' transfers in flight.
      void* buf = nullptr;
      detail::check_cuda(cudaMallocAsync(&buf, connect_bytes, stream), "cudaMallocAsync");
      cudaEvent_t done{};
      ncclResult_t r = ncclSuccess;
      bool landed = false;
      {
        setup_watch watch(comm, deadline, device);
        r = trainer ? ncclSend(buf, connect_bytes, ncclUint8, peer, comm, stream) : ncclRecv(buf, connect_bytes, ncclUint8, peer, comm, stream);
        if (r == ncclSuccess && cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess && cudaEventRecord(done, stream) == cudaSuccess) {
          while (!watch.fired()) {
            const cudaError_t q = cudaEventQuery(done);
            if (q != cudaErrorNotReady) {
              landed = q == cudaSuccess;
              break;
            }
            std::this_thread::sleep_for(std::chrono::microseconds(50));
          }
        }
        if (watch.finish()) comm = nullptr;  // aborted by the watch
      }
      if (comm && !landed) {
        ncclCommAbort(comm);
        comm = nullptr;
      }
      cudaStreamSynchronize(stream);  // (an aborted transfer's kernel has left)
      if (done) cudaEventDestroy(done);
      cudaFreeAsync(buf, stream);
      if (!comm)
        throw transport_error(r == ncclSuccess ? transport_errc::timed_out : transport_errc::backend,
                              std::string("nccl_link: connecting the frames' communicator: ") +
                                  (r == ncclSuccess ? "no transfer within the timeout" : ncclGetErrorString(r)));
    }

    // Aborts `target` if the setup step it guards has not finished by `deadline`: the NCCL call blocked on it
    // then returns an error.
    class setup_watch {
     public:
      setup_watch(ncclComm_t target, clock::time_point deadline, int dev)
          : thread_([this, target, deadline, dev] {
              std::unique_lock lock(m_);
              if (cv_.wait_until(lock, deadline, [&] { return done_; })) return;
              fired_ = true;
              lock.unlock();
              on_device guard(dev, std::nothrow);
              ncclCommAbort(target);
            }) {}
      setup_watch(const setup_watch&) = delete;
      setup_watch& operator=(const setup_watch&) = delete;
      ~setup_watch() { finish(); }
      // Ends the watch; true if it fired (the target is aborted).
      bool finish() {
        {
          std::lock_guard lock(m_);
          done_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
        return fired_;
      }
      [[nodiscard]] bool fired() const {
        std::lock_guard lock(m_);
        return fired_;
      }

     private:
      mutable std::mutex m_;
      std::condition_variable cv_;
      bool done_ = false, fired_ = false;
      std::thread thread_;
    };

    // Waits for the non-blocking communicator's last call to finish, up to the timeout; aborts and throws on error.
    void settle_locked(const char* what) {
      const auto deadline = clock::now() + opt.timeout;
      for (;;) {
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        if (async == ncclSuccess) return;
        if (async != ncclInProgress) {
          abort_locked(std::string("NCCL error: ") + ncclGetErrorString(async));
          throw transport_error(transport_errc::backend, std::string("nccl_link: ") + what + ": " + ncclGetErrorString(async));
        }
        if (clock::now() > deadline) {
          abort_locked("timed out", transport_errc::timed_out);
          throw transport_error(transport_errc::timed_out, std::string("nccl_link: ") + what + ": no answer within " +
                                                               std::to_string(opt.timeout.count()) + " ms");
        }
        std::this_thread::yield();  // an enqueue NCCL deferred is usually microseconds away
      }
    }

    // The result of enqueueing `what` on the non-blocking communicator: waits for a deferred enqueue (up to the
    // timeout); a failure aborts the link and throws.
    void enqueued_locked(ncclResult_t r, const char* what) {
      if (r == ncclInProgress) {
        ++stats.deferred_calls;
        settle_locked(what);
      } else if (r != ncclSuccess) {
        abort_locked(std::string(what) + ": " + ncclGetErrorString(r));
        detail::check_nccl(r, what);
      }
    }

    void trace(const std::string& what) const {
      if (detail::nccl_link_trace_on()) detail::nccl_link_trace(trainer, device, what);
    }
    // A trace line when the GPU gets past this point of the link's stream.
    void trace_on_gpu(const char* what) const {
      if (detail::nccl_link_trace_on()) detail::nccl_link_trace_on_gpu(stream, trainer, device, what);
    }

    void throw_if_aborted_locked() const {
      if (aborted) throw transport_error(abort_code, "nccl_link: the device path was aborted (" + why + ")");
    }

    // The protocol's host messages. Sends are serialized: a worker's credits go out from receive_device while
    // its engine may send on another thread.
    void send_control(std::span<const std::byte> m) {
      std::lock_guard lock(send_mutex);
      control.send(m);
    }

    // The next protocol message: one the credit reader already read, else the control link's next. The control
    // link has one reader at a time: while frames wait for credits the credit reader (send_loop) reads it, and this
    // waits for their messages or for the frames to be sent. A credit read here has no frame waiting for it: the
    // peer does not follow the protocol.
    bool receive_control(std::vector<std::byte>& m) {
      {
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return !inbox.empty() || pending.empty() || aborted; });
        if (!inbox.empty()) {
          m = std::move(inbox.front());
          inbox.pop_front();
          return true;
        }
        throw_if_aborted_locked();
      }
      if (!control.receive(m)) return false;
      if (detail::is_device_credit(m)) {
        abort("an unexpected receive credit");
        throw transport_error(transport_errc::protocol, "nccl_link: the peer sent a receive credit with no device frame waiting for it");
      }
      return true;
    }

    // The trainer's end: the frame is queued for the credit reader, which enqueues its ncclSend once the peer says
    // its receive is posted. The caller goes on meanwhile (its next frame's announcement reaches the worker before
    // this frame has arrived there, so the worker posts the next receive as soon as it can). Frames whose
    // credits have not come are few: the queue is bounded like the sends in flight.
    void send(const device_frame& f) {
      if (f.bytes == 0) return;
      std::unique_lock lock(mutex);
      throw_if_aborted_locked();
      while (pending.size() >= std::max<std::size_t>(1, opt.max_frames_in_flight)) {
        cv.wait_for(lock, std::chrono::milliseconds(1));
        throw_if_aborted_locked();
      }
      pending.push_back(f);
      if (pending.size() == 1) start_credit_clock_locked();
      if (!watchdog.joinable()) watchdog = std::thread([this] { watch(); });
      if (!credit_reader.joinable()) credit_reader = std::thread([this] { send_loop(); });
      cv.notify_all();
    }

    // The oldest queued frame starts waiting for its credit (the watchdog's clock).
    void start_credit_clock_locked() {
      credit_since = clock::now();
      trace("waiting for the credit of a frame of " + std::to_string(pending.front().bytes) + " bytes");
    }

    // The credit reader: for the oldest queued frame, reads the control link until its credit comes (protocol
    // messages read meanwhile wait in the inbox: a receiver may refuse a version while its frames still come),
    // then enqueues its send. The watchdog ends a wait longer than `timeout` by aborting the control link. A
    // failure aborts the link: the engine's next call on it throws.
    void send_loop() {
      std::vector<std::byte> m;
      for (;;) {
        std::size_t bytes = 0;
        {
          std::unique_lock lock(mutex);
          cv.wait(lock, [&] { return stopping || aborted || !pending.empty(); });
          if (stopping || aborted) return;
          bytes = pending.front().bytes;
        }
        bool credited = false;
        while (!credited) {
          bool got = false;
          try {
            got = control.receive(m);
          } catch (const transport_error& e) {
            abort(std::string("waiting for a receive credit: ") + e.what(), e.transport_code());
            return;
          }
          if (!got) return abort("the peer closed its control link before taking a device frame");
          std::lock_guard lock(mutex);
          if (!detail::is_device_credit(m)) {
            if (inbox.size() >= max_inbox) return abort_locked("the peer sent too many messages while a device frame waited for its credit", transport_errc::protocol);
            inbox.push_back(std::move(m));
            m = {};
            cv.notify_all();
            continue;
          }
          if (m.size() != detail::device_credit_size || detail::load_le<std::uint64_t>(reinterpret_cast<const unsigned char*>(m.data()) + 1) != bytes)
            return abort_locked("the peer's receive credit does not match the device frame of " + std::to_string(bytes) + " bytes", transport_errc::protocol);
          credited = true;
        }
        std::unique_lock lock(mutex);
        if (aborted) return;
        trace("credit received");
        try {
          enqueue_send_locked(lock, pending.front());
        } catch (const std::exception& e) {
          return abort_locked(std::string("enqueueing a send: ") + e.what(), transport_errc::backend);
        }
        pending.pop_front();
        if (!pending.empty()) start_credit_clock_locked();
        cv.notify_all();
      }
    }

    // ncclSend of a credited frame on the link's stream, after the frame's `ready` event; at most
    // max_frames_in_flight of them not yet left (the watchdog aborts the link if the oldest never leaves).
    void enqueue_send_locked(std::unique_lock<std::mutex>& lock, const device_frame& f) {
      on_device guard(device, std::nothrow);
      reap_locked();
      while (sends.size() >= std::max<std::size_t>(1, opt.max_frames_in_flight)) {
        cv.wait_for(lock, std::chrono::microseconds(50));
        throw_if_aborted_locked();
        reap_locked();
      }
      if (f.ready) detail::check_cuda(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(f.ready), 0), "cudaStreamWaitEvent");
      if (blocking) {
        // Without the mutex: a call that waited for the peer (a connection NCCL still makes) stays abortable.
        ncclComm_t c = comm;
        lock.unlock();
        const ncclResult_t r = ncclSend(f.data, f.bytes, ncclUint8, peer, c, stream);
        lock.lock();
        throw_if_aborted_locked();
        enqueued_locked(r, "ncclSend");
      } else {
        enqueued_locked(ncclSend(f.data, f.bytes, ncclUint8, peer, comm, stream), "ncclSend");
      }
      trace("send enqueued, " + std::to_string(sends.size() + 1) + " in flight");
      trace_on_gpu("send left the GPU");
      ++stats.frames_sent;
      stats.bytes_sent += f.bytes;
      cudaEvent_t done = take_event_locked();
      detail::check_cuda(cudaEventRecord(done, stream), "cudaEventRecord");
      if (sends.empty()) progress = clock::now();
      sends.push_back({done, f.owner});
    }

    void receive(void* dst, std::size_t bytes, cudaStream_t after, std::span<unsigned char> out_head) {
      post_receive(dst, bytes, after);
      complete_receive(out_head);
    }

    // Enqueues the receive of the next frame and sends its credit; the frame's head (up to max_device_frame_head
    // bytes) comes down behind it into the receive's pinned slot.
    void post_receive(void* dst, std::size_t bytes, cudaStream_t after) {
      ncclResult_t posted = ncclSuccess;
      {
        std::unique_lock lock(mutex);
        throw_if_aborted_locked();
        if (receives.size() >= max_posted_device_receives)
          throw transport_error(transport_errc::invalid_argument, "nccl_link: more than " + std::to_string(max_posted_device_receives) +
                                                                      " device receives posted and not completed");
        on_device guard(device, std::nothrow);
        settle_receives_locked();  // NCCL takes no call on a communicator whose last one is still in progress
        if (after) {
          detail::check_cuda(cudaEventRecord(after_event, after), "cudaEventRecord");
          detail::check_cuda(cudaStreamWaitEvent(stream, after_event, 0), "cudaStreamWaitEvent");
        }
        // Listed before the call: the watchdog's clock runs while a blocking call waits. (None should: the channels
        // were connected at setup. A connection NCCL still made here would wait for the trainer's send, which
        // waits for our credit: the watchdog's abort ends it after the timeout, and the session with it.)
        const std::size_t slot = receives.empty() ? 0 : (receives.back().slot + 1) % max_posted_device_receives;
        receives.push_back({slot, bytes, clock::now(), dst, false});
        if (!watchdog.joinable()) watchdog = std::thread([this] { watch(); });
        if (blocking) {
          ncclComm_t c = comm;
          lock.unlock();  // (the watchdog can abort a call that waits)
          posted = ncclRecv(dst, bytes, ncclUint8, peer, c, stream);
          lock.lock();
          throw_if_aborted_locked();
        } else {
          posted = ncclRecv(dst, bytes, ncclUint8, peer, comm, stream);
        }
        if (posted != ncclSuccess && posted != ncclInProgress) {
          receives.pop_back();
          abort_locked(std::string("ncclRecv: ") + ncclGetErrorString(posted));
          detail::check_nccl(posted, "ncclRecv");
        }
        if (posted == ncclSuccess) {
          try {
            finish_enqueue_locked();
          } catch (...) {
            abort_locked("the receive failed to enqueue");
            throw;
          }
        }
        trace("receive of " + std::to_string(bytes) + " bytes posted" + (posted == ncclInProgress ? " (deferred)" : "") + ", " +
              std::to_string(receives.size()) + " posted");
        cv.notify_all();
      }
      // The receive is posted: the trainer may enqueue its send. On a non-blocking communicator the credit goes
      // before our enqueue has settled: NCCL connects a pair on its first transfer, which needs the trainer's send
      // as much as this receive.
      try {
        const auto credit = detail::encode_device_credit(bytes);
        send_control(credit);
      } catch (const std::exception& e) {
        abort(std::string("sending a receive credit: ") + e.what());
        throw transport_error(transport_errc::connection_closed, std::string("nccl_link: sending a receive credit: ") + e.what());
      }
      // A deferred enqueue (ncclInProgress) is not waited for here: NCCL finishes it in the background, and the
      // next call that needs it (the next post, a completion, a poll) settles it, usually with nothing left to
      // wait for. Waiting here cost the worker's thread 0.05-0.15 ms per frame (session 12, call C's trace).
      trace("credit sent");
    }

    // Settles the newest posted receive's deferred ncclRecv (the only one that can be unsettled: every NCCL call
    // settles the one before) and puts its head copy and its event behind it on the stream. Throws (the link
    // aborted) when the enqueue failed or did not settle within the timeout.
    void settle_receives_locked() {
      if (receives.empty() || receives.back().enqueued) return;
      try {
        throw_if_aborted_locked();
        on_device guard(device, std::nothrow);
        ++stats.deferred_calls;
        settle_locked("ncclRecv");
        finish_enqueue_locked();
      } catch (...) {
        abort_locked("the receive failed to enqueue");
        throw;
      }
    }

    // After the newest posted receive's ncclRecv is on the stream: its head copy (up to max_device_frame_head bytes,
    // into the receive's pinned slot) and the event complete_receive waits on.
    void finish_enqueue_locked() {
      auto& r = receives.back();
      const std::size_t head_bytes = std::min(r.bytes, max_device_frame_head);
      if (head_bytes)
        detail::check_cuda(cudaMemcpyAsync(heads + r.slot * max_device_frame_head, r.dst, head_bytes, cudaMemcpyDeviceToHost, stream),
                           "copy frame head");
      detail::check_cuda(cudaEventRecord(recv_done[r.slot], stream), "cudaEventRecord");
      r.enqueued = true;
      trace("receive settled");
      trace_on_gpu("frame landed on the GPU");
    }

    // Whether complete_receive would find the oldest posted receive done (or failed: it then reports that). Its
    // event is queried only once its deferred enqueue has settled and the event is recorded: an unrecorded event
    // would read as done.
    bool receive_arrived() noexcept {
      std::lock_guard lock(mutex);
      if (receives.empty()) return false;
      if (aborted) return true;
      on_device guard(device, std::nothrow);
      if (!receives.front().enqueued) {
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        if (async == ncclInProgress) return false;
        try {
          settle_receives_locked();
        } catch (...) {
          return true;  // aborted: complete_receive says why
        }
      }
      return cudaEventQuery(recv_done[receives.front().slot]) != cudaErrorNotReady;
    }

    // Waits for the oldest posted receive; the watchdog aborts the communicator (which ends the receive) when it
    // has not come within the timeout.
    void complete_receive(std::span<unsigned char> out_head) {
      posted_receive r;
      {
        std::lock_guard lock(mutex);
        if (receives.empty()) throw transport_error(transport_errc::invalid_argument, "nccl_link: no device receive posted");
        settle_receives_locked();
        r = receives.front();
        if (out_head.size() > std::min(r.bytes, max_device_frame_head))
          throw transport_error(transport_errc::invalid_argument, "nccl_link: the head to copy exceeds the frame or 256 bytes");
      }
      // Sleeps until the frame is there (a blocking-sync event); an aborted link's stream drains, which wakes it.
      const cudaError_t done = cudaEventSynchronize(recv_done[r.slot]);
      {
        std::lock_guard lock(mutex);
        receives.pop_front();
        if (!receives.empty()) receives.front().since = std::max(receives.front().since, clock::now());
        if (aborted)
          throw transport_error(why.find("timeout") != std::string::npos ? transport_errc::timed_out : transport_errc::connection_closed,
                                "nccl_link: no device frame of " + std::to_string(r.bytes) + " bytes: the link was aborted (" + why + ")");
        if (done != cudaSuccess) {
          abort_locked(std::string("CUDA error: ") + cudaGetErrorString(done));
          throw transport_error(transport_errc::backend, std::string("nccl_link: receive: ") + cudaGetErrorString(done));
        }
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
          abort_locked(std::string("NCCL error: ") + ncclGetErrorString(async));
          throw transport_error(transport_errc::backend, std::string("nccl_link: receive: ") + ncclGetErrorString(async));
        }
        trace("frame received");
        ++stats.frames_received;
        stats.bytes_received += r.bytes;
      }
      if (!out_head.empty()) std::memcpy(out_head.data(), heads + r.slot * max_device_frame_head, out_head.size());
    }

    void abort(const std::string& reason, transport_errc code = transport_errc::connection_closed) noexcept {
      std::lock_guard lock(mutex);
      abort_locked(reason, code);
    }

    // Marks the link aborted at once; the communicator itself is aborted by the watchdog thread, outside the
    // mutex. ncclCommAbort frees the communicator's device memory, and a cudaFree waits for every kernel on the
    // device, other links' transfers included (NCCL's "using multiple communicators" caveat): held under the mutex,
    // it would stall this link's callers, and aborted() / stats(), for as long.
    void abort_locked(const std::string& reason, transport_errc code = transport_errc::connection_closed) noexcept {
      if (aborted) return;
      aborted = true;
      why = reason;
      abort_code = code;
      detail::last_link_abort().store(clock::now().time_since_epoch().count());
      try {
        trace("abort: " + reason);
      } catch (...) {
      }
      if (comm) {
        doomed = comm;  // no caller uses it again: each checks `aborted` under the mutex first
        comm = nullptr;
        if (!watchdog.joinable() && !stopping) {
          try {
            watchdog = std::thread([this] { watch(); });
          } catch (...) {
            on_device guard(device, std::nothrow);
            ncclCommAbort(doomed);  // no thread to hand it to: here, then
            doomed = nullptr;
          }
        }
      }
      cv.notify_all();
    }

    // The watchdog's part of an abort (mutex held on entry and on return): the kernels of transfers in flight exit,
    // the link's stream drains, and a receive sleeping on its event wakes.
    void abort_doomed(std::unique_lock<std::mutex>& lock) {
      ncclComm_t c = doomed;
      doomed = nullptr;
      lock.unlock();
      const auto t0 = clock::now();
      {
        on_device guard(device, std::nothrow);
        ncclCommAbort(c);
      }
      const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      lock.lock();
      stats.abort_ms = ms;
      trace("communicator aborted in " + std::to_string(ms) + " ms");
      cv.notify_all();
    }

    // Drops the frames that have left (their owners may free them now); true if any did.
    bool reap_locked() {
      bool any = false;
      while (!sends.empty() && cudaEventQuery(sends.front().done) == cudaSuccess) {
        spare_events.push_back(sends.front().done);
        sends.pop_front();
        progress = clock::now();
        any = true;
      }
      return any;
    }

    static clock::time_point last_abort() { return clock::time_point(clock::duration(detail::last_link_abort().load())); }

    cudaEvent_t take_event_locked() {
      if (!spare_events.empty()) {
        cudaEvent_t e = spare_events.back();
        spare_events.pop_back();
        return e;
      }
      cudaEvent_t e{};
      detail::check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
      return e;
    }

    // The watchdog: a receive that has not completed within `timeout`, or a send whose frame has not left `timeout`
    // after the one before it did, aborts the link.
    void watch() {
      std::unique_lock lock(mutex);
      cudaSetDevice(device);
      while (!stopping) {
        if (doomed) {
          abort_doomed(lock);
          continue;
        }
        reap_locked();
        if (!pending.empty() && !aborted) {
          if (clock::now() - credit_since > opt.timeout) {  // a peer posts its receive whatever our GPU does
            abort_locked("no receive credit for a device frame of " + std::to_string(pending.front().bytes) +
                             " bytes within the timeout: the peer posted no receive (it stopped receiving)",
                         transport_errc::timed_out);
            abort_control();  // ends the credit wait: the session is over
            continue;
          }
          cv.wait_for(lock, std::chrono::milliseconds(1));
          continue;
        }
        if (!receives.empty() && !aborted) {
          if (clock::now() - std::max(receives.front().since, last_abort()) > opt.timeout) {
            abort_locked("a device frame did not arrive within the timeout");
            continue;
          }
          cv.wait_for(lock, std::chrono::milliseconds(1));
          continue;
        }
        if (sends.empty() || aborted) {
          if (aborted && !sends.empty()) {
            // After the abort the stream drains; frames are released as their events pass.
            cv.wait_for(lock, std::chrono::milliseconds(5));
            continue;
          }
          cv.wait(lock);
          continue;
        }
        if (clock::now() - std::max(progress, last_abort()) > opt.timeout) {
          abort_locked("a device frame did not leave within the timeout (the peer stopped receiving)");
          continue;
        }
        cv.wait_for(lock, std::chrono::milliseconds(1));
      }
    }

    // Tears the control link down where the transport can (asio_tcp, ucx, inproc): blocked calls on it fail.
    void abort_control() noexcept {
      if constexpr (requires(Control& c) { c.abort(); }) control.abort();
    }

    struct in_flight {
      cudaEvent_t done;
      std::shared_ptr<const void> owner;
    };
    struct posted_receive {
      std::size_t slot = 0;
      std::size_t bytes = 0;
      clock::time_point since{};  // the watchdog's clock for the oldest: when it was posted or became the oldest
      void* dst = nullptr;
      bool enqueued = false;  // its ncclRecv has settled and its head copy and event are on the stream
    };

    Control control;
    nccl_link_options opt;
    int device = -1, peer = 1;
    ncclComm_t comm = nullptr;        // the frames' communicator
    ncclComm_t setup_comm = nullptr;  // with blocking transfers: the non-blocking pair communicator it was split from
    bool blocking = false;            // comm is blocking: its calls are made without the mutex
    ncclComm_t doomed = nullptr;  // aborted, its ncclCommAbort not yet done (the watchdog's job)
    bool trainer = false;         // this end sends the frames
    cudaStream_t stream = nullptr;
    cudaEvent_t after_event{};
    // Posted receives: slot i has its completion event and, in `heads`, the pinned room its frame's head comes
    // down to. Each receive takes the slot after the newest one's; at most max_posted_device_receives are in use.
    std::array<cudaEvent_t, max_posted_device_receives> recv_done{};
    unsigned char* heads = nullptr;

    static constexpr std::size_t max_inbox = 64;

    mutable std::mutex mutex;  // comm, sends, aborted, inbox, the clocks
    std::mutex send_mutex;     // the control link's sending direction
    std::condition_variable cv;
    std::deque<std::vector<std::byte>> inbox;  // protocol messages read during a credit wait
    clock::time_point credit_since{};
    std::deque<device_frame> pending;  // announced frames whose credits have not come, oldest first
    std::thread credit_reader;         // send_loop(): the trainer's end only, from its first frame
    transport_errc abort_code = transport_errc::connection_closed;
    std::deque<in_flight> sends;
    std::vector<cudaEvent_t> spare_events;
    clock::time_point progress{};
    std::deque<posted_receive> receives;  // posted and not yet completed, oldest first
    bool aborted = false, stopping = false;
    std::string why;
    nccl_link_stats stats;
    std::thread watchdog;
  };

  explicit nccl_link(std::unique_ptr<state> s) : s_(std::move(s)) {}

  static nccl_link connect(Control control, bool sender, const nccl_link_options& opt) {
    auto s = std::make_unique<state>(std::move(control), opt, sender);
    nccl_bootstrap b;
    if (sender) {
      Control* peers[] = {&s->control};
      b = share_unique_id<Control>(std::span<Control* const>(peers));
    } else {
      b = receive_unique_id(s->control);
      if (b.nranks != 2 || b.rank != 1)
        throw transport_error(transport_errc::protocol, "nccl_link: the peer offered rank " + std::to_string(b.rank) + " of " +
                                                            std::to_string(b.nranks) + ", not a pair communicator");
    }
    s->init(b);
    return nccl_link(std::move(s));
  }

  std::unique_ptr<state> s_;
};

SPARSESYNC_NS_END
