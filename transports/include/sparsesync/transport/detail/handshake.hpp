// The connection handshake of the stream transports: version and mode agreement, then (unless both sides run
// with insecure_no_auth) mutual proof of a pre-shared key and derivation of per-direction frame keys.
// Messages and byte layouts: docs/TRANSPORTS.md, "Authentication protocol".
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/transport/detail/byte_stream.hpp>
#include <sparsesync/transport/detail/crypto.hpp>
#include <sparsesync/transport/error.hpp>
#include <sparsesync/transport/key.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

SPARSESYNC_NS_BEGIN
namespace detail {

// 2: frame tags are ChaCha20-Poly1305 (16 bytes each). 1: HMAC-SHA256, with a 32-byte payload tag.
// The frame layouts differ, so a peer of another version is refused (both sides say why), never guessed at.
inline constexpr std::uint16_t protocol_version = 2;

enum class auth_mode : std::uint16_t { none = 0, psk = 1 };
enum class role { client, server };

// Frame keys of one connection, one per direction, so a frame reflected back to its sender never verifies.
struct session_keys {
  secret send;
  secret receive;
};

inline constexpr std::size_t hello_size = 48;   // magic 8, version 2, mode 2, reserved 4, nonce 32
inline constexpr std::size_t finish_size = 48;  // magic 8, verdict 1, reserved 7, mac 32
inline constexpr std::size_t server_hello_size = hello_size + 32;  // + server proof

inline constexpr std::string_view client_hello_magic = "SSYNCCH1";
inline constexpr std::string_view server_hello_magic = "SSYNCSH1";
inline constexpr std::string_view client_finish_magic = "SSYNCCF1";
inline constexpr std::string_view server_finish_magic = "SSYNCSF1";

// Labels make each MAC usable for one purpose only: a server proof can never pass as a client proof. The proofs
// kept their v1 labels (the version field of the hellos they cover tells the versions apart); the frame keys
// changed with the frame MAC, so that no key is ever used by both algorithms.
inline constexpr std::string_view server_proof_label = "sparsesync/v1 server proof";
inline constexpr std::string_view client_proof_label = "sparsesync/v1 client proof";
inline constexpr std::string_view server_confirm_label = "sparsesync/v1 server confirm";
inline constexpr std::string_view c2s_key_label = "sparsesync/v2 frame key client->server (ChaCha20-Poly1305)";
inline constexpr std::string_view s2c_key_label = "sparsesync/v2 frame key server->client (ChaCha20-Poly1305)";

enum class verdict : std::uint8_t { accept = 0, reject = 1 };

inline std::string_view mode_name(auth_mode m) {
  return m == auth_mode::none ? "no pre-shared key (insecure_no_auth, or TLS alone)" : "a pre-shared key";
}

template <std::size_t N>
std::array<std::byte, N> make_hello(std::string_view magic, auth_mode mode, std::span<const std::byte, 32> nonce) {
  std::array<std::byte, N> m{};
  std::memcpy(m.data(), magic.data(), 8);
  auto* p = reinterpret_cast<unsigned char*>(m.data());
  store_le<std::uint16_t>(p + 8, protocol_version);
  store_le<std::uint16_t>(p + 10, static_cast<std::uint16_t>(mode));
  std::memcpy(m.data() + 16, nonce.data(), 32);
  return m;
}

struct parsed_hello {
  std::uint16_t version = 0;
  auth_mode mode = auth_mode::none;
  std::span<const std::byte, 32> nonce;
};

inline parsed_hello parse_hello(std::span<const std::byte> m, std::string_view magic, const std::string& where) {
  if (std::memcmp(m.data(), magic.data(), 8) != 0)
    throw transport_error(transport_errc::protocol, where + ": the peer's first message is not a sparsesync " +
                                                        std::string(magic == client_hello_magic ? "client" : "server") +
                                                        " hello (wrong port, or not a sparsesync peer)");
  const auto* p = reinterpret_cast<const unsigned char*>(m.data());
  parsed_hello h{load_le<std::uint16_t>(p + 8), static_cast<auth_mode>(load_le<std::uint16_t>(p + 10)),
                 std::span<const std::byte, 32>(m.data() + 16, 32)};
  return h;
}

inline std::array<std::byte, finish_size> make_finish(std::string_view magic, verdict v, const bytes32& mac) {
  std::array<std::byte, finish_size> m{};
  std::memcpy(m.data(), magic.data(), 8);
  m[8] = static_cast<std::byte>(v);
  if (v == verdict::accept) std::memcpy(m.data() + 16, mac.data(), 32);
  return m;
}

inline void check_finish_magic(std::span<const std::byte> m, std::string_view magic, const std::string& where) {
  if (std::memcmp(m.data(), magic.data(), 8) != 0)
    throw transport_error(transport_errc::protocol, where + ": malformed handshake message (expected " + std::string(magic) + ")");
}

template <byte_stream S>
void write_message(S& s, std::span<const std::byte> m, deadline d) {
  const std::span<const std::byte> pieces[] = {m};
  s.write(pieces, d);
}

template <byte_stream S>
void read_message(S& s, std::span<std::byte> m, deadline d, std::string_view what) {
  if (s.read(m, d) != m.size())
    throw transport_error(transport_errc::connection_closed,
                          s.describe() + ": the peer closed the connection during the handshake (waiting for its " +
                              std::string(what) + "; it probably refused this side)");
}

// Both sides check that they speak the same version and mode; each sends its hello before checking, so
// a mismatch is reported on both sides instead of one of them seeing only a dropped connection.
inline void check_agreement(const parsed_hello& peer, auth_mode own, const std::string& where) {
  if (peer.version != protocol_version)
    throw transport_error(transport_errc::protocol,
                          where + ": the peer speaks transport protocol version " + std::to_string(peer.version) +
                              ", this side " + std::to_string(protocol_version) +
                              (peer.version < protocol_version ? " (the peer's sparsesync is older" : " (this side's sparsesync is older") +
                              "; version 1 tagged frames with HMAC-SHA256, version 2 with ChaCha20-Poly1305): run "
                              "the same sparsesync release on both sides");
  if (peer.mode != own)
    throw transport_error(transport_errc::auth_mode_mismatch,
                          where + ": this side uses " + std::string(mode_name(own)) + " but the peer uses " +
                              std::string(mode_name(peer.mode)) + "; give both sides the same key, or neither");
}

inline bytes32 mac_of(std::span<const std::byte> key, std::string_view label, std::span<const std::byte> binding,
                      std::initializer_list<std::span<const std::byte>> parts) {
  hmac_sha256 h(key);
  h.update(label).update(binding);
  for (auto p : parts) h.update(p);
  return h.digest();
}

inline session_keys derive_session_keys(const pre_shared_key& key, std::span<const std::byte, 32> client_nonce,
                                        std::span<const std::byte, 32> server_nonce, role r) {
  std::array<std::byte, 64> salt{};
  std::memcpy(salt.data(), client_nonce.data(), 32);
  std::memcpy(salt.data() + 32, server_nonce.data(), 32);
  secret c2s = hkdf_sha256(key.bytes(), salt, c2s_key_label);
  secret s2c = hkdf_sha256(key.bytes(), salt, s2c_key_label);
  if (r == role::client) return {std::move(c2s), std::move(s2c)};
  return {std::move(s2c), std::move(c2s)};
}

// Runs the handshake on a fresh connection. `key` null means insecure_no_auth. `binding` is 32 bytes
// exported from the TLS session under the connection, or empty without TLS: mixing it into every proof
// makes a proof made inside one TLS session useless inside another (a relaying man in the middle fails).
// Returns the frame keys, or nothing when both sides run without authentication.
template <byte_stream S>
std::optional<session_keys> handshake(S& s, role r, const pre_shared_key* key, std::span<const std::byte> binding,
                                      deadline d) {
  const std::string where = s.describe();
  const auth_mode mode = key ? auth_mode::psk : auth_mode::none;
  std::array<std::byte, 32> zero_binding{};
  if (binding.empty()) binding = zero_binding;
  const std::string key_hint = key ? " (this side's key id is " + key->id() + ")" : std::string();

  std::array<std::byte, 32> own_nonce{};
  random_bytes(own_nonce);

  if (r == role::client) {
    const auto hello = make_hello<hello_size>(client_hello_magic, mode, own_nonce);
    write_message(s, hello, d);
    std::array<std::byte, server_hello_size> sh{};
    read_message(s, sh, d, "hello");
    const auto peer = parse_hello(sh, server_hello_magic, where);
    check_agreement(peer, mode, where);
    if (!key) return std::nullopt;

    const auto expected = mac_of(key->bytes(), server_proof_label, binding, {hello, std::span(sh).first(hello_size)});
    const bool server_ok = equal_constant_time(expected, std::span(sh).subspan(hello_size, 32));
    const auto client_proof = mac_of(key->bytes(), client_proof_label, binding, {hello, sh});
    const auto cf = make_finish(client_finish_magic, server_ok ? verdict::accept : verdict::reject, client_proof);
    write_message(s, cf, d);
    if (!server_ok) {
      // Wait (bounded) for the server's answer to our verdict before closing: a transport that drops unread
      // data when its peer closes (UCX) would otherwise end the server's handshake as "connection closed"
      // instead of telling it why. Whatever comes back, or doesn't, the verdict here is already final.
      try {
        std::array<std::byte, finish_size> sf{};
        read_message(s, sf, d, "answer to this side's verdict");
      } catch (const transport_error&) {
      }
      throw transport_error(transport_errc::auth_failed,
                            where + ": the server did not prove knowledge of the pre-shared key: the two sides use "
                                    "different keys" + key_hint);
    }

    std::array<std::byte, finish_size> sf{};
    read_message(s, sf, d, "verdict on this side's key");
    check_finish_magic(sf, server_finish_magic, where);
    if (static_cast<verdict>(sf[8]) != verdict::accept)
      throw transport_error(transport_errc::auth_failed,
                            where + ": the server rejected this client's pre-shared key proof" + key_hint);
    const auto confirm = mac_of(key->bytes(), server_confirm_label, binding, {hello, sh, cf});
    if (!equal_constant_time(confirm, std::span(sf).subspan(16, 32)))
      throw transport_error(transport_errc::auth_failed, where + ": the server's confirmation does not verify");
    return derive_session_keys(*key, own_nonce, peer.nonce, r);
  }

  std::array<std::byte, hello_size> ch{};
  read_message(s, ch, d, "hello");
  const auto peer = parse_hello(ch, client_hello_magic, where);
  // Answer even on a mismatch, so the client learns why; then refuse.
  auto sh = make_hello<server_hello_size>(server_hello_magic, mode, own_nonce);
  const bool agree = peer.version == protocol_version && peer.mode == mode;
  if (key && agree) {
    const auto proof = mac_of(key->bytes(), server_proof_label, binding, {ch, std::span(sh).first(hello_size)});
    std::memcpy(sh.data() + hello_size, proof.data(), 32);
  }
  write_message(s, sh, d);
  check_agreement(peer, mode, where);
  if (!key) return std::nullopt;

  std::array<std::byte, finish_size> cf{};
  read_message(s, cf, d, "proof of the pre-shared key");
  check_finish_magic(cf, client_finish_magic, where);
  if (static_cast<verdict>(cf[8]) != verdict::accept) {
    // Answer (reject, no confirmation) so that the client knows its verdict arrived; see the client side.
    const bytes32 none{};
    write_message(s, make_finish(server_finish_magic, verdict::reject, none), d);
    throw transport_error(transport_errc::auth_failed,
                          where + ": the client rejected this server's proof: the two sides use different pre-shared keys" + key_hint);
  }
  const auto expected = mac_of(key->bytes(), client_proof_label, binding, {ch, sh});
  const bool client_ok = equal_constant_time(expected, std::span(cf).subspan(16, 32));
  const auto confirm = mac_of(key->bytes(), server_confirm_label, binding, {ch, sh, cf});
  write_message(s, make_finish(server_finish_magic, client_ok ? verdict::accept : verdict::reject, confirm), d);
  if (!client_ok)
    throw transport_error(transport_errc::auth_failed,
                          where + ": the client did not prove knowledge of the pre-shared key: the two sides use "
                                  "different keys" + key_hint);
  return derive_session_keys(*key, peer.nonce, own_nonce, r);
}

}  // namespace detail
SPARSESYNC_NS_END
