// A rollout worker of the GPU engine tests: its receiver applies versions on a thread of its own until the sender
// closes. Refusals (sparsesync::error) are counted and the loop goes on (the sender heals the worker with a full
// transfer); any other exception ends it, its message kept in `why`.
#pragma once

#include <sparsesync/core/error.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <thread>

namespace sparsesync_test {

template <class Rx>
struct engine_worker {
  std::unique_ptr<Rx> rx;
  int device = -1;  // the CUDA device its thread makes current (-1: leave it)
  std::thread thread;
  std::atomic<int> applied{0}, refused{0}, fulls{0};
  std::atomic<bool> failed{false};
  std::string why;  // read after `failed` or once the thread joined

  void start() {
    thread = std::thread([this] {
      if (device >= 0) cudaSetDevice(device);
      for (;;) {
        try {
          auto v = rx->next();
          if (!v) return;
          ++applied;
          if (v->full) ++fulls;
        } catch (const sparsesync::error&) {
          ++refused;
        } catch (const std::exception& e) {
          why = e.what();
          failed = true;
          return;
        }
      }
    });
  }
  ~engine_worker() {
    if (thread.joinable()) thread.join();
  }
};

}  // namespace sparsesync_test
