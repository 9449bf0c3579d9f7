// Reader of the real RL update stream in ../shared/data/<name>/ (format in its README): the base BF16 model
// and, per step, the flat positions and new bit patterns of the elements that changed.
#pragma once

#include <sparsesync/core/error.hpp>
#include <sparsesync/core/layout.hpp>
#include <sparsesync/core/little_endian.hpp>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

namespace sparsesync::bench {

struct update_stream {
  model_layout layout;
  std::vector<std::uint16_t> base;  // the flat model, tensors concatenated in layout order
  std::vector<std::vector<std::pair<std::uint32_t, std::uint16_t>>> steps;

  // Applies step s (0-based) to a flat model.
  void apply(std::size_t s, std::vector<std::uint16_t>& flat) const {
    for (auto [pos, bits] : steps[s]) flat[pos] = bits;
  }
  // Views of a flat model, one per tensor.
  std::vector<const_tensor_view> views(const std::vector<std::uint16_t>& flat) const {
    std::vector<const_tensor_view> v;
    for (std::size_t t = 0; t < layout.size(); ++t) v.push_back({flat.data() + layout.first_element(t), layout[t].numel(), dtype::bf16});
    return v;
  }
  std::vector<tensor_view> mutable_views(std::vector<std::uint16_t>& flat) const {
    std::vector<tensor_view> v;
    for (std::size_t t = 0; t < layout.size(); ++t) v.push_back({flat.data() + layout.first_element(t), layout[t].numel(), dtype::bf16});
    return v;
  }
};

inline std::vector<unsigned char> read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw error(errc::io, "cannot open " + p.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline update_stream load_update_stream(const std::filesystem::path& dir) {
  update_stream s;
  const auto manifest = nlohmann::json::parse(read_all(dir / "manifest.json"));
  std::vector<tensor_info> tensors;
  for (const auto& t : manifest.at("tensors")) {
    if (t.at("dtype") != "bf16") throw error(errc::malformed, "update stream: only bf16 tensors are supported");
    tensors.push_back({t.at("name").get<std::string>(), dtype::bf16, t.at("shape").get<std::vector<std::uint64_t>>()});
  }
  s.layout = model_layout(std::move(tensors));
  const auto flat = read_all(dir / "base.bf16");
  if (flat.size() != s.layout.numel() * 2) throw error(errc::malformed, "update stream: base.bf16 does not match the manifest");
  s.base.resize(s.layout.numel());
  std::memcpy(s.base.data(), flat.data(), flat.size());
  const auto patches = read_all(dir / "patches.bin");
  std::size_t p = 0;
  while (p + 4 <= patches.size()) {
    const auto count = sparsesync::detail::load_le<std::uint32_t>(patches.data() + p);
    p += 4;
    if (patches.size() - p < 6ull * count) throw error(errc::truncated, "update stream: patches.bin");
    std::vector<std::pair<std::uint32_t, std::uint16_t>> step(count);
    for (std::uint32_t i = 0; i < count; ++i) {
      step[i].first = sparsesync::detail::load_le<std::uint32_t>(patches.data() + p + 4ull * i);
      step[i].second = sparsesync::detail::load_le<std::uint16_t>(patches.data() + p + 4ull * count + 2ull * i);
      if (step[i].first >= s.base.size()) throw error(errc::index_out_of_range, "update stream: position past the model");
    }
    p += 6ull * count;
    s.steps.push_back(std::move(step));
  }
  return s;
}

}  // namespace sparsesync::bench
