// How two versions of a model differ: the share of changed elements and the distribution of their
// distances in ULPs (order-key steps), the two quantities that decide what a sparse patch costs.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/dtype.hpp>
#include <sparsesync/core/error.hpp>
#include <sparsesync/core/layout.hpp>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <type_traits>

SPARSESYNC_NS_BEGIN
namespace gen {

struct change_stats {
  std::uint64_t elements = 0;
  std::uint64_t changed = 0;
  std::map<std::int64_t, std::uint64_t> ulp_histogram;  // signed order-key distance of each change -> count

  [[nodiscard]] double density() const { return elements ? static_cast<double>(changed) / static_cast<double>(elements) : 0.0; }

  // Share of changes that moved by at most `ulps` (in either direction).
  [[nodiscard]] double share_within(std::uint64_t ulps) const {
    std::uint64_t n = 0;
    for (const auto& [d, c] : ulp_histogram)
      if (static_cast<std::uint64_t>(std::llabs(d)) <= ulps) n += c;
    return changed ? static_cast<double>(n) / static_cast<double>(changed) : 0.0;
  }

  change_stats& operator+=(const change_stats& o) {
    elements += o.elements;
    changed += o.changed;
    for (const auto& [d, c] : o.ulp_histogram) ulp_histogram[d] += c;
    return *this;
  }
};

namespace detail {

template <element_word W>
void accumulate_changes(const W* a, const W* b, std::uint64_t n, change_stats& s) {
  using S = std::make_signed_t<W>;
  s.elements += n;
  for (std::uint64_t i = 0; i < n; ++i) {
    if (a[i] == b[i]) continue;
    ++s.changed;
    ++s.ulp_histogram[static_cast<S>(ulp_delta(a[i], b[i]))];
  }
}

}  // namespace detail

inline change_stats compare(const_tensor_view before, const_tensor_view after) {
  if (before.dtype != after.dtype || before.numel != after.numel)
    throw error(errc::invalid_argument, "compare: tensors differ in dtype or size");
  change_stats s;
  switch (size_of(before.dtype)) {
    case 1: detail::accumulate_changes(static_cast<const std::uint8_t*>(before.data), static_cast<const std::uint8_t*>(after.data), before.numel, s); break;
    case 2: detail::accumulate_changes(static_cast<const std::uint16_t*>(before.data), static_cast<const std::uint16_t*>(after.data), before.numel, s); break;
    case 4: detail::accumulate_changes(static_cast<const std::uint32_t*>(before.data), static_cast<const std::uint32_t*>(after.data), before.numel, s); break;
    default: throw error(errc::invalid_argument, "compare: unsupported dtype");
  }
  return s;
}

// Whole-model comparison: both sides must list the same tensors in the same order.
inline change_stats compare(std::span<const const_tensor_view> before, std::span<const const_tensor_view> after) {
  if (before.size() != after.size())
    throw error(errc::invalid_argument, "compare: " + std::to_string(before.size()) + " vs " + std::to_string(after.size()) + " tensors");
  change_stats s;
  for (std::size_t i = 0; i < before.size(); ++i) s += compare(before[i], after[i]);
  return s;
}

}  // namespace gen
SPARSESYNC_NS_END
