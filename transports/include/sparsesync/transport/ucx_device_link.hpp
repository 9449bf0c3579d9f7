// ucx_device_link<Control>: the sync engine's link between a trainer GPU and one worker GPU over UCX. The protocol's
// host messages travel on `Control` (ucx_transport with its key handshake, framing and MACs; or asio_tcp, inproc:
// any transport, which also authenticates the UCX bootstrap), and bucket frames travel GPU to GPU as UCP tagged
// messages of CUDA memory: UCX picks the path (rendezvous with cuda_ipc zero-copy within a host, GPUDirect RDMA over
// InfiniBand/RoCE, cuda_copy through its own bounce buffers otherwise; UCX_TLS narrows it). A `device_link`
// (device_link.hpp), as nccl_link is.
//
// Bootstrap (both ends at once, on `Control`, before the engine speaks): the receiver sends its UCP worker address,
// the sender connects an endpoint to it and sends a random 64-bit tag base; frame n travels with tag base + 1 + n
// (base itself carries one probe message that proves the path). The receiver matches only its exact tags, so a
// process that learned the worker address cannot slip a frame in without the secret base. The frames' bytes are not
// MAC-protected (nor are NCCL's): the engine checks every frame (header, chunk checksums, the version checksum)
// before it commits.
//
// Memory: UCX's cuda_ipc maps legacy IPC memory (cudaMalloc). A frame in memory that CUDA IPC cannot export (a
// stream-ordered pool: the device source's frames) is first copied into a cudaMalloc'd buffer of the link, device to
// device on the link's stream (ucx_device_link_options::stage_unexportable). No frame passes through host memory
// in this file.
//
// Never-hang argument (docs/PROTOCOL.md, "Timeouts"): sends are posted by the link's UCX thread once the frame's
// `ready` event has passed (a host function on the link's stream hands them over: no polling of the driver), and
// complete when the peer has taken them; a watchdog aborts the link when the oldest send made no progress for
// `timeout`. receive_device waits for its frame at most `timeout`, then aborts the link. Abort cancels the posted
// receive and force-closes the endpoint, which completes every send in flight. Unlike NCCL, a transfer to a dead
// peer holds no GPU work of this process (the rendezvous is driven by the host), so other links never wait on it.
#pragma once

#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/transport/detail/ucx_worker.hpp>
#include <sparsesync/cuda/device_scope.hpp>
#include <sparsesync/cuda/urgent_stream.hpp>
#include <sparsesync/transport/detail/device_link_forwarding.hpp>
#include <sparsesync/transport/device_link.hpp>
#include <sparsesync/transport/error.hpp>
#include <sparsesync/transport/ucx.hpp>

#include <cuda_runtime_api.h>
#include <ucp/api/ucp.h>

#include <stdio.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

SPARSESYNC_NS_BEGIN

struct ucx_device_link_options {
  int device = -1;  // CUDA device of this end (-1: the current one)
  // Setup, a receive, and a send without progress for this long abort the link. 0: 10 s for the trainer's end,
  // 30 s for a worker's (longer, so that a healthy worker never gives up on a trainer that waits out another).
  std::chrono::milliseconds timeout{0};
  // A UCP context made with ucx_context_options::tagged_polled; null: the process's (ucx_device_context()).
  std::shared_ptr<ucx_context> context;
  // Sends posted and not yet taken by the peer, at most: send_device() waits for the oldest beyond this.
  std::size_t max_frames_in_flight = 4;
  // Copy frames that CUDA IPC cannot export into the link's own device buffers first (see above).
  bool stage_unexportable = true;
  // UCP_ERR_HANDLING_MODE_PEER on the endpoint: a dead peer fails the sends in flight rather than the process.
  bool peer_error_handling = true;
};

struct ucx_device_link_stats {
  std::uint64_t frames_sent = 0, bytes_sent = 0, frames_staged = 0, frames_received = 0, bytes_received = 0;
};

// The process's UCP context for device frames (scanning the machine's devices is slow: one per process). UCX_*
// environment variables apply; `extra` overrides them when this call makes the context.
inline std::shared_ptr<ucx_context> ucx_device_context(const ucx_context_options& extra = {}) {
  static std::mutex m;
  static std::weak_ptr<ucx_context> made;
  std::lock_guard lock(m);
  if (auto c = made.lock()) return c;
  ucx_context_options o = extra;
  o.tagged_polled = true;
  auto c = ucx_context::create(o);
  made = c;
  return c;
}

