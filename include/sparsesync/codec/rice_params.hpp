// The constants of the `rice` encoder's wire layout (docs/FORMAT.md, "rice"), shared by the host codec
// (codec/rice.hpp, the specification) and its device twin (cuda/detail/chunk_codec.cuh).
#pragma once

#include <sparsesync/core/config.hpp>

#include <cstdint>

SPARSESYNC_NS_BEGIN
namespace rice_params {

inline constexpr unsigned escape = 16;        // a quotient this large is sent as an escape plus raw bits
inline constexpr unsigned gap_raw_bits = 32;  // width of an escaped position gap
inline constexpr unsigned max_gap_k = 24;     // largest position-gap parameter a payload may name

// Bits to Rice-code v with parameter k, escape included (raw_bits: width of the raw field after an escape).
// U: the host codec counts in 64 bits, the device codec in 32 (its values are 32-bit; fewer registers).
template <class U>
SPARSESYNC_HD constexpr U code_bits(U v, unsigned k, unsigned raw_bits) {
  const U q = v >> k;
  return q < escape ? q + 1 + k : escape + raw_bits;
}

// Bytes of rice's chunk data with a body of `body_bits` bits: its two parameter bytes, then the body padded to whole
// bytes (rice::plan, its floor rice::bytes_at_least, and the device twins' sizes).
SPARSESYNC_HD constexpr std::uint64_t data_bytes(std::uint64_t body_bits) { return 2 + (body_bits + 7) / 8; }

}  // namespace rice_params
SPARSESYNC_NS_END
