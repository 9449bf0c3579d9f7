// Device-buffer transport over NCCL: one root rank broadcasts frames of GPU memory to every other rank of a
// communicator, each frame a size message followed by the payload, all enqueued on the caller's CUDA stream.
//
// This is not a `transport` (its frames live in device memory and it is one-to-many); the byte-level
// concept is for host frames. The communicator is bootstrapped from an ncclUniqueId sent over an
// authenticated host transport (share_unique_id / receive_unique_id): NCCL itself authenticates nothing,
// so only ranks that proved the pre-shared key learn the id.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/transport/error.hpp>
#include <sparsesync/transport/transport.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

SPARSESYNC_NS_BEGIN

namespace detail {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw transport_error(transport_errc::backend, std::string("nccl transport: ") + what + ": " + cudaGetErrorString(e));
}

inline void check_nccl(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  std::string msg = std::string("nccl transport: ") + what + ": " + ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last && *last) msg += std::string(" (") + last + ")";
  throw transport_error(transport_errc::backend, msg);
}

// "SSNCCLID" | u32 rank | u32 nranks | ncclUniqueId (128 bytes)
inline constexpr std::size_t unique_id_message_size = 16 + sizeof(ncclUniqueId);
inline constexpr char unique_id_magic[8] = {'S', 'S', 'N', 'C', 'C', 'L', 'I', 'D'};
inline constexpr int max_nccl_ranks = 1 << 16;

// Size message value that ends the stream.
inline constexpr std::uint64_t end_of_stream = std::numeric_limits<std::uint64_t>::max();

}  // namespace detail

// What a rank needs to join the communicator.
struct nccl_bootstrap {
  ncclUniqueId id{};
  int rank = 0;
  int nranks = 0;
};

// Root side: makes a fresh ncclUniqueId and sends each peer its rank (1..n, the root is 0) over its
// already-authenticated transport. Returns the root's own bootstrap.
template <transport T>
nccl_bootstrap share_unique_id(std::span<T* const> peers) {
  if (peers.empty() || peers.size() + 1 > static_cast<std::size_t>(detail::max_nccl_ranks))
    throw transport_error(transport_errc::invalid_argument, "share_unique_id: need 1 to 65535 peers");
  nccl_bootstrap self;
  detail::check_nccl(ncclGetUniqueId(&self.id), "ncclGetUniqueId");
  self.rank = 0;
  self.nranks = static_cast<int>(peers.size()) + 1;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    std::vector<std::byte> m(detail::unique_id_message_size);
    auto* p = reinterpret_cast<unsigned char*>(m.data());
    std::memcpy(p, detail::unique_id_magic, 8);
    detail::store_le<std::uint32_t>(p + 8, static_cast<std::uint32_t>(i + 1));
    detail::store_le<std::uint32_t>(p + 12, static_cast<std::uint32_t>(self.nranks));
    std::memcpy(p + 16, &self.id, sizeof self.id);
    peers[i]->send(m);
  }
  return self;
}

// Peer side: receives the bootstrap that share_unique_id sent on this transport.
template <transport T>
nccl_bootstrap receive_unique_id(T& t) {
  std::vector<std::byte> m;
  if (!t.receive(m))
    throw transport_error(transport_errc::connection_closed, "receive_unique_id: the root closed before sending the NCCL id");
  const auto* p = reinterpret_cast<const unsigned char*>(m.data());
  if (m.size() != detail::unique_id_message_size || std::memcmp(p, detail::unique_id_magic, 8) != 0)
    throw transport_error(transport_errc::protocol, "receive_unique_id: the frame is not an NCCL bootstrap message");
  nccl_bootstrap b;
  b.rank = static_cast<int>(detail::load_le<std::uint32_t>(p + 8));
  b.nranks = static_cast<int>(detail::load_le<std::uint32_t>(p + 12));
  if (b.nranks < 2 || b.nranks > detail::max_nccl_ranks || b.rank < 1 || b.rank >= b.nranks)
    throw transport_error(transport_errc::protocol, "receive_unique_id: rank " + std::to_string(b.rank) + " of " +
                                                        std::to_string(b.nranks) + " is out of range");
  std::memcpy(&b.id, p + 16, sizeof b.id);
  return b;
}

// How a communicator may use the GPU. NCCL's own defaults suit dense collectives; sparse versions are a few
// MB per bucket, and every CTA that an in-flight broadcast holds (often while it waits for a peer) is an SM
// taken from the encoder or the apply kernels running beside it. A handful of CTAs carries tens of GB/s.
struct nccl_comm_options {
  int max_ctas = 0;  // 0: NCCL's default
  int min_ctas = 0;  // 0: NCCL's default
};