namespace detail {

inline constexpr char ucx_device_address_magic[9] = "SSUCXDA1";  // receiver -> sender: its worker address
inline constexpr char ucx_device_tag_magic[9] = "SSUCXDT1";      // sender -> receiver: the tag base

inline void check_cuda_ucx(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw transport_error(transport_errc::backend, std::string("ucx_device_link: ") + what + ": " + cudaGetErrorString(e));
}

// Whether CUDA IPC can export the allocation holding `p` (cudaMalloc: yes; a stream-ordered pool without an export
// handle type: no).
inline bool ipc_exportable(const void* p) {
  cudaIpcMemHandle_t h;
  if (cudaIpcGetMemHandle(&h, const_cast<void*>(p)) == cudaSuccess) return true;
  cudaGetLastError();  // not sticky: clear it for the caller's next check
  return false;
}

// What UCX chose for an endpoint (lanes and transports), as ucp_ep_print_info writes it. Worker thread.
inline std::string endpoint_info(ucp_ep_h ep) {
  char* text = nullptr;
  std::size_t size = 0;
  FILE* f = ::open_memstream(&text, &size);
  if (!f) return {};
  ucp_ep_print_info(ep, f);
  std::fclose(f);
  std::string out(text, size);
  std::free(text);
  return out;
}

}  // namespace detail

template <class Control>
class ucx_device_link : public detail::device_link_forwarding<ucx_device_link<Control>> {
  static_assert(check_transport<Control>);
  friend class detail::device_link_forwarding<ucx_device_link>;
  using clock = std::chrono::steady_clock;

 public:
  using transport_concept = transport_tag;
  using device_link_concept = device_link_tag;

  // The trainer's end and the worker's end of a connected, authenticated control link: both ends call at the same
  // time; either throws transport_error after `timeout`.
  static ucx_device_link connect_sender(Control control, const ucx_device_link_options& opt = {}) {
    return connect(std::move(control), true, opt);
  }
  static ucx_device_link connect_receiver(Control control, const ucx_device_link_options& opt = {}) {
    return connect(std::move(control), false, opt);
  }

  ucx_device_link(ucx_device_link&&) noexcept = default;
  ucx_device_link& operator=(ucx_device_link&&) noexcept = default;
  ucx_device_link(const ucx_device_link&) = delete;
  ucx_device_link& operator=(const ucx_device_link&) = delete;
  ~ucx_device_link() = default;

  // The transport: the protocol's host messages, on the control link.
  void send(std::span<const std::byte> m) { s_->control.send(m); }
  bool receive(std::vector<std::byte>& m) { return s_->control.receive(m); }
  // close(), max_frame_size(), send_device(), receive_device(), abort(), aborted(), control() and stats() forward
  // to the state: detail::device_link_forwarding.

  // The sender's endpoint as UCX configured it (lanes, transports, devices); empty on the receiver's end, whose
  // reply path UCX makes on its own.
  [[nodiscard]] const std::string& transports() const { return s_->ep_info; }

 private:
  struct state;

  // One frame on its way: posted by the UCX thread once its bytes are ready, done when the peer has taken it.
  struct send_entry {
    state* st = nullptr;
    std::shared_ptr<const void> owner;
    const void* data = nullptr;
    std::size_t bytes = 0;
    std::uint64_t tag = 0;
    int staging = -1;  // the link's buffer it was copied to, if any
    bool done = false;  // (state::mutex)
    ucs_status_t status = UCS_OK;
  };

  // A posted receive's completion (the probe's too), held by the UCX callback and the waiting thread.
  struct recv_ref {
    state* st;
    std::shared_ptr<detail::ucx_op> op;
  };

