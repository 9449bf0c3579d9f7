// The frame MAC of the stream transports (protocol version 2, docs/TRANSPORTS.md "Frames"): tags checked
// against RFC 8439's construction rebuilt from OpenSSL's plain ChaCha20 and Poly1305, the frame layout as
// documented, and every altered, replayed, reordered, dropped, spliced, reflected or truncated frame refused.
// The frames go through an in-memory stream, so each attack is exact and the whole file runs in milliseconds.
#include "test_support.hpp"

#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/transport/detail/framed_channel.hpp>

#include <openssl/evp.h>

#include <doctest/doctest.h>

#include <cstring>

using namespace sparsesync;
using sparsesync_test::error_of;
using sparsesync_test::payload;
namespace d = sparsesync::detail;
using bytes = std::vector<std::byte>;

namespace {

// Writes append to `sink`; reads take from `source` (a short read is the peer's end of the stream).
struct memory_stream {
  bytes* sink = nullptr;
  bytes source;
  std::size_t pos = 0;

  void write(std::span<const std::span<const std::byte>> pieces, d::deadline) {
    for (auto p : pieces) sink->insert(sink->end(), p.begin(), p.end());
  }
  std::size_t read(std::span<std::byte> out, d::deadline) {
    const std::size_t n = std::min(out.size(), source.size() - pos);
    std::memcpy(out.data(), source.data() + pos, n);
    pos += n;
    return n;
  }
  void shutdown_send() noexcept {}
  void abort() noexcept {}
  [[nodiscard]] std::string describe() const { return "memory"; }
};
static_assert(d::byte_stream<memory_stream>);

bytes key_bytes(int seed) {
  bytes k(32);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<std::byte>(seed * 31 + i * 7 + 1);
  return k;
}

// One direction of a connection: the sender's keys and the receiver's mirror image.
d::session_keys keys(int send_seed, int receive_seed) {
  return {d::secret(key_bytes(send_seed)), d::secret(key_bytes(receive_seed))};
}

const std::vector<std::size_t> sizes = {40, 0, 40, 1000, 40};

// The bytes a sender with frame key `seed` writes for frames of `sizes`, then its close frame.
bytes wire(int seed = 1) {
  bytes out;
  d::framed_channel<memory_stream> tx(memory_stream{&out}, keys(seed, seed + 100), {});
  for (std::size_t i = 0; i < sizes.size(); ++i) tx.send(payload(i, sizes[i]));
  tx.close();
  return out;
}

constexpr std::size_t overhead = d::frame_header_size + d::header_tag_size + d::payload_tag_size;
std::size_t frame_start(std::size_t i) {
  std::size_t at = 0;
  for (std::size_t j = 0; j < i; ++j) at += overhead + sizes[j];
  return at;
}
bytes frame_bytes(const bytes& w, std::size_t i) {
  return bytes(w.begin() + frame_start(i), w.begin() + frame_start(i) + overhead + sizes[i]);
}

struct outcome {
  std::vector<bytes> delivered;
  bool closed = false;
  transport_errc error = transport_errc::ok;
  std::string message;
};

// What a receiver whose frame key is `seed` makes of `w`.
outcome receive_all(bytes w, int seed = 1) {
  bytes unused;
  d::framed_channel<memory_stream> rx(memory_stream{&unused, std::move(w)}, keys(seed + 100, seed), {});
  outcome o;
  o.error = error_of([&] {
    bytes f;
    while (rx.receive(f)) o.delivered.push_back(f);
    o.closed = true;
  }, &o.message);
  return o;
}

// RFC 8439 §2.8 with an empty plaintext, from the two primitives: Poly1305 keyed by the first 32 bytes of
// ChaCha20's block 0 under the nonce, over aad || zero padding to 16 || le64(aad length) || le64(0).
d::chacha20_poly1305_mac::tag rfc8439_tag(std::span<const std::byte> key, std::span<const std::byte, 12> nonce,
                                          std::span<const std::byte> aad) {
  unsigned char iv[16] = {};  // OpenSSL's ChaCha20 IV: 32-bit block counter, then the 96-bit nonce
  std::memcpy(iv + 4, nonce.data(), 12);
  unsigned char zeros[64] = {}, otk[64];
  int len = 0;
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  REQUIRE(EVP_EncryptInit_ex(c, EVP_chacha20(), nullptr, reinterpret_cast<const unsigned char*>(key.data()), iv) == 1);
  REQUIRE(EVP_EncryptUpdate(c, otk, &len, zeros, 64) == 1);
  EVP_CIPHER_CTX_free(c);

  bytes msg(aad.begin(), aad.end());
  msg.resize((msg.size() + 15) / 16 * 16);
  unsigned char lengths[16] = {};
  d::store_le<std::uint64_t>(lengths, aad.size());
  msg.insert(msg.end(), reinterpret_cast<std::byte*>(lengths), reinterpret_cast<std::byte*>(lengths) + 16);

  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "POLY1305", nullptr);
  EVP_MAC_CTX* m = EVP_MAC_CTX_new(mac);
  REQUIRE(EVP_MAC_init(m, otk, 32, nullptr) == 1);
  REQUIRE(EVP_MAC_update(m, reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) == 1);
  d::chacha20_poly1305_mac::tag t{};
  std::size_t out = 0;
  REQUIRE(EVP_MAC_final(m, reinterpret_cast<unsigned char*>(t.data()), &out, t.size()) == 1);
  EVP_MAC_CTX_free(m);
  EVP_MAC_free(mac);
  return t;
}

}  // namespace

