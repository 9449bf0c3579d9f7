// The stream transports' connection handshake (transport/detail/handshake.hpp) and, after it, their frame
// reader (detail/framed_channel.hpp, frame.hpp), against a peer whose every byte comes from the fuzz input.
// Input: a selector byte (bit 0: this side is the server; bit 1: this side holds a pre-shared key; bits 2-3:
// max_frame_size 16 B, 256 B, 4 KiB or 1 MiB), then the peer's byte stream.
// Properties: only transport_error is thrown; with a key the handshake never succeeds (the input cannot prove
// a key it does not know, nor answer this side's fresh nonce); without one it succeeds exactly when the
// peer's hello has the right magic, version and mode; the frames then delivered, and how the stream ends
// (orderly close or error), are exactly those of a plain reading of docs/TRANSPORTS.md "Frames".
#include "fuzz_support.hpp"

#include <sparsesync/transport/detail/framed_channel.hpp>
#include <sparsesync/transport/detail/handshake.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace {
using namespace sparsesync;
using sparsesync::detail::deadline;

// The peer: reads come from the input (a short read means the peer ended the stream); writes vanish.
struct scripted_stream {
  std::span<const unsigned char> input;
  std::size_t pos = 0;

  void write(std::span<const std::span<const std::byte>>, deadline) {}
  std::size_t read(std::span<std::byte> out, deadline) {
    const std::size_t n = std::min(out.size(), input.size() - pos);
    std::memcpy(out.data(), input.data() + pos, n);
    pos += n;
    return n;
  }
  void shutdown_send() noexcept {}
  void abort() noexcept {}
  [[nodiscard]] std::string describe() const { return "fuzz"; }
};
static_assert(sparsesync::detail::byte_stream<scripted_stream>);

struct reading {
  std::vector<std::vector<std::byte>> frames;
  bool closed = false;  // ended by a close frame; otherwise by an error
};

// docs/TRANSPORTS.md "Frames", read plainly: magic, type, reserved zeros, sequence, length, payload.
reading reference_frames(std::span<const unsigned char> s, std::size_t max_frame) {
  using sparsesync::detail::load_le;
  reading r;
  std::uint64_t sequence = 0;
  for (std::size_t pos = 0;;) {
    if (s.size() - pos < 24) return r;
    const unsigned char* h = s.data() + pos;
    const unsigned type = h[4];
    const std::uint64_t length = load_le<std::uint64_t>(h + 16);
    if (load_le<std::uint32_t>(h) != 0x31465353u || h[5] || h[6] || h[7] || type < 1 || type > 4) return r;
    if (load_le<std::uint64_t>(h + 8) != sequence || length > max_frame) return r;
    if ((type == 2 || type == 4) && length != 0) return r;
    if (s.size() - pos - 24 < length) return r;
    pos += 24;
    ++sequence;
    if (type == 2) {
      r.closed = true;
      return r;
    }
    if (type == 3) return r;  // a device frame through receive() is an error
    if (type == 1) {
      const auto* p = reinterpret_cast<const std::byte*>(s.data() + pos);
      r.frames.emplace_back(p, p + length);
    }
    pos += length;
  }
}

const pre_shared_key& test_key() {
  static const auto k = [] {
    std::vector<std::byte> b(32);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(i * 7 + 1);
    return pre_shared_key::from_bytes(b);
  }();
  return k;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace d = sparsesync::detail;
  fuzz::cursor in(data, size);
  const std::uint8_t selector = in.byte();
  const auto r = (selector & 1) ? d::role::server : d::role::client;
  const pre_shared_key* key = (selector & 2) ? &test_key() : nullptr;
  static constexpr std::size_t max_frames[] = {16, 256, 4096, 1 << 20};
  const std::size_t max_frame = max_frames[(selector >> 2) & 3];
  const auto peer = in.rest();

  scripted_stream stream{peer};
  std::optional<d::session_keys> keys;
  try {
    keys = d::handshake(stream, r, key, {}, deadline::max());
  } catch (const transport_error&) {
    return 0;
  }
  FUZZ_CHECK(key == nullptr && !keys);
  // Success without a key: the peer's hello was well formed and agreed on version 2 and mode "none".
  const std::size_t hello = r == d::role::server ? d::hello_size : d::server_hello_size;
  FUZZ_CHECK(stream.pos == hello);
  const auto* magic = r == d::role::server ? "SSYNCCH1" : "SSYNCSH1";
  FUZZ_CHECK(std::memcmp(peer.data(), magic, 8) == 0 && peer[8] == d::protocol_version && peer[9] == 0 && peer[10] == 0 && peer[11] == 0);

  const auto expected = reference_frames(peer.subspan(hello), max_frame);
  d::channel_options co;
  co.max_frame_size = max_frame;
  d::framed_channel<scripted_stream> channel(std::move(stream), std::nullopt, co);
  reading got;
  try {
    std::vector<std::byte> frame;
    while (channel.receive(frame)) got.frames.push_back(frame);
    got.closed = true;
    FUZZ_CHECK(!channel.receive(frame));  // an ended stream stays ended
  } catch (const transport_error&) {
  }
  FUZZ_CHECK(got.closed == expected.closed);
  FUZZ_CHECK(got.frames == expected.frames);
  return 0;
}