namespace detail {
// NCCL's configuration for a communicator with these CTA limits (checked; `who` names the caller in the error),
// non-blocking on request.
inline ncclConfig_t nccl_config(const nccl_comm_options& opt, bool blocking, const char* who) {
  if (opt.max_ctas < 0 || opt.min_ctas < 0 || (opt.max_ctas && opt.min_ctas > opt.max_ctas))
    throw transport_error(transport_errc::invalid_argument, std::string(who) + ": CTA limits must be >= 0 and min_ctas <= max_ctas");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  if (!blocking) config.blocking = 0;  // blocking: NCCL's default (NCCL_COMM_BLOCKING may set it)
  if (opt.max_ctas) config.maxCTAs = opt.max_ctas;
  if (opt.min_ctas) config.minCTAs = opt.min_ctas;
  return config;
}
}  // namespace detail

// Owns an NCCL communicator. Every rank must construct it concurrently (ncclCommInitRank blocks until all
// ranks have joined).
class nccl_communicator {
 public:
  nccl_communicator(const nccl_bootstrap& b, int cuda_device, const nccl_comm_options& opt = {}) : rank_(b.rank), size_(b.nranks) {
    detail::check_cuda(cudaSetDevice(cuda_device), "cudaSetDevice");
    ncclConfig_t config = detail::nccl_config(opt, true, "nccl_communicator");
    detail::check_nccl(ncclCommInitRankConfig(&comm_, b.nranks, b.id, b.rank, &config), "ncclCommInitRankConfig");
  }
  nccl_communicator(nccl_communicator&& o) noexcept
      : comm_(std::exchange(o.comm_, nullptr)), rank_(o.rank_), size_(o.size_) {}
  nccl_communicator& operator=(nccl_communicator&& o) noexcept {
    if (this != &o) {
      release();
      comm_ = std::exchange(o.comm_, nullptr);
      rank_ = o.rank_;
      size_ = o.size_;
    }
    return *this;
  }
  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;
  ~nccl_communicator() { release(); }

  [[nodiscard]] ncclComm_t get() const noexcept { return comm_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }

  // Aborts outstanding operations (a peer died or refused a frame); the communicator is unusable afterwards.
  void abort() noexcept {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  void release() noexcept {
    if (comm_) ncclCommDestroy(comm_);
    comm_ = nullptr;
  }

  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 0;
};

// Device memory that grows on demand, for receive().
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(device_buffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), capacity_(std::exchange(o.capacity_, 0)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      if (data_) cudaFree(data_);
      data_ = std::exchange(o.data_, nullptr);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }
  ~device_buffer() {
    if (data_) cudaFree(data_);
  }

  void reserve(std::size_t bytes) {
    if (bytes <= capacity_) return;
    if (data_) detail::check_cuda(cudaFree(data_), "cudaFree");
    data_ = nullptr;
    capacity_ = 0;
    detail::check_cuda(cudaMalloc(&data_, bytes), "cudaMalloc");
    capacity_ = bytes;
  }
  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }

 private:
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
};

