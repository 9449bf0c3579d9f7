// UCX plumbing: a shared UCP context and a worker driven by its own progress thread.
//
// Every UCP call of a worker runs on that worker's thread (UCS_THREAD_MODE_SINGLE, no locks inside UCX);
// user threads hand it tasks and sleep on a condition variable until their request completes. The thread
// sleeps on the worker's event fd when idle, so a receiver waiting for the next patch burns no CPU. A context
// made for tagged device frames (ucx_device_link) has no wakeup feature: its workers poll while a request is in
// flight (the CUDA transports complete their copies by polling) and sleep on a condition variable otherwise.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/transport/error.hpp>

#include <ucp/api/ucp.h>

#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

SPARSESYNC_NS_BEGIN

struct ucx_context_options {
  // UCX configuration overrides, names without the UCX_ prefix: {{"TLS", "tcp"}} equals UCX_TLS=tcp.
  // Environment variables still apply to anything not overridden here.
  std::vector<std::pair<std::string, std::string>> config;
  // Tagged messages polled while in flight (ucx_device_link's device frames), instead of the host transport's
  // streams woken by events.
  bool tagged_polled = false;
};

namespace detail {

[[noreturn]] inline void throw_ucx(const std::string& what, ucs_status_t s,
                                   transport_errc code = transport_errc::backend) {
  throw transport_error(code, what + ": " + ucs_status_string(s));
}

}  // namespace detail

// One UCP context per process is the norm: creating it scans the machine's devices, which takes long.
class ucx_context {
 public:
  static std::shared_ptr<ucx_context> create(const ucx_context_options& options = {}) {
    return std::shared_ptr<ucx_context>(new ucx_context(options));
  }
  ucx_context(const ucx_context&) = delete;
  ucx_context& operator=(const ucx_context&) = delete;
  ~ucx_context() { ucp_cleanup(context_); }

  [[nodiscard]] ucp_context_h handle() const noexcept { return context_; }
  [[nodiscard]] bool polled() const noexcept { return polled_; }

 private:
  explicit ucx_context(const ucx_context_options& options) : polled_(options.tagged_polled) {
    ucp_config_t* config = nullptr;
    if (auto s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) detail::throw_ucx("ucx: ucp_config_read", s);
    for (const auto& [name, value] : options.config) {
      if (auto s = ucp_config_modify(config, name.c_str(), value.c_str()); s != UCS_OK) {
        ucp_config_release(config);
        detail::throw_ucx("ucx: setting UCX_" + name + "=" + value, s, transport_errc::invalid_argument);
      }
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = polled_ ? UCP_FEATURE_TAG : UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 1;  // workers of different connections are created from different threads
    const auto s = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (s != UCS_OK) detail::throw_ucx("ucx: ucp_init", s);
  }

  ucp_context_h context_ = nullptr;
  bool polled_ = false;
};

namespace detail {

class ucx_worker {
 public:
  explicit ucx_worker(std::shared_ptr<ucx_context> context) : context_(std::move(context)) {
    ucp_worker_params_t params{};
    params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    params.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (auto s = ucp_worker_create(context_->handle(), &params, &worker_); s != UCS_OK) throw_ucx("ucx: ucp_worker_create", s);
    if (!context_->polled()) {
      if (auto s = ucp_worker_get_efd(worker_, &efd_); s != UCS_OK) {
        ucp_worker_destroy(worker_);
        throw_ucx("ucx: ucp_worker_get_efd", s);
      }
    }
    thread_ = std::thread([this] { loop(); });
  }
  ucx_worker(const ucx_worker&) = delete;
  ucx_worker& operator=(const ucx_worker&) = delete;
  ~ucx_worker() {
    // Final tasks (endpoint and listener teardown) were posted by their owners before they let go of
    // this worker; the loop runs every queued task before it stops.
    stop_.store(true);
    wake();
    thread_.join();
    ucp_worker_destroy(worker_);
    retained_.clear();  // no UCX callback of this worker can run any more
  }

  [[nodiscard]] ucp_worker_h handle() const noexcept { return worker_; }

  void post(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    wake();
  }

  // Worker thread, polled context: requests in flight (the loop polls while any is).
  void add_busy(int delta) noexcept { busy_ += delta; }

  // Keeps `object` alive as long as the worker: for state that UCX callbacks of this worker point to, which
  // may fire as late as the worker's last progress call.
  void retain(std::shared_ptr<void> object) {
    std::lock_guard lock(mutex_);
    retained_.push_back(std::move(object));
  }

