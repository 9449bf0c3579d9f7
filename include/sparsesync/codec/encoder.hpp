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
};

// The changes of one chunk, as an encoder sees them.
template <element_word W>
struct chunk_changes {
  std::uint32_t numel = 0;                    // elements in the chunk (the last chunk may be short)
  value_mode mode = value_mode::absolute;
  std::span<const std::uint32_t> positions;   // strictly increasing, each < numel
  std::span<const W> values;                  // coded values (code_value), one per position, never a no-op
  std::span<const W> base;                    // the chunk's base elements; filled only if E::needs_base
};

// What a decoder knows before it reads a chunk's data (all of it from validated headers).
template <element_word W>
struct chunk_context {
  std::uint32_t numel = 0;
  std::uint32_t changes = 0;
  value_mode mode = value_mode::absolute;
  std::span<const W> base;  // filled only if E::needs_base
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
//     std::vector<W>& values)` returns a `sparsesync::status`: it consumes exactly `data`, yields `changes`
//     strictly increasing positions below `numel`, and rejects any byte string encode would not produce.
template <class E>
concept encoder =
    std::same_as<typename E::encoder_concept, encoder_tag> &&
    std::same_as<std::remove_cvref_t<decltype(E::id)>, encoder_id> &&
    std::convertible_to<decltype(E::name), std::string_view> &&
    std::same_as<std::remove_cvref_t<decltype(E::needs_base)>, bool> &&
    requires(const chunk_changes<std::uint16_t>& in, std::vector<unsigned char>& out, std::span<const unsigned char> data,
             const chunk_context<std::uint16_t>& ctx, std::vector<std::uint32_t>& pos, std::vector<std::uint16_t>& vals) {
      E::encode(in, out);
      { E::decode(data, ctx, pos, vals) } -> std::same_as<status>;
    };

namespace detail {
template <class E>
struct encoder_diagnostics {
  static_assert(requires { typename E::encoder_concept; },
                "sparsesync: an encoder must opt in with `using encoder_concept = sparsesync::encoder_tag;`");
  static_assert(requires { E::id; }, "sparsesync: an encoder needs `static constexpr sparsesync::encoder_id id = ...;`");
  static_assert(requires { E::name; }, "sparsesync: an encoder needs `static constexpr std::string_view name = ...;`");
  static_assert(requires { E::needs_base; }, "sparsesync: an encoder needs `static constexpr bool needs_base = ...;`");
  static_assert(encoder<E>,
                "sparsesync: the type is not an encoder: it needs `template <element_word W> static void encode(const "
                "chunk_changes<W>&, std::vector<unsigned char>&)` and `template <element_word W> static status "
                "decode(std::span<const unsigned char>, const chunk_context<W>&, std::vector<std::uint32_t>&, "
                "std::vector<W>&)`");
  static constexpr bool value = true;
};
}  // namespace detail

// Use in templates that take an encoder: `static_assert(sparsesync::check_encoder<E>)` explains what is missing.
template <class E>
inline constexpr bool check_encoder = detail::encoder_diagnostics<E>::value;

SPARSESYNC_NS_END