  struct state {
    state(Control c, const ucx_device_link_options& o, bool is_sender) : control(std::move(c)), opt(o), sender(is_sender) {
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
      if (watchdog.joinable()) watchdog.join();
      if (device < 0) return;
      cuda::device_scope guard(device, std::nothrow);
      if (stream) cudaStreamSynchronize(stream);  // every frame's host function ran: each send is posted or cancelled
      if (worker) {
        // Force-close, not flush: it never waits for the peer, and frames still on their way when the link goes are
        // cancelled (the peer may be gone). Their callbacks run before the worker's thread ends.
        try {
          worker->execute([this] {
            if (recv_request) ucp_request_cancel(worker->handle(), recv_request);
            detail::force_close_endpoint(*worker, std::exchange(ep, nullptr));
          });
        } catch (...) {
        }
        worker.reset();
        uw = nullptr;
      }
      sends.clear();
      for (auto& b : staging) cudaFree(b.data);
      if (after_event) cudaEventDestroy(after_event);
      if (head_done) cudaEventDestroy(head_done);
      if (head) cudaFreeHost(head);
      if (stream) cudaStreamDestroy(stream);
    }

    void init() {
      if (opt.device < 0) detail::check_cuda_ucx(cudaGetDevice(&opt.device), "cudaGetDevice");
      cuda::device_scope guard(opt.device, std::nothrow);
      device = opt.device;
      detail::check_cuda_ucx(cuda::create_urgent_stream(&stream), "cudaStreamCreateWithPriority");  // frames are not held up by the codec's passes
      detail::check_cuda_ucx(cudaEventCreateWithFlags(&after_event, cudaEventDisableTiming | cudaEventBlockingSync), "cudaEventCreate");
      detail::check_cuda_ucx(cudaEventCreateWithFlags(&head_done, cudaEventDisableTiming | cudaEventBlockingSync), "cudaEventCreate");
      detail::check_cuda_ucx(cudaMallocHost(reinterpret_cast<void**>(&head), max_device_frame_head), "cudaMallocHost");
      context = opt.context ? opt.context : ucx_device_context();
      if (!context->polled())
        throw transport_error(transport_errc::invalid_argument,
                              "ucx_device_link: the context must be made with ucx_context_options::tagged_polled");
      worker = std::make_shared<detail::ucx_worker>(context);
      uw = worker.get();
      // UCX's CUDA transports work in the calling thread's current context.
      worker->execute([d = device] { cudaSetDevice(d); });
    }

    // Sender: an endpoint to the receiver's worker.
    void connect_endpoint(const std::vector<std::byte>& address) {
      ep_status = std::make_shared<detail::ucx_ep_status>();
      worker->retain(ep_status);
      ucs_status_t status = UCS_OK;
      worker->execute([&] {
        ucp_ep_params_t p{};
        p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        p.address = reinterpret_cast<const ucp_address_t*>(address.data());
        if (opt.peer_error_handling) {
          p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
          p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
          p.err_handler.cb = &detail::on_ep_error;
          p.err_handler.arg = ep_status.get();
        }
        status = ucp_ep_create(worker->handle(), &p, &ep);
        if (status == UCS_OK) ep_info = detail::endpoint_info(ep);
      });
      if (status != UCS_OK) detail::throw_ucx("ucx_device_link: ucp_ep_create", status, transport_errc::connect_failed);
    }

    std::vector<std::byte> worker_address() {
      std::vector<std::byte> out;
      ucs_status_t status = UCS_OK;
      worker->execute([&] {
        ucp_address_t* a = nullptr;
        std::size_t n = 0;
        status = ucp_worker_get_address(worker->handle(), &a, &n);
        if (status != UCS_OK) return;
        out.assign(reinterpret_cast<const std::byte*>(a), reinterpret_cast<const std::byte*>(a) + n);
        ucp_worker_release_address(worker->handle(), a);
      });
      if (status != UCS_OK) detail::throw_ucx("ucx_device_link: ucp_worker_get_address", status);
      return out;
    }

    void throw_if_aborted_locked() const {
      if (aborted) throw transport_error(transport_errc::connection_closed, "ucx_device_link: the device path was aborted (" + why + ")");
    }

