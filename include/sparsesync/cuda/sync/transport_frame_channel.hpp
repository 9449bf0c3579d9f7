// Device frames over any sparsesync transport (TCP through Boost.Asio, UCX, in-process): a
// device_frame_channel for frame_publisher / frame_subscriber (frame_sync.cuh) when the weights live on GPUs
// but the peers are linked by a network rather than NCCL. Each frame goes device -> pinned host memory ->
// transport on the root, transport -> host -> device on a receiver: the frames are a few MB per bucket, so
// the copies cost little next to the link, and the transports keep their authentication and integrity checks.
// The root sends every frame to each of its peers in turn (fan-out); a receiver has one peer, the root.
// Host-only (CUDA runtime calls, no kernels): a plain C++ compiler builds it, so it also serves transports
// that nvcc cannot compile (Boost.Asio); hand it to a publisher or subscriber built by nvcc through a
// device_frame_channel_ref (frame_channel.hpp). Needs sparsesync::cuda and the transport's target.
#pragma once

#include <sparsesync/core/error.hpp>
#include <sparsesync/cuda/cuda_error.hpp>
#include <sparsesync/cuda/sync/frame_channel.hpp>
#include <sparsesync/transport/transport.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace cuda {

template <class Transport>
class transport_frame_channel {
  static_assert(check_transport<Transport>);

 public:
  // Root: sends to each of `peers` (not owned; they must outlive the channel). `stream` orders the copies.
  transport_frame_channel(std::vector<Transport*> peers, cudaStream_t stream) : peers_(std::move(peers)), stream_(stream), root_(true) {
    if (peers_.empty()) throw error(errc::invalid_argument, "transport_frame_channel: a root needs at least one peer");
    for (const Transport* p : peers_)
      if (p == nullptr) throw error(errc::invalid_argument, "transport_frame_channel: null peer");
  }
  // Receiver: takes frames from `from_root` (not owned).
  transport_frame_channel(Transport& from_root, cudaStream_t stream) : peers_{&from_root}, stream_(stream), root_(false) {}
  transport_frame_channel(const transport_frame_channel&) = delete;
  transport_frame_channel& operator=(const transport_frame_channel&) = delete;
  ~transport_frame_channel() {
    if (pinned_) cudaFreeHost(pinned_);
  }

  [[nodiscard]] bool is_root() const noexcept { return root_; }

  // Root: copies the frame to host memory once the stream reaches it (one synchronization of `stream`), then
  // sends it to every peer; returns when the transports own the bytes.
  void send(const void* device_data, std::size_t bytes) {
    require(true, "send");
    for (const Transport* p : peers_)
      if (bytes > p->max_frame_size()) throw error(errc::invalid_argument, "transport_frame_channel: frame above the transport's limit");
    if (bytes > pinned_bytes_) {
      // Pinning is slow (it maps and locks pages): grow with headroom, so that frames a little larger than
      // the last ones (the next version's) do not pin again.
      const std::size_t cap = std::max(bytes + bytes / 4, 2 * pinned_bytes_);
      if (pinned_) cudaFreeHost(pinned_);
      pinned_ = nullptr;
      pinned_bytes_ = 0;
      throw_on_cuda_error(cudaMallocHost(&pinned_, cap), "cudaMallocHost");
      pinned_bytes_ = cap;
    }
    throw_on_cuda_error(cudaMemcpyAsync(pinned_, device_data, bytes, cudaMemcpyDeviceToHost, stream_), "copy frame to host");
    throw_on_cuda_error(cudaStreamSynchronize(stream_), "copy frame to host");
    const std::span<const std::byte> frame(static_cast<const std::byte*>(pinned_), bytes);
    for (Transport* p : peers_) p->send(frame);
  }

  // Root: ends the stream of frames (every peer's receive_size() then returns nothing).
  void close() {
    require(true, "close");
    for (Transport* p : peers_) p->close();
  }

  // Receiver: blocks for the next frame (received whole into host memory) and returns its length.
  std::optional<std::size_t> receive_size() {
    require(false, "receive_size");
    if (!peers_.front()->receive(frame_)) return std::nullopt;
    return frame_.size();
  }

  // Receiver: enqueues the copy of the frame announced by receive_size() into `device_data`.
  void receive_payload(void* device_data) {
    require(false, "receive_payload");
    // From pageable memory the copy has left frame_ when the call returns: frame_ may be reused at once.
    throw_on_cuda_error(cudaMemcpyAsync(device_data, frame_.data(), frame_.size(), cudaMemcpyHostToDevice, stream_), "copy frame to device");
  }

 private:
  void require(bool root, const char* what) const {
    if (root != root_)
      throw error(errc::invalid_argument, std::string("transport_frame_channel: ") + what + (root ? " is for the root" : " is for receivers"));
  }

  std::vector<Transport*> peers_;
  cudaStream_t stream_;
  bool root_;
  void* pinned_ = nullptr;
  std::size_t pinned_bytes_ = 0;
  std::vector<std::byte> frame_;
};

}  // namespace cuda
SPARSESYNC_NS_END
