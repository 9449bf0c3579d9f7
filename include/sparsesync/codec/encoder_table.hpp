// The built-in encoders, one row each: the only list of them. The wire check (format/wire.hpp), the run-time
// dispatchers (codec/registry.hpp on the host, cuda/detail/chunk_codec.cuh on the GPU), `auto` and the CLI all
// read this table. Adding an encoder: an id in `encoder_id`, a row here, its host codec (codec/NAME.hpp, the
// specification), its type in `builtin_encoders` (registry.hpp; a static_assert there checks the two lists
// agree), its device twin, and its section in docs/FORMAT.md.
//
// The set is closed: a payload names its encoder by wire id, so only encoders every build knows can travel.
// encode_patch and the sync engine refuse (at compile time) an encoder that is not in this table.
#pragma once

#include <sparsesync/codec/encoder.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

SPARSESYNC_NS_BEGIN

struct encoder_row {
  encoder_id id;
  std::string_view name;   // the CLI's and the reports' name
  std::string_view alias;  // also accepted by parse_encoder_name ("" when none)
  bool gpu;                // the CUDA codec has its device twin (cuda/detail/chunk_codec.cuh); GPU encode refuses an
                           // encoder without one, and GPU apply refuses its frames (errc::unsupported)
};

// Rows in wire-id order; ids are dense from 1 (checked below), so a range check validates a wire byte.
inline constexpr std::array<encoder_row, 5> encoder_table{{
    {encoder_id::raw_index32, "raw", "raw_index32", true},
    {encoder_id::bitmap, "bitmap", "", true},
    {encoder_id::delta_varint, "varint", "delta_varint", true},
    {encoder_id::rice, "rice", "", true},
    {encoder_id::entropy, "entropy", "", true},
}};

// The largest wire id in use: a wire byte b names a built-in encoder iff 1 <= b <= max_encoder_id. A plain
// constant, so device code (which cannot read host arrays) validates wire bytes with it too.
inline constexpr std::uint8_t max_encoder_id = static_cast<std::uint8_t>(encoder_table.size());

// The rows with a device twin come first: GPU code accepts wire ids 1..max_gpu_encoder_id.
inline constexpr std::uint8_t max_gpu_encoder_id = [] {
  std::uint8_t n = 0;
  while (n < encoder_table.size() && encoder_table[n].gpu) ++n;
  return n;
}();

namespace detail {
consteval bool encoder_table_gpu_rows_first() {
  for (std::size_t i = max_gpu_encoder_id; i < encoder_table.size(); ++i)
    if (encoder_table[i].gpu) return false;
  return true;
}
static_assert(encoder_table_gpu_rows_first(), "sparsesync: encoder_table rows with a device twin (gpu = true) must come first");

consteval bool encoder_table_is_dense() {
  for (std::size_t i = 0; i < encoder_table.size(); ++i)
    if (static_cast<std::size_t>(encoder_table[i].id) != i + 1 || encoder_table[i].name.empty()) return false;
  return true;
}
static_assert(encoder_table_is_dense(), "sparsesync: encoder_table rows must be in wire-id order 1, 2, ... with names");
}  // namespace detail

constexpr bool is_builtin_encoder(std::uint8_t wire_id) { return wire_id >= 1 && wire_id <= max_encoder_id; }

constexpr const encoder_row& encoder_table_row(encoder_id id) { return encoder_table[static_cast<std::size_t>(id) - 1]; }

// The name of a wire id ("unknown" for an id outside the table).
constexpr std::string_view encoder_name(encoder_id id) {
  return is_builtin_encoder(static_cast<std::uint8_t>(id)) ? encoder_table_row(id).name : std::string_view{"unknown"};
}

// The encoder a CLI name or alias names; "auto" is not an encoder (it is best_of every row, registry.hpp).
constexpr std::optional<encoder_id> parse_encoder_name(std::string_view s) {
  for (const auto& r : encoder_table)
    if (s == r.name || (!r.alias.empty() && s == r.alias)) return r.id;
  return std::nullopt;
}

// "raw, bitmap, varint, rice, entropy": for help texts and error messages.
inline std::string encoder_names_list() {
  std::string s;
  for (const auto& r : encoder_table) {
    if (!s.empty()) s += ", ";
    s += r.name;
  }
  return s;
}

SPARSESYNC_NS_END
