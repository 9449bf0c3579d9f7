// The constants of the `rice` encoder's wire layout (docs/FORMAT.md, "rice"), shared by the host codec
// (codec/rice.hpp, the specification) and its device twin (cuda/detail/chunk_codec.cuh).
#pragma once

#include <sparsesync/core/config.hpp>

SPARSESYNC_NS_BEGIN
namespace rice_params {

inline constexpr unsigned escape = 16;        // a quotient this large is sent as an escape plus raw bits
inline constexpr unsigned gap_raw_bits = 32;  // width of an escaped position gap
inline constexpr unsigned max_gap_k = 24;     // largest position-gap parameter a payload may name

}  // namespace rice_params
SPARSESYNC_NS_END
