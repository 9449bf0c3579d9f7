// The host-side vocabulary of GPU-resident sync (frame_sync.cuh), usable from translation units that a plain
// C++ compiler builds: the `device_frame_channel` concept, a type-erased reference to any such channel, the
// results of a publish and of a receive, and abstract publisher / subscriber handles.
//
// Why: Boost.Asio (and other host libraries) do not get through nvcc's front end, while frame_publisher and
// frame_subscriber launch kernels and so need nvcc. A program that syncs GPU weights over asio_tcp builds the
// transport and its transport_frame_channel (transport_frame_channel.hpp, host-only) in a .cpp file, and the
// publisher or subscriber in a .cu file from a device_frame_channel_ref (make_any_frame_publisher /
// make_any_frame_subscriber in frame_sync.cuh); the .cpp side drives it through any_frame_publisher /
// any_frame_subscriber. bench/net/gpu_link_bench.cpp + gpu_link_codec.cu show the split.
#pragma once

#include <sparsesync/core/config.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

SPARSESYNC_NS_BEGIN
namespace cuda {

// A type C is a `device_frame_channel` when (all calls on the channel's own CUDA stream, in the same order on
// every rank):
//  1. `c.is_root()` (const) tells whether this rank sends;
//  2. the root's `c.send(const void* device_data, std::size_t bytes)` enqueues one frame of device memory; the
//     bytes must stay valid and unchanged until the channel's stream has passed the send;
//  3. the root's `c.close()` ends the stream of frames;
//  4. the others' `c.receive_size()` -> std::optional<std::size_t> blocks for the next frame's length, or
//     returns nothing once the root closed;
//  5. the others' `c.receive_payload(void* device_data)` enqueues that frame's landing in device memory (at
//     least the announced length) on the channel's stream.
template <class C>
concept device_frame_channel = requires(C& c, const C& cc, const void* src, void* dst, std::size_t n) {
  { cc.is_root() } -> std::convertible_to<bool>;
  c.send(src, n);
  c.close();
  { c.receive_size() } -> std::same_as<std::optional<std::size_t>>;
  c.receive_payload(dst);
};

namespace detail {
template <class C>
struct device_frame_channel_diagnostics {
  static_assert(requires(const C& c) { { c.is_root() } -> std::convertible_to<bool>; },
                "sparsesync: a device frame channel needs `bool is_root() const;`");
  static_assert(requires(C& c, const void* p, std::size_t n) { c.send(p, n); },
                "sparsesync: a device frame channel needs `void send(const void* device_data, std::size_t bytes);`");
  static_assert(requires(C& c) { c.close(); }, "sparsesync: a device frame channel needs `void close();`");
  static_assert(requires(C& c) { { c.receive_size() } -> std::same_as<std::optional<std::size_t>>; },
                "sparsesync: a device frame channel needs `std::optional<std::size_t> receive_size();`");
  static_assert(requires(C& c, void* p) { c.receive_payload(p); },
                "sparsesync: a device frame channel needs `void receive_payload(void* device_data);`");
  static constexpr bool value = device_frame_channel<C>;
};
}  // namespace detail

// `static_assert(check_device_frame_channel<C>)` explains what C lacks.
template <class C>
inline constexpr bool check_device_frame_channel = detail::device_frame_channel_diagnostics<C>::value;

// A non-owning reference to any device_frame_channel, itself a device_frame_channel: lets code compiled by
// nvcc use a channel whose type it cannot see (or cannot compile). The referenced channel must outlive it.
class device_frame_channel_ref {
 public:
  template <class C>
    requires(!std::same_as<std::remove_cvref_t<C>, device_frame_channel_ref>)
  explicit device_frame_channel_ref(C& c) noexcept
      : self_(&c),
        is_root_([](const void* s) { return static_cast<bool>(static_cast<const C*>(s)->is_root()); }),
        send_([](void* s, const void* p, std::size_t n) { static_cast<C*>(s)->send(p, n); }),
        close_([](void* s) { static_cast<C*>(s)->close(); }),
        receive_size_([](void* s) -> std::optional<std::size_t> { return static_cast<C*>(s)->receive_size(); }),
        receive_payload_([](void* s, void* p) { static_cast<C*>(s)->receive_payload(p); }) {
    static_assert(check_device_frame_channel<C>);
  }

  [[nodiscard]] bool is_root() const { return is_root_(self_); }
  void send(const void* device_data, std::size_t bytes) { send_(self_, device_data, bytes); }
  void close() { close_(self_); }
  std::optional<std::size_t> receive_size() { return receive_size_(self_); }
  void receive_payload(void* device_data) { receive_payload_(self_, device_data); }

 private:
  void* self_;
  bool (*is_root_)(const void*);
  void (*send_)(void*, const void*, std::size_t);
  void (*close_)(void*);
  std::optional<std::size_t> (*receive_size_)(void*);
  void (*receive_payload_)(void*, void*);
};

struct frame_publish_stats {
  std::uint64_t version = 0;
  std::uint64_t changed = 0;
  std::uint64_t payload_bytes = 0;  // bucket frames + header, sent once on the channel
  std::uint64_t target_checksum = 0;
  double encode_ms = 0;             // from publish() until the last bucket was encoded (transfers overlap it)
};

struct frame_received_version {
  std::uint64_t version = 0;
  std::uint64_t changed = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t checksum = 0;  // content checksum of the weights now held
};

// How a subscriber writes a version (frame_subscriber, frame_sync.cuh). Both leave the worker's weights on
// either the new version, verified, or on the old one, bit for bit: a version is applied whole or not at all.
enum class frame_commit_mode {
  // Verify every bucket and the closing header, then write: the weights change only in one short final
  // scatter, so an engine may keep reading them while the frames arrive.
  atomic,
  // Verify and write bucket by bucket as frames arrive; a version refused later (a bucket, the header, or a
  // channel that ends inside the version) is rolled back to the old bits before the error is thrown (ULP-coded
  // buckets by decoding their frames again and stepping back, absolute-coded ones from their kept staging:
  // apply_plan::apply_undoable). Readers would see a partly written version: for engines paused during the
  // update. Faster (the writes overlap the transfer).
  streamed,
};

// Handles for code that cannot include frame_sync.cuh (see the top of this file). Device pointer arrays as
// for frame_publisher::publish / frame_subscriber::next.
class any_frame_publisher {
 public:
  virtual ~any_frame_publisher() = default;
  virtual frame_publish_stats publish(std::uint64_t version, const void* const* d_snapshot, const void* const* d_weights) = 0;
  virtual void update_snapshot(void* const* d_snapshot) = 0;
  virtual void close() = 0;
};

class any_frame_subscriber {
 public:
  virtual ~any_frame_subscriber() = default;
  virtual std::optional<frame_received_version> next(void* const* d_weights) = 0;
};

}  // namespace cuda
SPARSESYNC_NS_END