    // A cudaMalloc'd buffer of at least `bytes` that no send in flight uses.
    int staging_buffer_locked(std::size_t bytes) {
      int best = -1;
      for (std::size_t i = 0; i < staging.size(); ++i)
        if (!staging[i].busy && staging[i].bytes >= bytes && (best < 0 || staging[i].bytes < staging[static_cast<std::size_t>(best)].bytes))
          best = static_cast<int>(i);
      if (best < 0) {
        for (std::size_t i = 0; i < staging.size(); ++i)
          if (!staging[i].busy) {  // too small: replaced (its sends have left)
            cudaFree(staging[i].data);
            staging[i] = {};
            best = static_cast<int>(i);
            break;
          }
        if (best < 0) {
          staging.push_back({});
          best = static_cast<int>(staging.size() - 1);
        }
        auto& b = staging[static_cast<std::size_t>(best)];
        const std::size_t cap = (std::max<std::size_t>(bytes, 1u << 20) + (2u << 20) - 1) / (2u << 20) * (2u << 20);
        detail::check_cuda_ucx(cudaMalloc(&b.data, cap), "cudaMalloc (staging)");
        b.bytes = cap;
      }
      staging[static_cast<std::size_t>(best)].busy = true;
      return best;
    }

    void send(const device_frame& f) {
      if (f.bytes == 0) return;
      std::unique_lock lock(mutex);
      throw_if_aborted_locked();
      cuda::device_scope guard(device, std::nothrow);
      reap_locked();
      // Bounded in flight: wait for the oldest send to leave (the watchdog aborts the link if it never does).
      const std::size_t most = std::max<std::size_t>(1, opt.max_frames_in_flight);
      cv.wait(lock, [&] {
        reap_locked();
        return aborted || sends.size() < most;
      });
      throw_if_aborted_locked();
      auto e = std::make_shared<send_entry>();
      e->st = this;
      e->owner = f.owner;
      e->data = f.data;
      e->bytes = f.bytes;
      e->tag = tag_base + 1 + send_seq;
      try {
        if (f.ready) detail::check_cuda_ucx(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(f.ready), 0), "cudaStreamWaitEvent");
        if (opt.stage_unexportable && !detail::ipc_exportable(f.data)) {
          e->staging = staging_buffer_locked(f.bytes);
          void* to = staging[static_cast<std::size_t>(e->staging)].data;
          detail::check_cuda_ucx(cudaMemcpyAsync(to, f.data, f.bytes, cudaMemcpyDeviceToDevice, stream), "stage frame");
          e->data = to;
          ++stats.frames_staged;
        }
        auto* ref = new std::shared_ptr<send_entry>(e);
        if (const auto err = cudaLaunchHostFunc(stream, &on_frame_ready, ref); err != cudaSuccess) {
          delete ref;
          detail::check_cuda_ucx(err, "cudaLaunchHostFunc");
        }
      } catch (const transport_error& x) {
        if (e->staging >= 0) staging[static_cast<std::size_t>(e->staging)].busy = false;
        abort_locked(x.what());
        throw;
      }
      ++send_seq;
      ++stats.frames_sent;
      stats.bytes_sent += f.bytes;
      if (sends.empty()) progress = clock::now();
      sends.push_back(std::move(e));
      if (!watchdog.joinable()) watchdog = std::thread([this] { watch(); });
      cv.notify_all();
    }

    // CUDA's host-function thread, once the frame's bytes are ready: hands the send to the UCX thread (no CUDA
    // call may be made here).
    static void CUDART_CB on_frame_ready(void* p) {
      auto* ref = static_cast<std::shared_ptr<send_entry>*>(p);
      state* st = (*ref)->st;
      try {
        st->uw->post([ref] {
          (*ref)->st->post_send(*ref);
          delete ref;
        });
      } catch (...) {
        st->finish_send(**ref, UCS_ERR_NO_MEMORY);
        delete ref;
      }
    }

    // UCX thread.
    void post_send(const std::shared_ptr<send_entry>& e) {
      ucs_status_t refuse = UCS_OK;
      {
        std::lock_guard lock(mutex);
        if (aborted) refuse = UCS_ERR_CANCELED;
      }
      if (refuse == UCS_OK && !ep) refuse = UCS_ERR_CANCELED;
      if (refuse == UCS_OK && ep_status) refuse = ep_status->error.load();
      if (refuse != UCS_OK) return finish_send(*e, refuse);
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      p.cb.send = &on_send_done;
      p.user_data = new std::shared_ptr<send_entry>(e);
      p.memory_type = UCS_MEMORY_TYPE_CUDA;
      const ucs_status_ptr_t r = ucp_tag_send_nbx(ep, e->data, e->bytes, e->tag, &p);
      if (r == nullptr || UCS_PTR_IS_ERR(r)) {
        delete static_cast<std::shared_ptr<send_entry>*>(p.user_data);
        return finish_send(*e, r == nullptr ? UCS_OK : UCS_PTR_STATUS(r));
      }
      worker->add_busy(1);
    }