  // Runs `task` on the worker thread and waits for it.
  void execute(std::function<void()> task) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    post([&] {
      task();
      std::lock_guard lock(m);
      done = true;
      cv.notify_all();
    });
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done; });
  }

 private:
  bool run_tasks() {
    std::vector<std::function<void()>> batch;
    {
      std::lock_guard lock(mutex_);
      batch.swap(tasks_);
    }
    for (auto& t : batch) t();
    return !batch.empty();
  }

  bool tasks_pending() {
    std::lock_guard lock(mutex_);
    return !tasks_.empty();
  }

  void wake() {
    if (efd_ >= 0) {
      ucp_worker_signal(worker_);  // documented as safe from any thread
      return;
    }
    std::lock_guard lock(mutex_);
    idle_cv_.notify_one();
  }

  void loop() noexcept {
    for (;;) {
      const bool ran = run_tasks();
      if (ucp_worker_progress(worker_) != 0 || ran) continue;
      if (stop_.load()) {
        if (!tasks_pending()) return;
        continue;
      }
      if (efd_ < 0) {
        if (busy_ > 0) continue;
        // Idle: sleep until a task comes (and progress now and then, for UCX's own housekeeping).
        std::unique_lock lock(mutex_);
        idle_cv_.wait_for(lock, std::chrono::milliseconds(5), [&] { return !tasks_.empty() || stop_.load(); });
        continue;
      }
      const auto s = ucp_worker_arm(worker_);
      if (s == UCS_ERR_BUSY) continue;
      // A task posted before the arm may have had its signal consumed by it: look again before sleeping.
      if (tasks_pending() || stop_.load()) continue;
      pollfd p{efd_, POLLIN, 0};
      // The timeout only guards against a lost wake-up; events and signals end the sleep at once.
      ::poll(&p, 1, s == UCS_OK ? 100 : 1);
    }
  }

  std::shared_ptr<ucx_context> context_;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  std::mutex mutex_;
  std::condition_variable idle_cv_;  // polled context: the idle loop's sleep
  int busy_ = 0;                     // polled context, worker thread: requests in flight
  std::vector<std::function<void()>> tasks_;
  std::vector<std::shared_ptr<void>> retained_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Completion of one UCX request, shared between the waiting user thread and the worker thread.
struct ucx_op {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  ucs_status_t status = UCS_OK;
  std::size_t length = 0;
  int outstanding = 0;

  void complete(ucs_status_t s, std::size_t n) {
    std::lock_guard lock(mutex);
    if (status == UCS_OK) status = s;
    length += n;
    if (--outstanding == 0) {
      done = true;
      cv.notify_all();
    }
  }
};

// Worker thread. Closes `ep` at once: its outstanding requests complete with an error (UCS_ERR_CANCELED). The close
// itself completes during later progress; its request is polled from later iterations and freed.
inline void force_close_endpoint(ucx_worker& w, ucp_ep_h ep) {
  if (!ep) return;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  const ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
  if (r == nullptr || UCS_PTR_IS_ERR(r)) return;
  struct poll {
    static void close_request(ucx_worker* w, ucs_status_ptr_t r) {
      if (ucp_request_check_status(r) == UCS_INPROGRESS) {
        w->post([w, r] { close_request(w, r); });
        return;
      }
      ucp_request_free(r);
    }
  };
  w.post([w = &w, r] { poll::close_request(w, r); });
}

// UCX callbacks get a heap copy of the shared pointer, so the op outlives a caller that stopped waiting.
inline void* op_ref(const std::shared_ptr<ucx_op>& op) { return new std::shared_ptr<ucx_op>(op); }

inline void finish_request(ucs_status_ptr_t r, void* ref, ucs_status_t status_if_done, std::size_t length_if_done) {
  if (r == nullptr || UCS_PTR_IS_ERR(r)) {
    auto* p = static_cast<std::shared_ptr<ucx_op>*>(ref);
    (*p)->complete(r == nullptr ? status_if_done : UCS_PTR_STATUS(r), r == nullptr ? length_if_done : 0);
    delete p;
  }
  // Otherwise the request is in flight and its callback completes the op.
}

inline void on_send_done(void* request, ucs_status_t status, void* user_data) {
  auto* p = static_cast<std::shared_ptr<ucx_op>*>(user_data);
  (*p)->complete(status, 0);
  delete p;
  ucp_request_free(request);
}

inline void on_recv_done(void* request, ucs_status_t status, std::size_t length, void* user_data) {
  auto* p = static_cast<std::shared_ptr<ucx_op>*>(user_data);
  (*p)->complete(status, length);
  delete p;
  ucp_request_free(request);
}

}  // namespace detail
SPARSESYNC_NS_END
