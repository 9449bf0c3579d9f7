// Synthetic layouts and the name-based tensor classification the generator relies on.
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/gen/tensor_kind.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

namespace gen = sparsesync::gen;
using sparsesync::dtype;

TEST_CASE("classify_tensor") {
  using k = gen::tensor_kind;
  CHECK(gen::classify_tensor("transformer.h.0.ln_1.weight") == k::norm);
  CHECK(gen::classify_tensor("transformer.h.0.ln_1.bias") == k::bias);
  CHECK(gen::classify_tensor("transformer.ln_f.weight") == k::norm);
  CHECK(gen::classify_tensor("model.layers.3.input_layernorm.weight") == k::norm);
  CHECK(gen::classify_tensor("model.layers.3.self_attn.q_norm.weight") == k::norm);
  CHECK(gen::classify_tensor("model.norm.weight") == k::norm);
  CHECK(gen::classify_tensor("transformer.h.0.attn.c_attn.bias") == k::bias);
  CHECK(gen::classify_tensor("transformer.wte.weight") == k::embedding);
  CHECK(gen::classify_tensor("model.embed_tokens.weight") == k::embedding);
  CHECK(gen::classify_tensor("lm_head.weight") == k::embedding);
  CHECK(gen::classify_tensor("model.layers.0.mlp.down_proj.weight") == k::matrix);
  CHECK(gen::classify_tensor("conv.kernel") == k::matrix);  // "kernel" is not a norm
  CHECK(gen::classify_tensor("") == k::matrix);
}

TEST_CASE("gpt2-style layout has GPT-2's names and shapes") {
  const auto l = gen::make_gpt_like_layout(256, 4, 2048, {.positions = 256});
  // The shared real stream's model: 3,749,376 parameters, tied embeddings.
  CHECK(l.numel() == 3749376);
  CHECK(l.size() == 2 + 4 * 12 + 2);
  CHECK(l[0].name == "transformer.wte.weight");
  CHECK(l.find("transformer.h.3.mlp.c_fc.weight") < l.size());
  CHECK(l[l.find("transformer.h.3.attn.c_attn.weight")].shape == std::vector<std::uint64_t>{256, 768});
  CHECK(l[l.size() - 1].name == "transformer.ln_f.bias");
}

TEST_CASE("llama-style layout") {
  gen::gpt_like_options o;
  o.style = gen::layout_style::llama;
  o.kv_hidden = 128;
  o.tie_embeddings = false;
  o.norm_dtype = dtype::f32;
  const auto l = gen::make_gpt_like_layout(512, 2, 1000, o);
  CHECK(l.size() == 1 + 2 * 9 + 1 + 1);
  const auto up = l.find("model.layers.1.mlp.up_proj.weight");
  REQUIRE(up < l.size());
  CHECK(l[up].shape == std::vector<std::uint64_t>{1408, 512});  // 8/3 * 512 rounded up to 64
  CHECK(l[l.find("model.layers.0.self_attn.k_proj.weight")].shape == std::vector<std::uint64_t>{128, 512});
  CHECK(l[l.find("model.norm.weight")].dtype == dtype::f32);
  CHECK(l[l.size() - 1].name == "lm_head.weight");
}

TEST_CASE("flat layout splits into bounded tensors") {
  const auto l = gen::make_flat_layout(10'000'001, {.max_tensor_elements = 4'000'000});
  CHECK(l.size() == 3);
  CHECK(l.numel() == 10'000'001);
  CHECK(l[2].numel() == 2'000'001);
  CHECK(l[0].name == "flat.0.weight");
  CHECK(gen::make_flat_layout(0).size() == 0);
  CHECK_THROWS_AS(gen::make_flat_layout(5, {.max_tensor_elements = 0}), sparsesync::error);
}
