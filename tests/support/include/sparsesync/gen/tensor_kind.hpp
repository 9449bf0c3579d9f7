// What role a tensor plays, guessed from its name, and how such tensors are typically distributed in a
// trained transformer. Initial magnitudes matter more than anything else for sparsity: one BF16 ULP is
// |w|/128..|w|/256, so a norm gain near 1.0 almost never changes at lr 1e-6 while a small bias often does.
#pragma once

#include <sparsesync/core/config.hpp>

#include <array>
#include <cstddef>
#include <string_view>

SPARSESYNC_NS_BEGIN
namespace gen {

enum class tensor_kind : unsigned char { matrix = 0, embedding = 1, norm = 2, bias = 3 };

inline constexpr std::size_t tensor_kind_count = 4;

constexpr std::string_view to_string(tensor_kind k) {
  switch (k) {
    case tensor_kind::matrix: return "matrix";
    case tensor_kind::embedding: return "embedding";
    case tensor_kind::norm: return "norm";
    case tensor_kind::bias: return "bias";
  }
  return "invalid";
}

// Matches on dot-separated name components, not substrings, so "kernel" is not a norm and "ln_1.bias" is a
// bias (norm biases behave like other biases: small and centred on zero).
constexpr tensor_kind classify_tensor(std::string_view name) {
  auto lower_contains = [](std::string_view s, std::string_view needle) {
    if (needle.size() > s.size()) return false;
    for (std::size_t i = 0; i + needle.size() <= s.size(); ++i) {
      bool match = true;
      for (std::size_t j = 0; j < needle.size() && match; ++j) {
        char c = s[i + j];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        match = c == needle[j];
      }
      if (match) return true;
    }
    return false;
  };
  auto starts_with_ln = [](std::string_view c) { return c.size() >= 2 && (c[0] == 'l' || c[0] == 'L') && (c[1] == 'n' || c[1] == 'N'); };
  bool bias = false, norm = false, embedding = false;
  std::size_t pos = 0;
  while (pos <= name.size()) {
    std::size_t end = name.find('.', pos);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view c = name.substr(pos, end - pos);
    if (lower_contains(c, "bias")) bias = true;
    if (starts_with_ln(c) || lower_contains(c, "norm")) norm = true;
    if (lower_contains(c, "embed") || c == "wte" || c == "wpe" || c == "lm_head") embedding = true;
    pos = end + 1;
  }
  if (bias) return tensor_kind::bias;
  if (norm) return tensor_kind::norm;
  if (embedding) return tensor_kind::embedding;
  return tensor_kind::matrix;
}

// Initial values of one kind: per tensor, mean ~ N(mean, mean_jitter^2) and standard deviation
// stddev * 2^N(0, stddev_jitter_log2^2), so tensors of one kind differ as they do in a trained model; per
// element, value = mean + sd * z, with z ~ N(0, 1) scaled by outlier_scale for a share outlier_fraction of
// elements (a scale mixture: heavier tails at the same variance; outlier_fraction 0.01, scale 3 gives
// kurtosis ~4.7).
struct init_spec {
  double mean = 0.0;
  double mean_jitter = 0.0;
  double stddev = 0.02;
  double stddev_jitter_log2 = 0.5;
  double outlier_fraction = 0.01;
  double outlier_scale = 3.0;
};

// Defaults read off a trained GPT-2-shaped model (shared/data/rl-gpt2-small-lr1e-6): matrices and embeddings
// with sd 0.007..0.05, norm gains 0.8..1.25 with sd ~0.02, biases with sd 0.005..0.035 and means up to 0.05.
inline constexpr std::array<init_spec, tensor_kind_count> default_init_specs = {{
    /* matrix    */ {0.0, 0.0, 0.02, 0.5, 0.01, 3.0},
    /* embedding */ {0.0, 0.0, 0.02, 0.5, 0.01, 3.0},
    /* norm      */ {1.0, 0.1, 0.02, 0.3, 0.0, 1.0},
    /* bias      */ {0.0, 0.01, 0.01, 0.7, 0.01, 3.0},
}};

}  // namespace gen
SPARSESYNC_NS_END