    // UCX thread.
    static void on_send_done(void* request, ucs_status_t status, void* user_data) {
      auto* ref = static_cast<std::shared_ptr<send_entry>*>(user_data);
      auto e = std::move(*ref);
      delete ref;
      ucp_request_free(request);
      e->st->uw->add_busy(-1);
      e->st->finish_send(*e, status);
    }

    void finish_send(send_entry& e, ucs_status_t status) {
      std::lock_guard lock(mutex);
      e.done = true;
      e.status = status;
      if (status != UCS_OK) abort_locked(std::string("a device frame failed to leave: ") + ucs_status_string(status));
      cv.notify_all();
    }

    // Drops the frames that have left (their owners may free them now).
    void reap_locked() {
      while (!sends.empty() && sends.front()->done) {
        if (sends.front()->staging >= 0) staging[static_cast<std::size_t>(sends.front()->staging)].busy = false;
        sends.pop_front();
        progress = clock::now();
      }
    }

    // The watchdog: a send whose frame has not left `timeout` after the one before it did aborts the link.
    void watch() {
      std::unique_lock lock(mutex);
      cudaSetDevice(device);
      while (!stopping) {
        reap_locked();
        if (sends.empty() || aborted) {
          if (aborted && !sends.empty()) cv.wait_for(lock, std::chrono::milliseconds(5));  // cancelled sends come back
          else cv.wait(lock);
          continue;
        }
        if (clock::now() - progress > opt.timeout) {
          abort_locked("a device frame did not leave within the timeout (the peer stopped receiving)");
          continue;
        }
        cv.wait_for(lock, std::chrono::milliseconds(10));
      }
    }

    // Posts a receive of `bytes` into `dst` with `tag` and waits for it, at most the timeout (then aborts).
    std::size_t receive_tagged(void* dst, std::size_t bytes, std::uint64_t tag, ucs_memory_type_t mem) {
      auto op = std::make_shared<detail::ucx_op>();
      op->outstanding = 1;
      worker->post([this, op, dst, bytes, tag, mem] { post_receive(op, dst, bytes, tag, mem); });
      std::unique_lock lock(op->mutex);
      if (!op->cv.wait_for(lock, opt.timeout, [&] { return op->done; })) {
        lock.unlock();
        abort("a device frame did not arrive within the timeout");
        lock.lock();
        // The cancelled receive returns at once, or once a copy UCX had started into `dst` has ended.
        op->cv.wait_for(lock, opt.timeout, [&] { return op->done; });
        throw transport_error(transport_errc::timed_out, "ucx_device_link: no device frame of " + std::to_string(bytes) + " bytes within " +
                                                             std::to_string(opt.timeout.count()) + " ms");
      }
      {
        std::lock_guard g(mutex);
        if (aborted)
          throw transport_error(transport_errc::connection_closed,
                                "ucx_device_link: no device frame of " + std::to_string(bytes) + " bytes: the link was aborted (" + why + ")");
      }
      if (op->status != UCS_OK) {
        abort(std::string("a device frame failed to arrive: ") + ucs_status_string(op->status));
        throw transport_error(op->status == UCS_ERR_MESSAGE_TRUNCATED ? transport_errc::protocol : transport_errc::backend,
                              std::string("ucx_device_link: receive: ") + ucs_status_string(op->status));
      }
      return op->length;
    }

    // UCX thread.
    void post_receive(const std::shared_ptr<detail::ucx_op>& op, void* dst, std::size_t bytes, std::uint64_t tag, ucs_memory_type_t mem) {
      bool refused = false;
      {
        std::lock_guard lock(mutex);
        refused = aborted;
      }
      if (refused) return op->complete(UCS_ERR_CANCELED, 0);
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      p.cb.recv = &on_receive_done;
      p.user_data = new recv_ref{this, op};
      p.memory_type = mem;
      const ucs_status_ptr_t r = ucp_tag_recv_nbx(worker->handle(), dst, bytes, tag, ~std::uint64_t{0}, &p);
      if (r == nullptr || UCS_PTR_IS_ERR(r)) {
        delete static_cast<recv_ref*>(p.user_data);
        return op->complete(r == nullptr ? UCS_OK : UCS_PTR_STATUS(r), r == nullptr ? bytes : 0);
      }
      recv_request = r;
      worker->add_busy(1);
    }

