// Fixed-width little-endian loads and stores: the wire format never depends on host byte order.
#pragma once

#include <sparsesync/core/config.hpp>

#include <cstddef>
#include <cstdint>

SPARSESYNC_NS_BEGIN
namespace detail {

template <class T>
SPARSESYNC_HD T load_le(const unsigned char* p) {
  T v = 0;
  for (unsigned i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
  return v;
}

template <class T>
SPARSESYNC_HD void store_le(unsigned char* p, T v) {
  for (unsigned i = 0; i < sizeof(T); ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace detail
SPARSESYNC_NS_END
