// What one nccl_link transfer costs on two GPUs of one host, apart from the engine: for frames of the sizes the
// engine sends (a 7B BF16 version at 1% is 33 frames of ~5.3 MB and a 186 KB remainder), the host time to enqueue
// ncclSend / ncclRecv on a blocking and a non-blocking communicator (nccl_link's kind: NCCL defers each call to a
// thread of its own and returns ncclInProgress), and the link's throughput with the sending GPU idle or busy with a
// memory-bound kernel on a low-priority stream (as the trainer's encode keeps it). NCCL's own settings
// (NCCL_NCHANNELS_PER_PEER, NCCL_P2P_NVL_CHUNKSIZE, ...) come from the environment: one process per setting.
//
// usage: nccl_p2p_probe [--max-ctas N] [--blocking 0|1] [--busy 0|1] [--iters N] [--label TEXT]
// One JSON line per frame size on stdout.
#include <nccl.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// A blocking call returns ncclSuccess; a non-blocking one may return ncclInProgress, and the operation is enqueued
// once ncclCommGetAsyncError stops saying so (nccl_link::settle_locked does the same).
void settle(ncclComm_t c, ncclResult_t r, const char* what) {
  while (r == ncclInProgress) {
    std::this_thread::yield();
    ncclCommGetAsyncError(c, &r);
  }
  if (r != ncclSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, ncclGetErrorString(r));
    std::exit(1);
  }
}

