// The built-in encoders, selected at compile time by type or at run time by wire id / CLI name.
#pragma once

#include <sparsesync/codec/bitmap.hpp>
#include <sparsesync/codec/delta_varint.hpp>
#include <sparsesync/codec/encoder_table.hpp>
#include <sparsesync/codec/raw_index32.hpp>
#include <sparsesync/codec/rice.hpp>

#include <concepts>
#include <string_view>

SPARSESYNC_NS_BEGIN

// Per bucket, encode with each of Es and keep the smallest payload (ties go to the first listed).
template <class... Es>
struct best_of {
  static_assert((check_encoder<Es> && ...));
  static_assert(sizeof...(Es) > 0, "sparsesync: best_of needs at least one encoder");
  static constexpr std::string_view name = "auto";
};

// The types behind encoder_table's rows, in the same order (checked below): the host decoders of the wire ids.
template <class... Es>
struct encoder_list {
  static constexpr std::size_t size = sizeof...(Es);
};
using builtin_encoders = encoder_list<raw_index32, bitmap, delta_varint, rice>;

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

// The `auto` choice of the CLI: every built-in encoder, in the order that breaks ties (payloads depend on it).
using auto_encoder = best_of<rice, delta_varint, bitmap, raw_index32>;

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
