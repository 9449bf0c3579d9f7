// The built-in encoders, selected at compile time by type or at run time by wire id / CLI name.
#pragma once

#include <sparsesync/codec/bitmap.hpp>
#include <sparsesync/codec/delta_varint.hpp>
#include <sparsesync/codec/encoder_table.hpp>
#include <sparsesync/codec/entropy.hpp>
#include <sparsesync/codec/raw_index32.hpp>
#include <sparsesync/codec/rice.hpp>

#include <concepts>
#include <string_view>

SPARSESYNC_NS_BEGIN

// Per bucket, encode with each of Es and keep the smallest payload (ties go to the first listed).
// Its members are checked where it is used (check_encoder_selection below), so naming the type costs nothing.
template <class... Es>
struct best_of {
  static constexpr std::string_view name = "auto";
};

// The types behind encoder_table's rows, in the same order (checked below): the host decoders of the wire ids.
template <class... Es>
struct encoder_list {
  static constexpr std::size_t size = sizeof...(Es);
};
using builtin_encoders = encoder_list<raw_index32, bitmap, delta_varint, rice, entropy>;

namespace detail {
template <class... Es>
consteval bool matches_encoder_table(encoder_list<Es...>) {
  if (sizeof...(Es) != encoder_table.size()) return false;
  std::size_t i = 0;
  return ((Es::id == encoder_table[i].id && Es::name == encoder_table[i++].name) && ...);
}
template <class E, class... Es>
consteval bool is_listed(encoder_list<Es...>) {
  return (std::same_as<E, Es> || ...);
}
}  // namespace detail
static_assert(detail::matches_encoder_table(builtin_encoders{}),
              "sparsesync: builtin_encoders must list one type per encoder_table row, in the same order");

// Whether E is one of the built-in encoders (the wire format's encoder set is closed: encoder_table.hpp).
template <class E>
inline constexpr bool is_builtin_encoder_type = detail::is_listed<E>(builtin_encoders{});

namespace detail {
// An encoder that encode_patch and the sync engine may use: well-formed (the numbered requirements of
// codec/encoder.hpp, each its own error) and, where `builtin_only`, built in. Only a well-formed encoder is
// told it is not built in, so the first error is always the first thing to fix.
template <class E, bool builtin_only>
struct selected_encoder_diagnostics {
  static constexpr bool well_formed = check_encoder<E>;
  static_assert(!builtin_only || !well_formed || is_builtin_encoder_type<E>,
                "sparsesync: not a built-in encoder: payloads name their encoder by wire id; only encoders in "
                "encoder_table can be decoded (codec/encoder_table.hpp says how to add one)");
  static constexpr bool value = well_formed && (!builtin_only || is_builtin_encoder_type<E>);
};

template <class S, bool builtin_only>
struct encoder_selection_diagnostics : selected_encoder_diagnostics<S, builtin_only> {};

template <class... Es, bool builtin_only>
struct encoder_selection_diagnostics<best_of<Es...>, builtin_only> {
  static_assert(sizeof...(Es) > 0, "sparsesync: best_of needs at least one encoder");
  static constexpr bool value = sizeof...(Es) > 0 && (selected_encoder_diagnostics<Es, builtin_only>::value && ...);
};

// For the building blocks under encode_patch (patch_encoder, encode_bucket): well-formed is enough there, so
// that a test can wrap a built-in encoder (same wire id, same bytes) to watch what it is given.
template <class S>
inline constexpr bool check_encoder_selection_form = encoder_selection_diagnostics<S, false>::value;
}  // namespace detail

// An encoder selection (the `Sel` of encode_patch and sync::sender) is one built-in encoder or
// best_of<built-in encoders...>. In templates that take one: `static_assert(sparsesync::check_encoder_selection<Sel>)`
// names the first requirement a member misses, or that it is not built in.
template <class S>
inline constexpr bool check_encoder_selection = detail::encoder_selection_diagnostics<S, true>::value;

// The `auto` choice of the CLI: every built-in encoder, in the order that breaks ties (payloads depend on it).
// entropy takes a bucket only where encode_options::link states the link's speed and its bytes saved cross that
// link sooner than receivers walk the base to decode it (format/link_cost.hpp: on a GPU receiver its verified
// apply costs ~3x rice's, 30.7 vs 9.7 ms for 7e9 BF16 elements on an H100, for ~1.4x fewer bytes). With no link
// stated, `auto` neither encodes with it nor picks it: the payloads and encode cost of the four others alone.
using auto_encoder = best_of<rice, delta_varint, bitmap, raw_index32, entropy>;

// Calls f(E{}) for the built-in encoder with wire id `id`; returns false for an unknown id.
template <class F>
bool visit_encoder(encoder_id id, F&& f) {
  return [&]<class... Es>(encoder_list<Es...>) { return ((id == Es::id ? (f(Es{}), true) : false) || ...); }(builtin_encoders{});
}

// Calls f.template operator()<W>() with the word type of dtype t.
template <class F>
decltype(auto) visit_word(dtype t, F&& f) {
  switch (size_of(t)) {
    case 1: return f.template operator()<std::uint8_t>();
    case 2: return f.template operator()<std::uint16_t>();
    default: return f.template operator()<std::uint32_t>();
  }
}

SPARSESYNC_NS_END
