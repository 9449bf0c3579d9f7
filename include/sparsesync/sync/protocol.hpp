// Session protocol messages (docs/PROTOCOL.md). Every message is one transport frame whose first byte is its
// type; fields are fixed-width little-endian. Patch contents travel as the wire format's own frames.
#pragma once

#include <sparsesync/core/error.hpp>
#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/format/wire.hpp>

#include <cstddef>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace sync {

inline constexpr std::uint16_t protocol_version = 1;
inline constexpr std::uint32_t protocol_magic = 0x4E595353;  // "SSYN"

enum class message_type : std::uint8_t {
  hello = 1,          // receiver -> sender: who I am and what I hold
  welcome = 2,        // sender -> receiver: accepted; what the sender holds
  version_begin = 3,  // sender -> receiver: patch prologue (header with zero whole-model checksums + sections)
  bucket = 4,         // sender -> receiver: one bucket frame of the wire format
  version_end = 5,    // sender -> receiver: the final patch header (with whole-model checksums)
  ack = 6,            // receiver -> sender: version applied and verified
  nack = 7,           // receiver -> sender: version refused (reason inside); the sender follows with a full transfer
  refuse = 8,         // sender -> receiver: the handshake failed (reason inside); the connection ends
  bucket_device = 9,  // sender -> receiver: one bucket frame of `u64` bytes follows on the link's device path
};

// hello flags (the u16 after the protocol version; 0 in welcome).
inline constexpr std::uint16_t hello_flag_device_frames = 1;  // the receiver takes bucket frames on a device link
// No device frame above 1 GiB (as host frames): a larger announcement is refused before anything is reserved.
inline constexpr std::uint64_t hard_max_device_frame = std::uint64_t{1} << 30;

// Receiver -> sender, first message of a session.
struct hello {
  std::uint64_t layout_hash = 0;
  bool has_version = false;
  std::uint64_t version = 0;
  std::uint64_t checksum = 0;  // content checksum of the receiver's current weights (when has_version)
  bool device_frames = false;  // its link is a device_link and its weights are on a GPU: send buckets as device frames
};

// Sender -> receiver, answer to hello.
struct welcome {
  std::uint64_t layout_hash = 0;
  bool has_version = false;    // false until the first publish
  std::uint64_t version = 0;   // the sender's newest version
};

struct ack {
  std::uint64_t version = 0;
  std::uint64_t checksum = 0;
};

struct nack {
  std::uint64_t version = 0;
  errc code = errc::ok;
  std::string message;
};

namespace detail {

class message_writer {
 public:
  explicit message_writer(message_type t) { bytes_.push_back(static_cast<std::byte>(t)); }
  template <class T>
  message_writer& put(T v) {
    const std::size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    sparsesync::detail::store_le<T>(reinterpret_cast<unsigned char*>(bytes_.data() + at), v);
    return *this;
  }
  message_writer& put_bytes(std::span<const unsigned char> b) {
    const auto* p = reinterpret_cast<const std::byte*>(b.data());
    bytes_.insert(bytes_.end(), p, p + b.size());
    return *this;
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  std::vector<std::byte> bytes_;
};

class message_reader {
 public:
  explicit message_reader(std::span<const std::byte> m) : p_(reinterpret_cast<const unsigned char*>(m.data())), n_(m.size()) {}
  template <class T>
  bool get(T& v) {
    if (n_ - pos_ < sizeof(T)) return false;
    v = sparsesync::detail::load_le<T>(p_ + pos_);
    pos_ += sizeof(T);
    return true;
  }
  std::span<const unsigned char> rest() const { return {p_ + pos_, n_ - pos_}; }
  bool done() const { return pos_ == n_; }