    // UCX thread.
    static void on_receive_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
      auto* ref = static_cast<recv_ref*>(user_data);
      ref->st->recv_request = nullptr;
      ref->st->uw->add_busy(-1);
      ucp_request_free(request);
      ref->op->complete(status, status == UCS_OK && info ? info->length : 0);
      delete ref;
    }

    void receive(void* dst, std::size_t bytes, cudaStream_t after, std::span<unsigned char> out_head) {
      if (out_head.size() > max_device_frame_head || out_head.size() > bytes)
        throw transport_error(transport_errc::invalid_argument, "ucx_device_link: the head to copy exceeds the frame or 256 bytes");
      std::uint64_t tag = 0;
      {
        std::lock_guard lock(mutex);
        throw_if_aborted_locked();
        tag = tag_base + 1 + recv_seq++;
      }
      cuda::device_scope guard(device, std::nothrow);
      if (after) {
        // UCX writes `dst` on streams of its own: the work on `after` must be over first (a blocking-sync event:
        // this thread sleeps).
        detail::check_cuda_ucx(cudaEventRecord(after_event, after), "cudaEventRecord");
        detail::check_cuda_ucx(cudaEventSynchronize(after_event), "wait for the stream before the frame");
      }
      const std::size_t got = receive_tagged(dst, bytes, tag, UCS_MEMORY_TYPE_CUDA);
      if (got != bytes) {
        abort("a device frame of the wrong size");
        throw transport_error(transport_errc::protocol, "ucx_device_link: a device frame of " + std::to_string(got) + " bytes where " +
                                                            std::to_string(bytes) + " were announced");
      }
      if (!out_head.empty()) {
        detail::check_cuda_ucx(cudaMemcpyAsync(head, dst, out_head.size(), cudaMemcpyDeviceToHost, stream), "copy frame head");
        detail::check_cuda_ucx(cudaEventRecord(head_done, stream), "cudaEventRecord");
        detail::check_cuda_ucx(cudaEventSynchronize(head_done), "copy frame head");
        std::memcpy(out_head.data(), head, out_head.size());
      }
      std::lock_guard lock(mutex);
      ++stats.frames_received;
      stats.bytes_received += bytes;
    }

    // The probe that proves the path during setup: a host-memory tagged message with the tag base.
    void send_probe() {
      auto op = std::make_shared<detail::ucx_op>();
      op->outstanding = 1;
      probe_word = tag_base;
      worker->post([this, op] {
        ucp_request_param_t p{};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        p.cb.send = &detail::on_send_done;
        p.user_data = detail::op_ref(op);
        p.memory_type = UCS_MEMORY_TYPE_HOST;
        detail::finish_request(ucp_tag_send_nbx(ep, &probe_word, sizeof probe_word, tag_base, &p), p.user_data, UCS_OK, 0);
      });
      std::unique_lock lock(op->mutex);
      if (!op->cv.wait_for(lock, opt.timeout, [&] { return op->done; }) || op->status != UCS_OK) {
        const ucs_status_t s = op->done ? op->status : UCS_ERR_TIMED_OUT;
        lock.unlock();
        abort("the setup probe failed");
        lock.lock();
        op->cv.wait_for(lock, opt.timeout, [&] { return op->done; });  // probe_word is UCX's until then
        throw transport_error(s == UCS_ERR_TIMED_OUT ? transport_errc::timed_out : transport_errc::connect_failed,
                              std::string("ucx_device_link: the peer's worker is unreachable: ") + ucs_status_string(s));
      }
    }

    void receive_probe() {
      const std::size_t n = receive_tagged(&probe_word, sizeof probe_word, tag_base, UCS_MEMORY_TYPE_HOST);
      if (n != sizeof probe_word || probe_word != tag_base)
        throw transport_error(transport_errc::protocol, "ucx_device_link: the setup probe does not match the tag base");
    }

    void abort(const std::string& reason) noexcept {
      std::lock_guard lock(mutex);
      abort_locked(reason);
    }

    void abort_locked(const std::string& reason) noexcept {
      if (aborted) return;
      aborted = true;
      why = reason;
      cv.notify_all();
      if (!uw) return;
      try {
        uw->post([this] {
          if (recv_request) ucp_request_cancel(uw->handle(), recv_request);
          detail::force_close_endpoint(*uw, std::exchange(ep, nullptr));  // completes every send in flight
        });
      } catch (...) {
      }
    }

    struct staging_buffer {
      void* data = nullptr;
      std::size_t bytes = 0;
      bool busy = false;
    };

    Control control;
    ucx_device_link_options opt;
    bool sender;
    int device = -1;
    std::shared_ptr<ucx_context> context;
    std::shared_ptr<detail::ucx_worker> worker;
    detail::ucx_worker* uw = nullptr;  // the same, for UCX callbacks (alive until the worker's thread has ended)
    std::shared_ptr<detail::ucx_ep_status> ep_status;
    ucp_ep_h ep = nullptr;           // UCX thread (after setup)
    void* recv_request = nullptr;    // UCX thread: the receive in flight, to cancel on abort
    std::string ep_info;
    std::uint64_t tag_base = 0, send_seq = 0, recv_seq = 0, probe_word = 0;
    cudaStream_t stream = nullptr;   // staging copies and the frames' hand-over; the received heads' copies
    cudaEvent_t after_event{}, head_done{};
    unsigned char* head = nullptr;   // pinned: the frame's head comes down here

    mutable std::mutex mutex;        // everything below
    std::condition_variable cv;
    std::deque<std::shared_ptr<send_entry>> sends;
    std::vector<staging_buffer> staging;
    clock::time_point progress{};
    bool aborted = false, stopping = false;
    std::string why;
    ucx_device_link_stats stats;
    std::thread watchdog;
  };

  explicit ucx_device_link(std::unique_ptr<state> s) : s_(std::move(s)) {}

  static ucx_device_link connect(Control control, bool sender, const ucx_device_link_options& opt) {
    auto s = std::make_unique<state>(std::move(control), opt, sender);
    s->init();
    std::vector<std::byte> m;
    if (sender) {
      if (!s->control.receive(m)) throw transport_error(transport_errc::connection_closed, "ucx_device_link: the peer closed during setup");
      const auto* p = reinterpret_cast<const unsigned char*>(m.data());
      if (m.size() < 12 || std::memcmp(p, detail::ucx_device_address_magic, 8) != 0 ||
          detail::load_le<std::uint32_t>(p + 8) != m.size() - 12)
        throw transport_error(transport_errc::protocol, "ucx_device_link: the peer sent no UCX worker address");
      s->connect_endpoint(std::vector<std::byte>(m.begin() + 12, m.end()));
      std::random_device rd;
      s->tag_base = ((std::uint64_t{rd()} << 32) | rd()) >> 1;  // frames' tags never wrap to the probe's
      m.assign(16, std::byte{0});
      auto* q = reinterpret_cast<unsigned char*>(m.data());
      std::memcpy(q, detail::ucx_device_tag_magic, 8);
      detail::store_le<std::uint64_t>(q + 8, s->tag_base);
      s->control.send(m);
      s->send_probe();
    } else {
      const auto address = s->worker_address();
      m.assign(12 + address.size(), std::byte{0});
      auto* q = reinterpret_cast<unsigned char*>(m.data());
      std::memcpy(q, detail::ucx_device_address_magic, 8);
      detail::store_le<std::uint32_t>(q + 8, static_cast<std::uint32_t>(address.size()));
      std::memcpy(q + 12, address.data(), address.size());
      s->control.send(m);
      if (!s->control.receive(m)) throw transport_error(transport_errc::connection_closed, "ucx_device_link: the peer closed during setup");
      const auto* p = reinterpret_cast<const unsigned char*>(m.data());
      if (m.size() != 16 || std::memcmp(p, detail::ucx_device_tag_magic, 8) != 0)
        throw transport_error(transport_errc::protocol, "ucx_device_link: the peer sent no tag base");
      s->tag_base = detail::load_le<std::uint64_t>(p + 8);
      s->receive_probe();
    }
    return ucx_device_link(std::move(s));
  }

  std::unique_ptr<state> s_;
};

SPARSESYNC_NS_END