TEST_CASE("frame MAC: ChaCha20-Poly1305 tags equal RFC 8439's construction, message after message on one context") {
  const auto key = key_bytes(3);
  d::chacha20_poly1305_mac mac(key);
  std::uint64_t seq = 0;
  for (std::size_t n : {0, 1, 15, 16, 17, 24, 1000, 70000}) {
    const auto data = payload(n, n);
    const auto nonce = d::frame_nonce(static_cast<std::uint32_t>(1 + n % 2), seq++ * 0x0102030405ull);
    mac.begin(nonce);
    for (std::size_t off = 0; off < n; off += 7) mac.update(std::span(data).subspan(off, std::min<std::size_t>(7, n - off)));
    CHECK(mac.finish() == rfc8439_tag(key, nonce, data));
  }
  const bytes short_key(16);
  CHECK(error_of([&] { d::chacha20_poly1305_mac refused(short_key); }) ==
        transport_errc::invalid_argument);
}

TEST_CASE("frame MAC: the frame layout is the documented one") {
  const bytes w = wire();
  std::size_t total = 0;
  for (auto s : sizes) total += overhead + s;
  REQUIRE(w.size() == total + overhead);  // and the close frame
  const auto key = key_bytes(1);
  for (std::uint64_t i = 0; i <= sizes.size(); ++i) {
    const bytes f = i < sizes.size() ? frame_bytes(w, i) : bytes(w.end() - overhead, w.end());
    const auto* h = reinterpret_cast<const unsigned char*>(f.data());
    CHECK(d::load_le<std::uint64_t>(h + 8) == i);
    const std::size_t n = f.size() - overhead;
    const auto header = std::span(f).first(24);
    const auto nonce1 = d::frame_nonce(1, i), nonce2 = d::frame_nonce(2, i);
    CHECK(std::memcmp(nonce1.data(), "\x01\x00\x00\x00", 4) == 0);
    CHECK(d::load_le<std::uint64_t>(reinterpret_cast<const unsigned char*>(nonce2.data()) + 4) == i);
    CHECK(std::equal(f.begin() + 24, f.begin() + 40, rfc8439_tag(key, nonce1, header).begin()));
    bytes covered(header.begin(), header.end());
    covered.insert(covered.end(), f.begin() + 40, f.begin() + 40 + static_cast<std::ptrdiff_t>(n));
    CHECK(std::equal(f.end() - 16, f.end(), rfc8439_tag(key, nonce2, covered).begin()));
  }
  const auto o = receive_all(w);
  CHECK(o.error == transport_errc::ok);
  CHECK(o.closed);
  REQUIRE(o.delivered.size() == sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) CHECK(o.delivered[i] == payload(i, sizes[i]));
}

