// Frame header of the stream transports (asio_tcp, ucx); byte layout in docs/TRANSPORTS.md, "Frames".
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/transport/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

SPARSESYNC_NS_BEGIN
namespace detail {

// "SSF1" in memory order: a stream that lost its framing fails here instead of being misread as a length.
inline constexpr std::uint32_t frame_magic = 0x31465353u;

enum class frame_type : std::uint8_t {
  data = 1,    // a user frame
  close = 2,   // orderly end of the sender's direction; length 0
  device = 3,  // announces a device-memory payload that follows outside the framed stream (ucx); length 16
  close_ack = 4,  // "your close frame was read" (ucx only: UCX drops unread data when an endpoint closes); length 0
};

inline constexpr std::size_t frame_header_size = 24;
// Tags are ChaCha20-Poly1305 (crypto.hpp) under the direction's frame key; docs/TRANSPORTS.md, "Frames".
// The header's own tag authenticates the length before the receiver allocates anything, so a forged header
// cannot make it reserve up to a gigabyte.
inline constexpr std::size_t header_tag_size = 16;
// Over header and payload.
inline constexpr std::size_t payload_tag_size = 16;
// The nonce's first four bytes keep the two tags of one frame apart; the other eight are its sequence number.
// Sequence numbers only grow within a direction, so no nonce ever repeats under one key.
inline constexpr std::uint32_t header_tag_domain = 1;
inline constexpr std::uint32_t payload_tag_domain = 2;

inline std::array<std::byte, 12> frame_nonce(std::uint32_t domain, std::uint64_t sequence) {
  std::array<std::byte, 12> n{};
  auto* p = reinterpret_cast<unsigned char*>(n.data());
  store_le<std::uint32_t>(p, domain);
  store_le<std::uint64_t>(p + 4, sequence);
  return n;
}

struct frame_header {
  frame_type type = frame_type::data;
  std::uint64_t sequence = 0;
  std::uint64_t length = 0;
};

using header_bytes = std::array<std::byte, frame_header_size>;

inline header_bytes encode_header(const frame_header& h) {
  header_bytes b{};
  auto* p = reinterpret_cast<unsigned char*>(b.data());
  store_le<std::uint32_t>(p, frame_magic);
  p[4] = static_cast<unsigned char>(h.type);  // bytes 5..7 stay zero (reserved)
  store_le<std::uint64_t>(p + 8, h.sequence);
  store_le<std::uint64_t>(p + 16, h.length);
  return b;
}

// Checks the fields that do not depend on the receiver's state; throws protocol errors naming the field.
inline frame_header decode_header(const header_bytes& b, const std::string& where) {
  const auto* p = reinterpret_cast<const unsigned char*>(b.data());
  if (load_le<std::uint32_t>(p) != frame_magic)
    throw transport_error(transport_errc::protocol, where + ": bad frame magic (framing lost, or not a sparsesync peer)");
  if (p[5] != 0 || p[6] != 0 || p[7] != 0)
    throw transport_error(transport_errc::protocol, where + ": reserved frame header bytes are not zero");
  frame_header h;
  const unsigned type = p[4];
  if (type < 1 || type > 4) throw transport_error(transport_errc::protocol, where + ": unknown frame type " + std::to_string(type));
  h.type = static_cast<frame_type>(type);
  h.sequence = load_le<std::uint64_t>(p + 8);
  h.length = load_le<std::uint64_t>(p + 16);
  return h;
}

}  // namespace detail
SPARSESYNC_NS_END
