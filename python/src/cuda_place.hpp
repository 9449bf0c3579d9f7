// Weights on one GPU for the Python endpoints (endpoints.hpp): the engine's compiled GPU backends
// (sparsesync::cuda_engine), a stream of the engine's own ordered against the caller's by events, and `Frames`:
// how bucket frames travel between the ends (through host memory on the TCP connection, gpu.cpp; GPU to GPU on
// an NCCL link over it, nccl.cpp). Plain C++: no nvcc needed.
#pragma once

#include "endpoints.hpp"

#include <sparsesync/cuda/cuda_error.hpp>
#include <sparsesync/cuda/device_scope.hpp>
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>

#include <cuda_runtime_api.h>

namespace sparsesync::python {

using cuda::throw_on_cuda_error;

// Makes a device current for a scope, restoring the caller's (Python threads share the runtime's per-thread
// current device with whatever else the process runs, torch included).
using device_guard = cuda::device_scope;

inline int resolve_device(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    throw error(errc::invalid_argument, "no CUDA device is visible to this process (a GPU endpoint needs one)");
  if (device < 0) throw_on_cuda_error(cudaGetDevice(&device), "cudaGetDevice");
  if (device >= count)
    throw error(errc::invalid_argument, "cuda:" + std::to_string(device) + " does not exist (" + std::to_string(count) + " visible)");
  return device;
}

// Weights on one GPU. The engine works on a stream of its own; each call is ordered after the caller's stream
// (publish: the weights are final) or before it (receive: what reads the weights next waits for the apply), with
// an event, so the caller never has to synchronize the device. Frames: the `wire`, the `link` the engine uses,
// `frames_on_device`, `encoder` (the GPU encoder that suits the link), and accept(listener, timeout, device) /
// connect(wire transport, device) making the link from a connection.
template <class Frames>
class cuda_place {
 public:
  static constexpr placement where = placement::cuda;
  using wire = typename Frames::wire;
  using link_type = typename Frames::link;
  using encoder = typename Frames::encoder;
  using sender_type = sync::sender<encoder, fixed_bytes, link_type, sync::device_source>;
  using receiver_type = sync::receiver<link_type, sync::device_sink>;

  cuda_place(const place_options& o, bool trainer) : device_(resolve_device(o.device)) {
    if (o.snapshot != "device" && o.snapshot != "host_pinned")
      throw error(errc::invalid_argument, "snapshot must be 'device' or 'host_pinned', not '" + o.snapshot + "'");
    if (o.commit != "atomic" && o.commit != "streamed")
      throw error(errc::invalid_argument, "commit must be 'atomic' or 'streamed', not '" + o.commit + "'");
    snapshot_ = o.snapshot == "device" ? sync::snapshot_place::device : sync::snapshot_place::host_pinned;
    commit_ = o.commit == "atomic" ? cuda::frame_commit_mode::atomic : cuda::frame_commit_mode::streamed;
    (void)trainer;
    device_guard on(device_);
    throw_on_cuda_error(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    if (const auto e = cudaEventCreateWithFlags(&event_, cudaEventDisableTiming); e != cudaSuccess) {
      cudaStreamDestroy(stream_);
      throw_on_cuda_error(e, "cudaEventCreateWithFlags");
    }
  }
  cuda_place(const cuda_place&) = delete;
  cuda_place& operator=(const cuda_place&) = delete;
  ~cuda_place() {
    device_guard on(device_);
    cudaStreamSynchronize(stream_);
    cudaEventDestroy(event_);
    cudaStreamDestroy(stream_);
  }

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  link_type accept(typename wire::listener& l, ms timeout) { return Frames::accept(l, timeout, device_); }
  link_type connect(typename wire::transport t) { return Frames::connect(std::move(t), device_); }

  // `name`: "auto" (the link's encoder, Frames::encoder) or any encoder with a device twin, chosen at run time.
  // One encoder for every bucket: no link speed to weigh entropy in by (that is the host encoder's auto).
  void emplace_sender(std::optional<sender_type>& tx, const model_layout& layout, const sync::sender_options& o, fixed_bytes policy,
                      const std::string& name) {
    if (o.encode.link.stated())
      throw error(errc::invalid_argument,
                  "link_gbps: a GPU publisher encodes on the GPU with one encoder; the link weighs entropy in the host encoder's auto (device='cpu')");
    const encoder_id id = named_encoder(name).value_or(encoder::id);
    device_guard on(device_);
    cuda::device_source_options so;
    so.stream = stream_;
    so.snapshot = snapshot_;
    so.frames_on_device = Frames::frames_on_device;
    tx.emplace(layout, o, policy, sync::device_source<encoder>(cuda::compiled_device_encoder_backend(so), id));
  }

  void emplace_receiver(std::optional<receiver_type>& rx, const model_layout& layout, std::span<const tensor_view> weights, link_type t,
                        const sync::receiver_options& o) {
    device_guard on(device_);
    cuda::device_sink_options so;
    so.stream = stream_;
    so.commit = commit_;
    rx.emplace(layout, sync::device_sink(cuda::compiled_device_applier_backend(layout, weights, so)), std::move(t), o);
  }

  void order_after(std::uintptr_t caller) { link(reinterpret_cast<cudaStream_t>(caller), stream_); }
  void order_before(std::uintptr_t caller) { link(stream_, reinterpret_cast<cudaStream_t>(caller)); }

  // What publish() reports of the source: its encoder and the memory it holds.
  void report_source(const sender_type& tx, nb::dict& d) const {
    d["encoder"] = std::string(encoder_name(tx.source().encoder()));
    const auto m = tx.source().memory();
    d["snapshot_device_bytes"] = m.snapshot_device;
    d["snapshot_host_bytes"] = m.snapshot_host;
    d["scratch_device_bytes"] = m.scratch_device;
  }

 private:
  // `to` waits for the work queued on `from` so far.
  void link(cudaStream_t from, cudaStream_t to) {
    device_guard on(device_);
    throw_on_cuda_error(cudaEventRecord(event_, from), "cudaEventRecord");
    throw_on_cuda_error(cudaStreamWaitEvent(to, event_, 0), "cudaStreamWaitEvent");
  }

  int device_;
  sync::snapshot_place snapshot_ = sync::snapshot_place::device;
  cuda::frame_commit_mode commit_ = cuda::frame_commit_mode::atomic;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t event_ = nullptr;
};

// Registers the CUDA runtime's failures as sparsesync.CudaError.
void register_cuda_errors();

// Frames through host memory: the link is the wire's connection itself; rice, the fewest bytes, as the network
// is the bottleneck.
template <class Wire>
struct host_frames {
  using wire = Wire;
  using link = typename Wire::transport;
  using encoder = rice;
  static constexpr bool frames_on_device = false;
  static link accept(typename Wire::listener& l, ms timeout, int) { return Wire::accept(l, timeout); }
  static link connect(link t, int) { return t; }
};

}  // namespace sparsesync::python