TEST_CASE("frame MAC: any flipped bit of a frame is refused before the frame is delivered") {
  const bytes w = wire();
  for (std::size_t at = frame_start(1); at < frame_start(2); ++at) {
    bytes bad = w;
    bad[at] ^= std::byte{0x10};
    const auto o = receive_all(bad);
    CAPTURE(at - frame_start(1));
    CHECK(o.error == transport_errc::integrity);
    CHECK(o.delivered.size() == 1);
  }
}

TEST_CASE("frame MAC: replayed, reordered, dropped and spliced frames are refused") {
  const bytes w = wire();
  auto splice = [&](std::vector<bytes> frames) {
    bytes out;
    for (auto& f : frames) out.insert(out.end(), f.begin(), f.end());
    return out;
  };
  const bytes f0 = frame_bytes(w, 0), f1 = frame_bytes(w, 1), f2 = frame_bytes(w, 2), f4 = frame_bytes(w, 4);

  auto o = receive_all(splice({f0, f1, f1}));  // replay
  CHECK(o.error == transport_errc::sequence);
  CHECK(o.delivered.size() == 2);
  CHECK(o.message.find("expected 2") != std::string::npos);

  o = receive_all(splice({f0, f2, f1}));  // reorder
  CHECK(o.error == transport_errc::sequence);
  CHECK(o.delivered.size() == 1);

  o = receive_all(splice({f0, f2}));  // drop
  CHECK(o.error == transport_errc::sequence);
  CHECK(o.delivered.size() == 1);

  // Frames 0, 2 and 4 have payloads of the same length: frame 2's header (sequence 2) with frame 4's payload and
  // tag, or with frame 0's header tag, is refused; the tags bind each part to its frame.
  bytes mixed = f2;
  std::copy(f4.begin() + 40, f4.end(), mixed.begin() + 40);
  o = receive_all(splice({f0, f1, mixed}));
  CHECK(o.error == transport_errc::integrity);
  CHECK(o.delivered.size() == 2);
  CHECK(o.message.find("payload fails authentication") != std::string::npos);

  bytes relabelled = f0;  // frame 0 claiming sequence 1: its header tag no longer verifies
  d::store_le<std::uint64_t>(reinterpret_cast<unsigned char*>(relabelled.data()) + 8, 1);
  o = receive_all(splice({f0, relabelled}));
  CHECK(o.error == transport_errc::integrity);
  CHECK(o.delivered.size() == 1);
}

TEST_CASE("frame MAC: frames under another key (reflected, or from another connection) are refused") {
  // Reflected: the bytes a side sent come back to it; its receive key is the other direction's.
  bytes sent;
  d::session_keys mine = keys(1, 101);
  d::framed_channel<memory_stream> tx(memory_stream{&sent}, std::move(mine), {});
  tx.send(payload(0, 40));
  bytes unused;
  d::framed_channel<memory_stream> self(memory_stream{&unused, sent}, keys(1, 101), {});
  bytes f;
  CHECK(error_of([&] { self.receive(f); }) == transport_errc::integrity);
  CHECK(f.empty());

  const auto o = receive_all(wire(7), 1);  // another connection's frame key
  CHECK(o.error == transport_errc::integrity);
  CHECK(o.delivered.empty());
}

TEST_CASE("frame MAC: a stream cut anywhere is refused, and only whole frames before the cut are delivered") {
  const bytes w = wire();
  for (std::size_t cut = 0; cut < w.size(); ++cut) {
    const auto o = receive_all(bytes(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(cut)));
    CAPTURE(cut);
    CHECK(o.error == transport_errc::truncated);
    std::size_t whole = 0;
    while (whole < sizes.size() && frame_start(whole + 1) <= cut) ++whole;
    CHECK(o.delivered.size() == whole);
  }
}

TEST_CASE("framed_channel: a reused buffer is resized to each frame, and emptied at the close") {
  bytes unused;
  d::framed_channel<memory_stream> rx(memory_stream{&unused, wire()}, keys(101, 1), {});
  bytes f(5000, std::byte{0x77});
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    REQUIRE(rx.receive(f));
    CHECK(f == payload(i, sizes[i]));
  }
  CHECK_FALSE(rx.receive(f));
  CHECK(f.empty());
}
