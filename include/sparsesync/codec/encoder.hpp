// The `encoder` concept: how the changes of one chunk become bytes and back.
#pragma once

#include <sparsesync/codec/value_mode.hpp>
#include <sparsesync/core/error.hpp>

#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

SPARSESYNC_NS_BEGIN

// Wire identifiers (FORMAT.md, "Encoders"); a payload names its encoder, so any build decodes any payload.
enum class encoder_id : std::uint8_t {
  raw_index32 = 1,
  bitmap = 2,
  delta_varint = 3,
  rice = 4,
  entropy = 5,
};

// The changes of one chunk, as an encoder sees them.
// Optional, with a chunk's base: an encoder or decoder that reads every base element anyway (entropy) may add
// their content checksum (element i at flat index `first` + i) to `sum` in the same pass and set `done`; the
// caller, which needs the base's checksum, then hashes only the chunks left undone.
struct chunk_base_hash {
  std::uint64_t first = 0, sum = 0;
  bool done = false;
};

template <element_word W>
struct chunk_changes {
  std::uint32_t numel = 0;                    // elements in the chunk (the last chunk may be short)
  value_mode mode = value_mode::absolute;
  std::span<const std::uint32_t> positions;   // strictly increasing, each < numel
  std::span<const W> values;                  // coded values (code_value), one per position, never a no-op
  std::span<const W> base;                    // the chunk's base elements; filled only if E::needs_base
  chunk_base_hash* hash_base = nullptr;       // optional, with a base
};

// What a decoder knows before it reads a chunk's data (all of it from validated headers).
template <element_word W>
struct chunk_context {
  std::uint32_t numel = 0;
  std::uint32_t changes = 0;
  value_mode mode = value_mode::absolute;
  std::span<const W> base;  // filled only if E::needs_base
  chunk_base_hash* hash_base = nullptr;  // optional, with a base (chunk_base_hash)
};

struct encoder_tag {};

// A type E is an `encoder` when:
//  1. it opts in with `using encoder_concept = sparsesync::encoder_tag;`
//  2. `E::id` is a `static constexpr sparsesync::encoder_id` naming its wire identifier;
//  3. `E::name` is a `static constexpr std::string_view` (the CLI name);
//  4. `E::needs_base` is a `static constexpr bool`: whether encode/decode read chunk_*::base;
//  5. `E::encode(const chunk_changes<W>&, std::vector<unsigned char>& out)` appends the chunk's data
//     for W = uint8_t, uint16_t and uint32_t, writing nothing when there are no changes;
//  6. `E::decode(std::span<const unsigned char> data, const chunk_context<W>&, std::vector<std::uint32_t>& positions,
//     std::vector<W>& values)` returns a `sparsesync::status` for the same W: it consumes exactly `data`, yields
//     `changes` strictly increasing positions below `numel`, and rejects any byte string encode would not produce.
// Being an encoder is not enough to travel: payloads name their encoder by wire id, so encode_patch and the sync
// engine take only the built-in encoders (codec/encoder_table.hpp, `check_encoder_selection` in registry.hpp).
namespace detail {
// One concept per numbered requirement, so that `encoder` and its diagnostics below cannot drift apart.
template <class E>
concept encoder_req1_opts_in = requires { requires std::same_as<typename E::encoder_concept, encoder_tag>; };
template <class E>
concept encoder_req2_id = requires { requires std::same_as<std::remove_cvref_t<decltype(E::id)>, encoder_id>; };
template <class E>
concept encoder_req3_name = requires { requires std::convertible_to<decltype(E::name), std::string_view>; };
template <class E>
concept encoder_req4_needs_base = requires { requires std::same_as<std::remove_cvref_t<decltype(E::needs_base)>, bool>; };
template <class E, class W>
concept encodes_word = requires(const chunk_changes<W>& in, std::vector<unsigned char>& out) { E::encode(in, out); };
template <class E, class W>
concept decodes_word = requires(std::span<const unsigned char> data, const chunk_context<W>& ctx, std::vector<std::uint32_t>& pos,
                                std::vector<W>& vals) {
  { E::decode(data, ctx, pos, vals) } -> std::same_as<status>;
};
template <class E>
concept encoder_req5_encode = encodes_word<E, std::uint8_t> && encodes_word<E, std::uint16_t> && encodes_word<E, std::uint32_t>;
template <class E>
concept encoder_req6_decode = decodes_word<E, std::uint8_t> && decodes_word<E, std::uint16_t> && decodes_word<E, std::uint32_t>;
}  // namespace detail

template <class E>
concept encoder = detail::encoder_req1_opts_in<E> && detail::encoder_req2_id<E> && detail::encoder_req3_name<E> &&
                  detail::encoder_req4_needs_base<E> && detail::encoder_req5_encode<E> && detail::encoder_req6_decode<E>;

namespace detail {
// Each failed requirement is its own error, in requirement order: the first one the compiler prints is the
// first requirement E misses.
template <class E>
struct encoder_diagnostics {
  static_assert(encoder_req1_opts_in<E>,
                "sparsesync: encoder requirement 1: an encoder opts in with `using encoder_concept = sparsesync::encoder_tag;`");
  static_assert(encoder_req2_id<E>,
                "sparsesync: encoder requirement 2: an encoder needs `static constexpr sparsesync::encoder_id id = ...;`");
  static_assert(encoder_req3_name<E>,
                "sparsesync: encoder requirement 3: an encoder needs `static constexpr std::string_view name = ...;`");
  static_assert(encoder_req4_needs_base<E>,
                "sparsesync: encoder requirement 4: an encoder needs `static constexpr bool needs_base = ...;` (whether "
                "encode/decode read chunk_changes::base and chunk_context::base)");
  static_assert(encoder_req5_encode<E>,
                "sparsesync: encoder requirement 5: an encoder needs `template <sparsesync::element_word W> static void "
                "encode(const sparsesync::chunk_changes<W>&, std::vector<unsigned char>& out);` for 8-, 16- and 32-bit W");
  static_assert(encoder_req6_decode<E>,
                "sparsesync: encoder requirement 6: an encoder needs `template <sparsesync::element_word W> static "
                "sparsesync::status decode(std::span<const unsigned char>, const sparsesync::chunk_context<W>&, "
                "std::vector<std::uint32_t>& positions, std::vector<W>& values);` for 8-, 16- and 32-bit W");
  static constexpr bool value = encoder<E>;
};
}  // namespace detail

// Use in templates that take an encoder: `static_assert(sparsesync::check_encoder<E>)` explains what is missing.
template <class E>
inline constexpr bool check_encoder = detail::encoder_diagnostics<E>::value;

SPARSESYNC_NS_END
