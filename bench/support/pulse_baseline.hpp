// The PULSE-style baseline payload, rebuilt for comparison (anchors.md): zstd level 1 over a JSON header and,
// per tensor, the row and column index deltas of its changes in the narrowest of uint8/uint16/int32, plus
// the raw BF16 new values.
#pragma once

#include <sparsesync/core/layout.hpp>

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace sparsesync::bench {

namespace detail {
inline void put_narrow(std::vector<unsigned char>& out, const std::vector<std::uint32_t>& v) {
  const std::uint32_t mx = v.empty() ? 0 : *std::max_element(v.begin(), v.end());
  const unsigned w = mx < 256 ? 1 : mx < 65536 ? 2 : 4;
  for (auto x : v)
    for (unsigned i = 0; i < w; ++i) out.push_back(static_cast<unsigned char>(x >> (8 * i)));
}
}  // namespace detail

// `changes` are (flat position, new bits) in increasing position order over a BF16 layout.
inline std::size_t pulse_style_bytes(const model_layout& layout, const std::vector<std::pair<std::uint32_t, std::uint16_t>>& changes) {
  std::string header = "{\"tensors\":[";
  std::vector<unsigned char> body;
  std::size_t c = 0;
  for (std::size_t t = 0; t < layout.size(); ++t) {
    const std::uint64_t first = layout.first_element(t), end = layout.first_element(t + 1);
    const std::uint64_t cols = layout[t].shape.empty() ? 1 : layout[t].shape.back();
    std::vector<std::uint32_t> row_delta, col;
    std::vector<std::uint16_t> values;
    std::uint64_t prev_row = 0;
    for (; c < changes.size() && changes[c].first < end; ++c) {
      const std::uint64_t off = changes[c].first - first;
      const std::uint64_t row = off / cols;
      row_delta.push_back(static_cast<std::uint32_t>(row - prev_row));
      col.push_back(static_cast<std::uint32_t>(off % cols));
      prev_row = row;
      values.push_back(changes[c].second);
    }
    if (values.empty()) continue;
    header += "{\"name\":\"" + layout[t].name + "\",\"n\":" + std::to_string(values.size()) + "},";
    detail::put_narrow(body, row_delta);
    detail::put_narrow(body, col);
    const std::size_t at = body.size();
    body.resize(at + 2 * values.size());
    std::memcpy(body.data() + at, values.data(), 2 * values.size());
  }
  header += "]}";
  std::vector<unsigned char> all(header.begin(), header.end());
  all.insert(all.end(), body.begin(), body.end());
  std::vector<unsigned char> out(ZSTD_compressBound(all.size()));
  const std::size_t n = ZSTD_compress(out.data(), out.size(), all.data(), all.size(), 1);
  return ZSTD_isError(n) ? all.size() : n;
}

}  // namespace sparsesync::bench