// Reads 2 x n bytes, writes little: the trainer's detect pass, roughly. Blocks of their own slice that then
// exit (as the detect pass's), so that the link's high-priority kernels get SMs as blocks retire.
__global__ void busy_kernel(const uint4* a, const uint4* b, uint4* out, std::size_t n) {
  uint4 acc{0, 0, 0, 0};
  const std::size_t base = blockIdx.x * std::size_t(blockDim.x) * 8 + threadIdx.x;
  for (int k = 0; k < 8; ++k) {
    const std::size_t i = base + std::size_t(k) * blockDim.x;
    if (i < n) {
      const uint4 x = a[i], y = b[i];
      acc.x ^= x.x + y.x;
      acc.y ^= x.y + y.y;
      acc.z ^= x.z + y.z;
      acc.w ^= x.w + y.w;
    }
  }
  if (acc.x == 0x12345678u) out[threadIdx.x] = acc;  // keeps the loads
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  int max_ctas = 8, blocking = 0, busy = 0, iters = 40;
  std::string label = "default";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--max-ctas") max_ctas = std::atoi(argv[i + 1]);
    else if (k == "--blocking") blocking = std::atoi(argv[i + 1]);
    else if (k == "--busy") busy = std::atoi(argv[i + 1]);
    else if (k == "--iters") iters = std::atoi(argv[i + 1]);
    else if (k == "--label") label = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  int ndev = 0;
  check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
  if (ndev < 2) {
    std::fprintf(stderr, "needs two GPUs\n");
    return 2;
  }
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclComm_t comm[2];
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = blocking;
  if (max_ctas) cfg.maxCTAs = max_ctas;
  {
    ncclGroupStart();
    for (int r = 0; r < 2; ++r) {
      check(cudaSetDevice(r), "cudaSetDevice");
      ncclCommInitRankConfig(&comm[r], 2, id, r, &cfg);
    }
    settle(comm[0], ncclGroupEnd(), "init");
    for (int r = 0; r < 2; ++r) {
      ncclResult_t s = ncclInProgress;
      settle(comm[r], s, "init rank");
    }
  }
  const std::vector<std::size_t> sizes = {186014, 1332000, 5333000, 6142000, 64u << 20};
  const std::size_t max_bytes = 64u << 20;
  void* buf[2];
  cudaStream_t link[2];
  for (int r = 0; r < 2; ++r) {
    check(cudaSetDevice(r), "cudaSetDevice");
    check(cudaMalloc(&buf[r], max_bytes), "cudaMalloc");
    int lo = 0, hi = 0;
    check(cudaDeviceGetStreamPriorityRange(&lo, &hi), "priorities");
    check(cudaStreamCreateWithPriority(&link[r], cudaStreamNonBlocking, hi), "stream");
  }
  // The connection: NCCL makes it at a pair's first transfer, which needs both ends (outside the timings).
  {
    std::thread t([&] {
      check(cudaSetDevice(1), "cudaSetDevice");
      settle(comm[1], ncclRecv(buf[1], 1024, ncclUint8, 0, comm[1], link[1]), "warm recv");
      check(cudaStreamSynchronize(link[1]), "sync");
    });
    check(cudaSetDevice(0), "cudaSetDevice");
    settle(comm[0], ncclSend(buf[0], 1024, ncclUint8, 1, comm[0], link[0]), "warm send");
    check(cudaStreamSynchronize(link[0]), "sync");
    t.join();
  }
  // The busy kernel on GPU 0 (the sender), low priority, over 2 x 4 GiB.
  const std::size_t busy_n = (std::size_t(4) << 30) / sizeof(uint4);
  uint4 *ba = nullptr, *bb = nullptr, *bo = nullptr;
  cudaStream_t low{};
  if (busy) {
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaMalloc(&ba, busy_n * sizeof(uint4)), "cudaMalloc");
    check(cudaMalloc(&bb, busy_n * sizeof(uint4)), "cudaMalloc");
    check(cudaMalloc(&bo, 1024 * sizeof(uint4)), "cudaMalloc");
    check(cudaMemset(ba, 1, busy_n * sizeof(uint4)), "memset");
    check(cudaMemset(bb, 2, busy_n * sizeof(uint4)), "memset");
    int lo = 0, hi = 0;
    check(cudaDeviceGetStreamPriorityRange(&lo, &hi), "priorities");
    check(cudaStreamCreateWithPriority(&low, cudaStreamNonBlocking, lo), "stream");
  }
  for (std::size_t bytes : sizes) {
    std::atomic<bool> stop{false};
    std::thread busy_thread;
    if (busy)
      busy_thread = std::thread([&] {
        check(cudaSetDevice(0), "cudaSetDevice");
        const unsigned grid = static_cast<unsigned>((busy_n + 256 * 8 - 1) / (256 * 8));
        for (int k = 0; !stop.load(); ++k) {
          busy_kernel<<<grid, 256, 0, low>>>(ba, bb, bo, busy_n);
          check(cudaGetLastError(), "busy launch");
          if (k % 2 == 1) check(cudaStreamSynchronize(low), "busy");
        }
        check(cudaStreamSynchronize(low), "busy");
      });
    std::barrier sync_point(2);
    std::vector<double> enqueue_ms[2];
    double total_ms[2] = {0, 0};
    auto side = [&](int r) {
      check(cudaSetDevice(r), "cudaSetDevice");
      cudaEvent_t e0, e1;
      check(cudaEventCreate(&e0), "event");
      check(cudaEventCreate(&e1), "event");
      // Enqueue latency: one operation at a time, each waited for before the next (the engine's credit loop).
      for (int i = 0; i < iters; ++i) {
        sync_point.arrive_and_wait();
        const auto t = std::chrono::steady_clock::now();
        if (r == 0) settle(comm[0], ncclSend(buf[0], bytes, ncclUint8, 1, comm[0], link[0]), "send");
        else settle(comm[1], ncclRecv(buf[1], bytes, ncclUint8, 0, comm[1], link[1]), "recv");
        enqueue_ms[r].push_back(ms_since(t));
        check(cudaStreamSynchronize(link[r]), "sync");
      }
      // Throughput: iters transfers back to back on the link's stream.
      sync_point.arrive_and_wait();
      check(cudaEventRecord(e0, link[r]), "record");
      for (int i = 0; i < iters; ++i) {
        if (r == 0) settle(comm[0], ncclSend(buf[0], bytes, ncclUint8, 1, comm[0], link[0]), "send");
        else settle(comm[1], ncclRecv(buf[1], bytes, ncclUint8, 0, comm[1], link[1]), "recv");
      }
      check(cudaEventRecord(e1, link[r]), "record");
      check(cudaEventSynchronize(e1), "sync");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
      total_ms[r] = ms;
    };
    std::thread t1(side, 1);
    side(0);
    t1.join();
    stop = true;
    if (busy_thread.joinable()) busy_thread.join();
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("{\"row\":\"nccl_p2p_probe\",\"label\":\"%s\",\"blocking\":%d,\"max_ctas\":%d,\"busy\":%d,\"bytes\":%zu,\"iters\":%d,"
                "\"send_enqueue_ms_median\":%.4f,\"recv_enqueue_ms_median\":%.4f,\"back_to_back_ms_per_frame\":%.4f,\"gb_per_s\":%.2f}\n",
                label.c_str(), blocking, max_ctas, busy, bytes, iters, median(enqueue_ms[0]), median(enqueue_ms[1]), total_ms[0] / iters,
                bytes * iters / (total_ms[0] * 1e6));
    std::fflush(stdout);
  }
  for (int r = 0; r < 2; ++r) ncclCommDestroy(comm[r]);
  return 0;
}
