// The `version_source` concept: what sync::sender needs from the place its weights live. The sender speaks the
// session protocol (handshake, acks, nacks, history, full transfers: docs/PROTOCOL.md) the same way wherever
// the weights are; a source turns the trainer's weights into protocol messages and keeps the snapshot (the base
// of the next patch). Sources: host_source (host memory, host_source.hpp) and device_source (GPU memory,
// device_weights.hpp).
#pragma once

#include <sparsesync/core/layout.hpp>
#include <sparsesync/format/patch_writer.hpp>
#include <sparsesync/format/wire.hpp>
#include <sparsesync/sync/protocol.hpp>
#include <sparsesync/sync/version_stream.hpp>

#include <concepts>
#include <cstdint>
#include <span>
#include <string>

SPARSESYNC_NS_BEGIN
namespace sync {

// What one encoded version adds up to (the sender's publish_report takes these).
struct source_totals {
  std::uint64_t changed = 0;        // elements that differ from the snapshot
  double encode_seconds = 0;        // until the last bucket was encoded (sends overlap it)
  double snapshot_seconds = 0;      // bringing the snapshot to the new version (part of encode_seconds or after it)
  // Where a GPU source's encode time went (0 for host sources): blocked on the GPU's encode, copying frames to
  // the host, handing them to the sessions' stream, enqueueing the GPU work.
  double gpu_wait_seconds = 0, download_seconds = 0, hand_off_seconds = 0, launch_seconds = 0;
};

// A type S is a `version_source` for bucketing policy P when:
//  1. `s.prepare(layout, encode_options, policy)` is called once by the sender before anything else;
//  2. `s.has_version()` (const) tells whether the snapshot holds a published version;
//  3. `s.encode_version(weights, patch_options, stream) -> source_totals` encodes the change from the snapshot
//     (from the all-zero model when it holds none: a full transfer) to `weights` into `stream` as protocol
//     messages (version_begin, bucket..., version_end; stream_writer below), fills stream.target_checksum and
//     payload_bytes, and leaves the snapshot holding `weights`; when it throws, the snapshot holds no version;
//  4. `s.encode_full(patch_options, stream)` encodes the snapshot from the all-zero model (a full transfer for a
//     receiver that joined late, restarted or refused a version); the snapshot is unchanged;
//  5. `s.invalidate()` marks the snapshot as no version.
// Optional:
//  6. `s.settle() -> double` waits for work that encode_version left running after its last frame (a GPU source's
//     snapshot advance, overlapped with the frames' transfer and the receivers' verify) and returns the seconds it
//     waited; the sender calls it before publish() returns, so that a version's time includes it. When it throws,
//     the snapshot holds no version.
template <class S, class P>
concept version_source = requires(S& s, const S& cs, const model_layout& layout, const encode_options& enc, const P& policy,
                                  std::span<const const_tensor_view> weights, const patch_options& po, version_stream& out) {
  s.prepare(layout, enc, policy);
  { cs.has_version() } -> std::convertible_to<bool>;
  { s.encode_version(weights, po, out) } -> std::same_as<source_totals>;
  s.encode_full(po, out);
  s.invalidate();
};

namespace detail {
// A source's encoder chosen at run time (host_source, device_source) must be a built-in one: `who` names the source.
inline void require_builtin_encoder(encoder_id id, const char* who) {
  const auto wire = static_cast<std::uint8_t>(id);
  if (!is_builtin_encoder(wire)) throw error(errc::invalid_argument, std::string(who) + ": unknown encoder id " + std::to_string(wire));
}

template <class S, class P>
struct version_source_diagnostics {
  static_assert(requires(S& s, const model_layout& l, const encode_options& e, const P& p) { s.prepare(l, e, p); },
                "sparsesync: version_source requirement 1: `void prepare(const model_layout&, const encode_options&, const Policy&);`");
  static_assert(requires(const S& s) { { s.has_version() } -> std::convertible_to<bool>; },
                "sparsesync: version_source requirement 2: `bool has_version() const;`");
  static_assert(requires(S& s, std::span<const const_tensor_view> w, const patch_options& po, version_stream& out) {
                  { s.encode_version(w, po, out) } -> std::same_as<source_totals>;
                },
                "sparsesync: version_source requirement 3: `source_totals encode_version(std::span<const const_tensor_view>, "
                "const patch_options&, version_stream&);`");
  static_assert(requires(S& s, const patch_options& po, version_stream& out) { s.encode_full(po, out); },
                "sparsesync: version_source requirement 4: `void encode_full(const patch_options&, version_stream&);`");
  static_assert(requires(S& s) { s.invalidate(); }, "sparsesync: version_source requirement 5: `void invalidate();`");
  static constexpr bool value = version_source<S, P>;
};
}  // namespace detail

template <class S>
concept settling_source = requires(S& s) {
  { s.settle() } -> std::convertible_to<double>;
};

// `static_assert(check_version_source<S, P>)` names the requirement S lacks.
template <class S, class P>
inline constexpr bool check_version_source = detail::version_source_diagnostics<S, P>::value;

// Writes one version into a version_stream as protocol messages, adding up what the bucket frames say about
// themselves (their headers carry changed counts and checksums). Shared by every source, so that the
// messages of a version are framed one way whatever produced the buckets.
class stream_writer {
 public:
  explicit stream_writer(version_stream& out) : out_(out) {}

  void prologue(std::span<const unsigned char> bytes) {
    payload_ += bytes.size();
    out_.push_message(static_cast<std::byte>(message_type::version_begin), bytes);
  }
  // One bucket frame (wire format); returns its changed count.
  std::uint64_t bucket(std::span<const unsigned char> frame) {
    bucket_header h;
    throw_if_error(sparsesync::detail::read_bucket_header(frame, h));
    payload_ += frame.size();
    changed_ += h.changed;
    base_checksum_ += h.base_checksum;
    target_checksum_ += h.target_checksum;
    out_.push_message(static_cast<std::byte>(message_type::bucket), frame);
    return h.changed;
  }
  // One bucket frame left in GPU memory, described by its header (the frame's first bucket_header_bytes, copied
  // to the host); returns its changed count.
  std::uint64_t bucket_on_device(std::span<const unsigned char> header, device_frame frame) {
    bucket_header h;
    throw_if_error(sparsesync::detail::read_bucket_header(header, h));
    payload_ += frame.bytes;
    changed_ += h.changed;
    base_checksum_ += h.base_checksum;
    target_checksum_ += h.target_checksum;
    out_.push_device(std::move(frame));
    return h.changed;
  }
  // The final header (with the whole-model checksums); completes the stream.
  void end(std::span<const unsigned char> header, std::uint64_t target_checksum) {
    out_.target_checksum = target_checksum;
    out_.payload_bytes = payload_;
    out_.push_message(static_cast<std::byte>(message_type::version_end), header);
    out_.finish(true);
  }

  [[nodiscard]] std::uint64_t changed() const { return changed_; }
  [[nodiscard]] std::uint64_t base_checksum() const { return base_checksum_; }
  [[nodiscard]] std::uint64_t target_checksum() const { return target_checksum_; }

 private:
  version_stream& out_;
  std::uint64_t payload_ = 0, changed_ = 0, base_checksum_ = 0, target_checksum_ = 0;
};

}  // namespace sync
SPARSESYNC_NS_END
