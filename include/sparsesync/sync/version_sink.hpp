// The `version_sink` concept: what sync::receiver needs from the place its weights live. The receiver speaks
// the session protocol (handshake, ack with the verified checksum, nack) the same way wherever the weights are;
// a sink verifies the bucket frames of one version against the worker's weights and commits them. Sinks:
// host_sink (host memory, host_sink.hpp) and device_sink (GPU memory, device_weights.hpp).
#pragma once

#include <sparsesync/core/error.hpp>
#include <sparsesync/core/layout.hpp>
#include <sparsesync/format/wire.hpp>

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>

SPARSESYNC_NS_BEGIN
namespace sync {

// A type K is a `version_sink` when, for one version at a time:
//  1. `k.prepare(layout)` is called once by the receiver and checks the weights against the layout (throws);
//  2. `k.checksum()` returns the content checksum of the weights held now (a full read; used once, for weights
//     restored from elsewhere);
//  3. `k.begin(full, known_base)` starts a version: a full transfer (`full`: the weights are rewritten from the
//     all-zero model and hold no version until the end) or a patch against the held weights, whose whole-model
//     checksum the receiver vouches for in `known_base` (then only changed elements need reading);
//  4. `k.add_bucket(frame) -> status` verifies one bucket frame (wire format, host memory) against the weights;
//     a sink may write it at once only for a full transfer or when it can undo the write (abort());
//  5. `k.finish(header) -> status` checks the version's closing header against the verified buckets;
//  6. `k.commit()` writes a finished version (the receiver holds its weights lock exclusively); `k.changed()`
//     and `k.target_checksum()` (const) then describe it;
//  7. `k.abort()` gives up a refused version: the weights hold the old version again, bit for bit (a full
//     transfer leaves them holding none).
template <class K>
concept version_sink = requires(K& k, const K& ck, const model_layout& layout, bool full, std::optional<std::uint64_t> known,
                                std::span<const unsigned char> frame, const patch_header& h) {
  k.prepare(layout);
  { k.checksum() } -> std::same_as<std::uint64_t>;
  k.begin(full, known);
  { k.add_bucket(frame) } -> std::same_as<status>;
  { k.finish(h) } -> std::same_as<status>;
  k.commit();
  { ck.changed() } -> std::same_as<std::uint64_t>;
  { ck.target_checksum() } -> std::same_as<std::uint64_t>;
  k.abort();
};

namespace detail {
template <class K>
struct version_sink_diagnostics {
  static_assert(requires(K& k, const model_layout& l) { k.prepare(l); },
                "sparsesync: version_sink requirement 1: `void prepare(const model_layout&);`");
  static_assert(requires(K& k) { { k.checksum() } -> std::same_as<std::uint64_t>; },
                "sparsesync: version_sink requirement 2: `std::uint64_t checksum();`");
  static_assert(requires(K& k, bool f, std::optional<std::uint64_t> b) { k.begin(f, b); },
                "sparsesync: version_sink requirement 3: `void begin(bool full, std::optional<std::uint64_t> known_base);`");
  static_assert(requires(K& k, std::span<const unsigned char> f) { { k.add_bucket(f) } -> std::same_as<status>; },
                "sparsesync: version_sink requirement 4: `status add_bucket(std::span<const unsigned char> frame);`");
  static_assert(requires(K& k, const patch_header& h) { { k.finish(h) } -> std::same_as<status>; },
                "sparsesync: version_sink requirement 5: `status finish(const patch_header&);`");
  static_assert(requires(K& k, const K& ck) {
                  k.commit();
                  { ck.changed() } -> std::same_as<std::uint64_t>;
                  { ck.target_checksum() } -> std::same_as<std::uint64_t>;
                },
                "sparsesync: version_sink requirement 6: `void commit();`, `std::uint64_t changed() const;` and "
                "`std::uint64_t target_checksum() const;`");
  static_assert(requires(K& k) { k.abort(); }, "sparsesync: version_sink requirement 7: `void abort();`");
  static constexpr bool value = version_sink<K>;
};
}  // namespace detail

// `static_assert(check_version_sink<K>)` names the requirement K lacks.
template <class K>
inline constexpr bool check_version_sink = detail::version_sink_diagnostics<K>::value;

// Where a frame arriving on a device link is to land: `data` (GPU memory of the sink), written only after the work
// already enqueued on the cudaStream_t `after` (when not null: the slot is reused).
struct device_slot {
  void* data = nullptr;
  void* after = nullptr;
};

// A version_sink K is also a `device_frame_sink` (its weights are on a GPU: the receiver asks its sender for
// device frames when its link is a device_link) when:
//  1. `k.device_frame_slot(bytes) -> device_slot` reserves room for the next frame of `bytes` bytes, valid until that
//     frame is added or the version ends (a frame received there and never added is dropped). Within a patch a
//     receiver may reserve up to max_posted_device_receives slots before adding the oldest (it posts receives
//     ahead over a pipelined_device_link); a full transfer's slots are reserved one at a time;
//  2. `k.add_device_bucket(head) -> status` verifies the frame received into the oldest slot not yet added, as
//     add_bucket() verifies a host frame; `head` is the frame's first bucket_header_bytes, copied from the device
//     frame itself.
template <class K>
concept device_frame_sink = version_sink<K> && requires(K& k, std::size_t n, std::span<const unsigned char> head) {
  { k.device_frame_slot(n) } -> std::same_as<device_slot>;
  { k.add_device_bucket(head) } -> std::same_as<status>;
};

}  // namespace sync
SPARSESYNC_NS_END
