// The built-in encoders, selected at compile time by type or at run time by wire id / CLI name.
#pragma once

#include <sparsesync/codec/bitmap.hpp>
#include <sparsesync/codec/delta_varint.hpp>
#include <sparsesync/codec/raw_index32.hpp>
#include <sparsesync/codec/rice.hpp>

#include <optional>
#include <string_view>

SPARSESYNC_NS_BEGIN

// Per bucket, encode with each of Es and keep the smallest payload (ties go to the first listed).
template <class... Es>
struct best_of {
  static_assert((check_encoder<Es> && ...));
  static_assert(sizeof...(Es) > 0, "sparsesync: best_of needs at least one encoder");
  static constexpr std::string_view name = "auto";
};

// The `auto` choice of the CLI: every built-in encoder.
using auto_encoder = best_of<rice, delta_varint, bitmap, raw_index32>;

// Calls f(E{}) for the built-in encoder with wire id `id`; returns false for an unknown id.
template <class F>
bool visit_encoder(encoder_id id, F&& f) {
  switch (id) {
    case encoder_id::raw_index32: f(raw_index32{}); return true;
    case encoder_id::bitmap: f(bitmap{}); return true;
    case encoder_id::delta_varint: f(delta_varint{}); return true;
    case encoder_id::rice: f(rice{}); return true;
  }
  return false;
}

constexpr std::string_view encoder_name(encoder_id id) {
  switch (id) {
    case encoder_id::raw_index32: return raw_index32::name;
    case encoder_id::bitmap: return bitmap::name;
    case encoder_id::delta_varint: return delta_varint::name;
    case encoder_id::rice: return rice::name;
  }
  return "unknown";
}

constexpr std::optional<encoder_id> parse_encoder_name(std::string_view s) {
  if (s == raw_index32::name || s == "raw_index32") return encoder_id::raw_index32;
  if (s == bitmap::name) return encoder_id::bitmap;
  if (s == delta_varint::name || s == "delta_varint") return encoder_id::delta_varint;
  if (s == rice::name) return encoder_id::rice;
  return std::nullopt;
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
