// Small host models for tests: owned tensors of any dtype, plus views of them.
#pragma once

#include <sparsesync/sparsesync.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace sparsesync::test {

struct host_model {
  model_layout layout;
  std::vector<std::vector<unsigned char>> tensors;

  explicit host_model(model_layout l) : layout(std::move(l)), tensors(layout.size()) {
    for (std::size_t i = 0; i < layout.size(); ++i) tensors[i].assign(layout[i].bytes(), 0);
  }

  std::vector<const_tensor_view> views() const {
    std::vector<const_tensor_view> v;
    for (std::size_t i = 0; i < layout.size(); ++i) v.push_back({tensors[i].data(), layout[i].numel(), layout[i].dtype});
    return v;
  }
  std::vector<tensor_view> mutable_views() {
    std::vector<tensor_view> v;
    for (std::size_t i = 0; i < layout.size(); ++i) v.push_back({tensors[i].data(), layout[i].numel(), layout[i].dtype});
    return v;
  }
  std::uint32_t get(std::size_t t, std::uint64_t i) const {
    std::uint32_t v = 0;
    std::memcpy(&v, tensors[t].data() + i * size_of(layout[t].dtype), size_of(layout[t].dtype));
    return v;
  }
  void set(std::size_t t, std::uint64_t i, std::uint32_t v) {
    std::memcpy(tensors[t].data() + i * size_of(layout[t].dtype), &v, size_of(layout[t].dtype));
  }
  bool operator==(const host_model& o) const { return tensors == o.tensors; }
};

// Random bit patterns everywhere.
inline void fill_random(host_model& m, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (auto& t : m.tensors)
    for (auto& b : t) b = static_cast<unsigned char>(rng());
}

// Moves a share `density` of elements by small ULP steps (like an Adam step after the BF16 cast).
inline void perturb_ulp(host_model& m, double density, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution pick(density);
  for (std::size_t t = 0; t < m.layout.size(); ++t) {
    const unsigned w = size_of(m.layout[t].dtype);
    for (std::uint64_t i = 0; i < m.layout[t].numel(); ++i) {
      if (!pick(rng)) continue;
      const int step = (rng() % 10 == 0) ? 2 : 1;
      const bool up = rng() & 1;
      auto v = m.get(t, i);
      if (w == 1) v = apply_ulp_delta<std::uint8_t>(static_cast<std::uint8_t>(v), static_cast<std::uint8_t>(up ? step : -step));
      if (w == 2) v = apply_ulp_delta<std::uint16_t>(static_cast<std::uint16_t>(v), static_cast<std::uint16_t>(up ? step : -step));
      if (w == 4) v = apply_ulp_delta<std::uint32_t>(v, static_cast<std::uint32_t>(up ? step : -step));
      m.set(t, i, v);
    }
  }
}

// BF16 weights: normal, std 0.02 (every tensor must be bf16).
inline void fill_normal_bf16(host_model& m, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (std::size_t t = 0; t < m.layout.size(); ++t)
    for (std::uint64_t i = 0; i < m.layout[t].numel(); ++i) {
      const float x = normal(rng);
      std::uint32_t u = 0;
      std::memcpy(&u, &x, 4);
      m.set(t, i, u >> 16);
    }
}

// An optimizer step on BF16 weights as real RL streams show it: small magnitudes move more often (their ULPs are
// smaller), mostly by +-1 ULP; about `density` of a std-0.02 model's elements change. Where entropy's classes pay.
inline void step_weightlike(host_model& m, double density, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (std::size_t t = 0; t < m.layout.size(); ++t)
    for (std::uint64_t i = 0; i < m.layout[t].numel(); ++i) {
      const auto b = static_cast<std::uint16_t>(m.get(t, i));
      const std::uint32_t u = std::uint32_t{b} << 16;
      float x = 0;
      std::memcpy(&x, &u, 4);
      const double p = std::min(0.9, density * 0.004 / (std::fabs(x) + 1e-6));
      if (std::uniform_real_distribution<double>(0, 1)(rng) >= p) continue;
      const int step = rng() % 10 == 0 ? 2 : 1;
      m.set(t, i, apply_ulp_delta<std::uint16_t>(b, static_cast<std::uint16_t>((rng() & 1) ? step : -step)));
    }
}

// Calls f.template operator()<E>() for every built-in encoder, in encoder_table order.
template <class F>
void for_each_builtin_encoder(F&& f) {
  [&]<class... Es>(encoder_list<Es...>) { (f.template operator()<Es>(), ...); }(builtin_encoders{});
}

template <class Sel, class P = fixed_bytes>
std::vector<unsigned char> make_patch(const host_model& base, const host_model& target, value_mode mode, unsigned log2_chunk = 12,
                                      P policy = P{1 << 16}) {
  patch_options o;
  o.encode.mode = mode;
  o.encode.log2_chunk = log2_chunk;
  const auto b = base.views();
  const auto t = target.views();
  return encode_patch<Sel>(base.layout, b, t, o, policy);
}

}  // namespace sparsesync::test
