// A minimal fork-join loop for the generator: work items are independent and each writes only its own
// elements, so the result does not depend on which thread runs which item.
#pragma once

#include <sparsesync/core/config.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace gen {
namespace detail {

// 0 means one thread per hardware core.
inline unsigned resolve_threads(unsigned requested) {
  if (requested) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? hw : 1;
}

// Calls f(i) for every i in [0, items) on up to `threads` threads (the caller's included); rethrows the
// first exception after all threads have stopped.
template <class F>
void parallel_for(std::size_t items, unsigned threads, F&& f) {
  const std::size_t workers = std::min<std::size_t>(resolve_threads(threads), items);
  if (workers <= 1) {
    for (std::size_t i = 0; i < items; ++i) f(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto run = [&] {
    try {
      for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < items;) f(i);
    } catch (...) {
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next.store(items, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  try {
    for (std::size_t t = 1; t < workers; ++t) pool.emplace_back(run);
  } catch (const std::system_error&) {
    // Out of threads: the ones already started and this one still finish every item.
  }
  run();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace detail
}  // namespace gen
SPARSESYNC_NS_END
