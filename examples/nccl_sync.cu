// Trainer GPU to worker GPUs over NCCL, in one process (one thread per GPU): GPU 0 changes ~1% of a BF16 model
// by one ULP per version, encodes only what changed on the GPU and broadcasts it; every other GPU verifies the
// version and applies it in place. Each side prints the checksum of what it holds; they must agree.
//
//   nccl_sync [--elements 100000000] [--versions 3]      (needs 2 or more GPUs; NCCL_NVLS_ENABLE=0 advised)
#include <sparsesync/cuda/sync/nccl_sync.cuh>  // first: this file is the header's self-containment check

#include "example_args.hpp"

#include <sparsesync/bucketing/fixed_bytes.hpp>

#include <barrier>
#include <cstdio>
#include <thread>

namespace ss = sparsesync;
namespace sc = sparsesync::cuda;

namespace {

__global__ void fill(std::uint16_t* w, std::uint64_t n) {  // BF16 values around +-0.01
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    w[i] = static_cast<std::uint16_t>(((i * 0x9E3779B97F4A7C15ULL) >> 49 & 0x807F) | 0x3C00);
}

__global__ void step(std::uint16_t* w, std::uint64_t n, std::uint64_t version) {  // ~1% move by one ULP
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t h = (i + version * 0xD1B54A32D192ED03ULL) * 0x9E3779B97F4A7C15ULL;
    if ((h >> 32) % 100 == 0) w[i] = ss::apply_ulp_delta<std::uint16_t>(w[i], (h >> 20) & 1 ? 1 : 0xFFFF);
  }
}

void check(cudaError_t e) { sc::throw_on_cuda_error(e, "nccl_sync example"); }

}  // namespace

int main(int argc, char** argv) try {
  const std::uint64_t n = example::num(argc, argv, "--elements", "100000000");
  const int versions = static_cast<int>(example::num(argc, argv, "--versions", "3"));
  int gpus = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&gpus); e != cudaSuccess) {
    std::printf("nccl_sync: no usable CUDA device (%s): skipped\n", cudaGetErrorString(e));
    return 77;
  }
  if (gpus < 2) {
    std::printf("nccl_sync: needs 2 or more GPUs, %d found: skipped\n", gpus);
    return 77;
  }
  // One flat tensor cut into 64 MiB buckets; any layout works the same.
  const ss::model_layout layout({{"weights", ss::dtype::bf16, {n}}});
  const auto plans = ss::fixed_bytes{64u << 20}.plan(layout, ss::default_log2_chunk);
  ss::nccl_bootstrap boot;  // in a multi-process job, share it with ss::share_unique_id over an authenticated link
  ss::detail::check_nccl(ncclGetUniqueId(&boot.id), "ncclGetUniqueId");
  boot.nranks = gpus;
  std::barrier step_done(gpus);

  auto rank_main = [&](int rank) {
    check(cudaSetDevice(rank));
    cudaStream_t stream, comm_stream;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    check(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
    ss::nccl_bootstrap b = boot;
    b.rank = rank;
    ss::nccl_communicator comm(b, rank, ss::nccl_comm_options{4, 0});  // small frames: few CTAs, SMs left to the codec
    ss::nccl_broadcast_channel channel(comm.get(), 0, comm_stream);
    std::uint16_t* w = nullptr;  // the weights (trainer) or the worker's copy
    std::uint16_t* snapshot = nullptr;
    void** d_w = nullptr;
    void** d_snapshot = nullptr;
    check(cudaMalloc(&w, n * 2));
    check(cudaMalloc(&d_w, sizeof(void*)));
    check(cudaMemcpy(d_w, &w, sizeof(void*), cudaMemcpyHostToDevice));
    if (rank == 0) {  // the trainer starts the workers from the same weights (here: one dense broadcast)
      fill<<<1024, 256, 0, comm_stream>>>(w, n);
      check(cudaMalloc(&snapshot, n * 2));
      check(cudaMalloc(&d_snapshot, sizeof(void*)));
      check(cudaMemcpy(d_snapshot, &snapshot, sizeof(void*), cudaMemcpyHostToDevice));
      check(cudaMemcpyAsync(snapshot, w, n * 2, cudaMemcpyDeviceToDevice, comm_stream));
    }
    ss::detail::check_nccl(ncclBroadcast(w, w, n * 2, ncclUint8, 0, comm.get(), comm_stream), "ncclBroadcast", comm.get());
    check(cudaStreamSynchronize(comm_stream));
    if (rank == 0) {
      sc::encode_config cfg;
      cfg.encoder = ss::encoder_id::delta_varint;
      cfg.mode = ss::value_mode::ulp;
      sc::nccl_publisher publisher(layout, plans, cfg, channel, stream, comm_stream);
      for (int v = 1; v <= versions; ++v) {
        step<<<1024, 256, 0, stream>>>(w, n, static_cast<std::uint64_t>(v));  // "an optimizer step"
        const auto st = publisher.publish(static_cast<std::uint64_t>(v), d_snapshot, d_w);
        publisher.update_snapshot(d_snapshot);
        std::printf("trainer : version %d: %llu changed, %llu bytes broadcast (dense: %llu), checksum %016llx\n", v,
                    static_cast<unsigned long long>(st.changed), static_cast<unsigned long long>(st.payload_bytes),
                    static_cast<unsigned long long>(n * 2), static_cast<unsigned long long>(st.target_checksum));
        step_done.arrive_and_wait();
      }
      publisher.close();
    } else {
      sc::nccl_subscriber subscriber(layout, channel, stream, comm_stream);
      while (auto got = subscriber.next(d_w)) {
        std::printf("worker %d: version %llu verified and applied, checksum %016llx\n", rank, static_cast<unsigned long long>(got->version),
                    static_cast<unsigned long long>(got->checksum));
        step_done.arrive_and_wait();
      }
    }
    check(cudaStreamSynchronize(stream));
    check(cudaStreamSynchronize(comm_stream));
    cudaFree(w);
    cudaFree(snapshot);
    cudaFree(d_w);
    cudaFree(d_snapshot);
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < gpus; ++r)
    threads.emplace_back([&, r] {
      try {
        rank_main(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "nccl_sync rank %d: %s\n", r, e.what());
        std::_Exit(1);  // the other ranks would wait in a collective forever
      }
    });
  for (auto& t : threads) t.join();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "nccl_sync: %s\n", e.what());
  return 1;
}
