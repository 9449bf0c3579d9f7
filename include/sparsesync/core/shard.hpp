// Shards of a model layout: what one trainer rank of N holds and sends (FSDP / ZeRO-3 flat shards, whole tensors
// per pipeline stage, row slices of tensor-parallel weights). A shard is a list of pieces (a contiguous element
// range of one tensor); its sub-layout, one 1-D tensor per piece named "NAME[BEGIN:END]", is what the rank's
// sender publishes and what the matching link of a sharded_receiver verifies, so each shard travels as an
// ordinary version of its own layout (its own hash, checksums and history) and no rank ever gathers a tensor.
// The pieces of all shards must tile the full layout exactly (check_shards).
#pragma once

#include <sparsesync/core/error.hpp>
#include <sparsesync/core/layout.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

SPARSESYNC_NS_BEGIN

struct shard_piece {
  std::uint32_t tensor = 0;  // index in the full layout
  std::uint64_t offset = 0;  // first element of the piece within the tensor
  std::uint64_t count = 0;   // elements
  friend bool operator==(const shard_piece&, const shard_piece&) = default;
};

// The sub-layout of a shard: piece i is tensor i, 1-D, named after its place in the full layout.
inline model_layout shard_layout(const model_layout& full, std::span<const shard_piece> pieces) {
  std::vector<tensor_info> t;
  t.reserve(pieces.size());
  for (const auto& p : pieces) {
    if (p.tensor >= full.size()) throw error(errc::invalid_argument, "shard piece names tensor " + std::to_string(p.tensor) + " of " + std::to_string(full.size()));
    const auto& info = full[p.tensor];
    if (p.count == 0 || p.offset > info.numel() || info.numel() - p.offset < p.count)
      throw error(errc::invalid_argument, "shard piece [" + std::to_string(p.offset) + ", +" + std::to_string(p.count) + ") is empty or outside " + info.name);
    t.push_back({info.name + "[" + std::to_string(p.offset) + ":" + std::to_string(p.offset + p.count) + "]", info.dtype, {p.count}});
  }
  return model_layout(std::move(t));
}

// Views of a shard's pieces inside views of the full model (a receiver's buffers).
template <class View>
std::vector<View> shard_views(const model_layout& full, std::span<const View> full_views, std::span<const shard_piece> pieces) {
  throw_if_error(check_views(full, full_views, "full-model views"));
  std::vector<View> out;
  out.reserve(pieces.size());
  for (const auto& p : pieces) {
    const auto& v = full_views[p.tensor];
    using byte_ptr = std::conditional_t<std::is_same_v<View, tensor_view>, unsigned char*, const unsigned char*>;
    out.push_back({static_cast<byte_ptr>(v.data) + p.offset * size_of(v.dtype), p.count, v.dtype});
  }
  return out;
}

// FSDP / ZeRO-3 style: rank `rank` of `world` holds the contiguous 1/world of the model's flat elements (the
// last ranks one element fewer when it does not divide), cut at tensor boundaries into pieces.
inline std::vector<shard_piece> flat_shard(const model_layout& full, std::size_t rank, std::size_t world) {
  if (world == 0 || rank >= world) throw error(errc::invalid_argument, "flat_shard: rank must lie in [0, world)");
  const std::uint64_t n = full.numel(), per = n / world, extra = n % world;
  const std::uint64_t begin = rank * per + std::min<std::uint64_t>(rank, extra);
  const std::uint64_t end = begin + per + (rank < extra ? 1 : 0);
  std::vector<shard_piece> out;
  for (std::size_t t = 0; t < full.size(); ++t) {
    const std::uint64_t first = full.first_element(t), last = first + full[t].numel();
    const std::uint64_t lo = std::max(first, begin), hi = std::min(last, end);
    if (lo < hi) out.push_back({static_cast<std::uint32_t>(t), lo - first, hi - lo});
  }
  return out;
}

// Pipeline-stage style: whole tensors.
inline std::vector<shard_piece> tensor_shard(const model_layout& full, std::span<const std::size_t> tensors) {
  std::vector<shard_piece> out;
  for (const auto t : tensors) {
    if (t >= full.size()) throw error(errc::invalid_argument, "tensor_shard: no tensor " + std::to_string(t));
    if (full[t].numel()) out.push_back({static_cast<std::uint32_t>(t), 0, full[t].numel()});
  }
  return out;
}

// The shards tile the full layout: every element of every tensor in exactly one piece.
inline status check_shards(const model_layout& full, std::span<const std::vector<shard_piece>> shards) {
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> per_tensor(full.size());
  for (std::size_t s = 0; s < shards.size(); ++s)
    for (const auto& p : shards[s]) {
      if (p.tensor >= full.size()) return {errc::invalid_argument, "shard " + std::to_string(s) + " names tensor " + std::to_string(p.tensor)};
      per_tensor[p.tensor].push_back({p.offset, p.offset + p.count});
    }
  for (std::size_t t = 0; t < full.size(); ++t) {
    auto& r = per_tensor[t];
    std::sort(r.begin(), r.end());
    std::uint64_t at = 0;
    for (const auto& [lo, hi] : r) {
      if (lo != at) return {errc::invalid_argument, full[t].name + ": elements " + (lo < at ? "in two shards" : "in no shard") + " at " + std::to_string(std::min(lo, at))};
      at = hi;
    }
    if (at != full[t].numel()) return {errc::invalid_argument, full[t].name + ": elements from " + std::to_string(at) + " in no shard"};
  }
  return {};
}

SPARSESYNC_NS_END