 private:
  const unsigned char* p_;
  std::size_t n_;
  std::size_t pos_ = 1;  // past the type byte
};

}  // namespace detail

inline std::optional<message_type> type_of(std::span<const std::byte> m) {
  if (m.empty()) return std::nullopt;
  const auto t = static_cast<std::uint8_t>(m[0]);
  if (t < 1 || t > 9) return std::nullopt;
  return static_cast<message_type>(t);
}

inline std::span<const unsigned char> body_of(std::span<const std::byte> m) {
  return {reinterpret_cast<const unsigned char*>(m.data()) + 1, m.size() - 1};
}

inline std::vector<std::byte> encode(const hello& h) {
  return detail::message_writer(message_type::hello)
      .put(protocol_magic).put(protocol_version).put(std::uint16_t{h.device_frames ? hello_flag_device_frames : std::uint16_t{0}})
      .put(h.layout_hash).put(std::uint8_t{h.has_version}).put(h.version).put(h.checksum).take();
}

namespace detail {
// The magic, protocol version and flags field that open hello and welcome; flags outside `allowed` are refused.
inline status read_preamble(std::span<const std::byte> m, message_type expected, message_reader& r, const char* what,
                            std::uint16_t allowed = 0, std::uint16_t* flags = nullptr) {
  std::uint32_t magic = 0;
  std::uint16_t version = 0, reserved = 0;
  if (type_of(m) != expected || !r.get(magic) || magic != protocol_magic) return {errc::bad_magic, std::string("not a sparsesync ") + what};
  if (!r.get(version) || version != protocol_version)
    return {errc::unsupported_version, "peer speaks protocol version " + std::to_string(version) + ", this build speaks 1"};
  if (!r.get(reserved) || (reserved & ~allowed) != 0) return {errc::malformed, std::string(what) + " message"};
  if (flags) *flags = reserved;
  return {};
}
}  // namespace detail

inline status decode(std::span<const std::byte> m, hello& h) {
  detail::message_reader r(m);
  std::uint16_t flags = 0;
  if (auto st = detail::read_preamble(m, message_type::hello, r, "hello", hello_flag_device_frames, &flags); !st) return st;
  h.device_frames = (flags & hello_flag_device_frames) != 0;
  std::uint8_t has = 0;
  if (!r.get(h.layout_hash) || !r.get(has) || !r.get(h.version) || !r.get(h.checksum) || !r.done() || has > 1)
    return {errc::malformed, "hello message"};
  h.has_version = has == 1;
  return {};
}

inline std::vector<std::byte> encode(const welcome& w) {
  return detail::message_writer(message_type::welcome)
      .put(protocol_magic).put(protocol_version).put(std::uint16_t{0}).put(w.layout_hash)
      .put(std::uint8_t{w.has_version}).put(w.version).take();
}

inline status decode(std::span<const std::byte> m, welcome& w) {
  detail::message_reader r(m);
  if (auto st = detail::read_preamble(m, message_type::welcome, r, "welcome"); !st) return st;
  std::uint8_t has = 0;
  if (!r.get(w.layout_hash) || !r.get(has) || !r.get(w.version) || !r.done() || has > 1) return {errc::malformed, "welcome message"};
  w.has_version = has == 1;
  return {};
}

inline std::vector<std::byte> encode(const ack& a) {
  return detail::message_writer(message_type::ack).put(a.version).put(a.checksum).take();
}

inline status decode(std::span<const std::byte> m, ack& a) {
  detail::message_reader r(m);
  if (type_of(m) != message_type::ack || !r.get(a.version) || !r.get(a.checksum) || !r.done()) return {errc::malformed, "ack message"};
  return {};
}

inline std::vector<std::byte> encode_text(message_type t, std::uint64_t version, errc code, const std::string& text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  return detail::message_writer(t).put(version).put(static_cast<std::uint32_t>(code)).put_bytes({p, text.size()}).take();
}

inline std::vector<std::byte> encode(const nack& n) { return encode_text(message_type::nack, n.version, n.code, n.message); }

inline status decode(std::span<const std::byte> m, nack& n) {
  detail::message_reader r(m);
  std::uint32_t code = 0;
  if ((type_of(m) != message_type::nack && type_of(m) != message_type::refuse) || !r.get(n.version) || !r.get(code))
    return {errc::malformed, "nack message"};
  n.code = code <= static_cast<std::uint32_t>(errc::io) ? static_cast<errc>(code) : errc::malformed;
  const auto text = r.rest();
  n.message.assign(reinterpret_cast<const char*>(text.data()), std::min<std::size_t>(text.size(), 4096));
  return {};
}

// A bucket frame that follows on the device path: its length (the receiver's bound before it receives anything).
inline std::vector<std::byte> encode_bucket_device(std::uint64_t frame_bytes) {
  return detail::message_writer(message_type::bucket_device).put(frame_bytes).take();
}
inline status decode_bucket_device(std::span<const std::byte> m, std::uint64_t& frame_bytes) {
  detail::message_reader r(m);
  if (type_of(m) != message_type::bucket_device || !r.get(frame_bytes) || !r.done()) return {errc::malformed, "bucket_device message"};
  if (frame_bytes < bucket_header_bytes || frame_bytes > hard_max_device_frame)
    return {errc::malformed, "bucket_device message announces " + std::to_string(frame_bytes) + " bytes"};
  return {};
}

// Wraps wire-format bytes (prologue, bucket frame, final header) as a message of type t.
inline std::vector<std::byte> wrap(message_type t, std::span<const unsigned char> bytes) {
  return detail::message_writer(t).put_bytes(bytes).take();
}

}  // namespace sync
SPARSESYNC_NS_END