// Frames from `root` to all other ranks of `comm`. Every rank calls the matching operation in the same
// order (NCCL collectives): the root send()/close(), the others receive() (or receive_size() +
// receive_payload()). All work is enqueued on `stream`; the root's payload must stay valid until the
// stream has passed the broadcast.
class nccl_broadcast_channel {
 public:
  nccl_broadcast_channel(ncclComm_t comm, int root, cudaStream_t stream, std::size_t max_frame_size = default_max_frame_size)
      : comm_(comm), root_(root), stream_(stream), max_frame_size_(max_frame_size) {
    if (max_frame_size_ > hard_max_frame_size)
      throw transport_error(transport_errc::invalid_argument, "nccl_broadcast_channel: max_frame_size exceeds 1 GiB");
    detail::check_nccl(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank", comm_);
    detail::check_cuda(cudaMalloc(&size_device_, sizeof(std::uint64_t)), "cudaMalloc(size)");
    detail::check_cuda(cudaMallocHost(&size_host_, sizeof(std::uint64_t)), "cudaMallocHost(size)");
  }
  nccl_broadcast_channel(const nccl_broadcast_channel&) = delete;
  nccl_broadcast_channel& operator=(const nccl_broadcast_channel&) = delete;
  ~nccl_broadcast_channel() {
    cudaFree(size_device_);
    cudaFreeHost(size_host_);
  }

  [[nodiscard]] bool is_root() const noexcept { return rank_ == root_; }
  [[nodiscard]] std::size_t max_frame_size() const noexcept { return max_frame_size_; }

  // Root: broadcasts `bytes` bytes of device memory.
  void send(const void* device_data, std::size_t bytes) {
    require_root(true, "send");
    if (bytes > max_frame_size_)
      throw transport_error(transport_errc::frame_too_large, "nccl_broadcast_channel: frame of " + std::to_string(bytes) +
                                                                 " bytes exceeds max_frame_size");
    broadcast_size(bytes);
    if (bytes > 0)
      detail::check_nccl(ncclBroadcast(device_data, const_cast<void*>(device_data), bytes, ncclUint8, root_, comm_, stream_),
                         "ncclBroadcast(payload)", comm_);
  }

  // Root: ends the stream; receivers then get std::nullopt.
  void close() {
    require_root(true, "close");
    broadcast_size(detail::end_of_stream);
  }

  // Receivers: the next frame's size (synchronises `stream`), or nothing after the root's close(). A size
  // over max_frame_size aborts the communicator, since every rank must take part in the payload broadcast.
  std::optional<std::size_t> receive_size() {
    require_root(false, "receive_size");
    if (pending_) throw transport_error(transport_errc::invalid_argument, "nccl_broadcast_channel: receive_payload() is due first");
    broadcast_size(0);
    detail::check_cuda(cudaMemcpyAsync(size_host_, size_device_, sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream_),
                       "cudaMemcpyAsync(size)");
    detail::check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    ncclResult_t async = ncclSuccess;
    detail::check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError", comm_);
    detail::check_nccl(async, "asynchronous NCCL error", comm_);
    const std::uint64_t n = detail::load_le<std::uint64_t>(reinterpret_cast<const unsigned char*>(size_host_));
    if (n == detail::end_of_stream) return std::nullopt;
    if (n > max_frame_size_) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
      throw transport_error(transport_errc::frame_too_large, "nccl_broadcast_channel: the root announces " + std::to_string(n) +
                                                                 " bytes, max_frame_size is " + std::to_string(max_frame_size_) +
                                                                 "; the communicator was aborted");
    }
    pending_ = static_cast<std::size_t>(n);
    has_pending_ = true;
    return pending_;
  }

  // Receivers: enqueues the payload broadcast announced by receive_size() into `device_data` (at least that
  // many bytes); the data is there once `stream` has passed this point.
  void receive_payload(void* device_data) {
    require_root(false, "receive_payload");
    if (!has_pending_) throw transport_error(transport_errc::invalid_argument, "nccl_broadcast_channel: receive_size() first");
    has_pending_ = false;
    if (pending_ > 0)
      detail::check_nccl(ncclBroadcast(device_data, device_data, pending_, ncclUint8, root_, comm_, stream_),
                         "ncclBroadcast(payload)", comm_);
    pending_ = 0;
  }

  // Receivers: both steps into a buffer that grows as needed; returns the frame size, or nothing at the end.
  std::optional<std::size_t> receive(device_buffer& buffer) {
    const auto n = receive_size();
    if (!n) return std::nullopt;
    buffer.reserve(*n);
    receive_payload(buffer.data());
    return n;
  }

 private:
  void require_root(bool root, const char* op) const {
    if (!comm_) throw transport_error(transport_errc::connection_closed, "nccl_broadcast_channel: the communicator was aborted");
    if (is_root() != root)
      throw transport_error(transport_errc::invalid_argument,
                            std::string("nccl_broadcast_channel: ") + op + "() is for " + (root ? "the root" : "receivers") +
                                " (this is rank " + std::to_string(rank_) + ", root " + std::to_string(root_) + ")");
  }

  void broadcast_size(std::uint64_t value) {
    if (is_root()) {
      // Pageable source: cudaMemcpyAsync stages it before returning, so `value` may go out of scope.
      unsigned char le[8];
      detail::store_le<std::uint64_t>(le, value);
      detail::check_cuda(cudaMemcpyAsync(size_device_, le, sizeof le, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync(size)");
    }
    detail::check_nccl(ncclBroadcast(size_device_, size_device_, sizeof(std::uint64_t), ncclUint8, root_, comm_, stream_),
                       "ncclBroadcast(size)", comm_);
  }

  ncclComm_t comm_;
  int root_;
  int rank_ = 0;
  cudaStream_t stream_;
  std::size_t max_frame_size_;
  void* size_device_ = nullptr;
  std::uint64_t* size_host_ = nullptr;
  std::size_t pending_ = 0;
  bool has_pending_ = false;
};

SPARSESYNC_NS_END
