// Synthetic model layouts with the tensor names and shapes of real checkpoints, so generated updates
// exercise the same mix of huge matrices, small vectors and odd sizes a codec meets in practice.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/dtype.hpp>
#include <sparsesync/core/error.hpp>
#include <sparsesync/core/layout.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace gen {

enum class layout_style : unsigned char {
  gpt2,   // transformer.h.N.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj}, Conv1D [in, out], biases
  llama,  // model.layers.N.{input_layernorm,self_attn.{q,k,v,o}_proj,post_attention_layernorm,mlp.*}, [out, in]
};

struct gpt_like_options {
  layout_style style = layout_style::gpt2;
  std::uint64_t mlp_hidden = 0;       // 0: 4 * hidden (gpt2), or 8/3 * hidden rounded up to 64 (llama)
  std::uint64_t kv_hidden = 0;        // llama only; 0: hidden (no grouped-query attention)
  std::uint64_t positions = 1024;     // gpt2 only: learned position embeddings (0: none)
  bool tie_embeddings = true;         // false adds lm_head.weight [vocab, hidden]
  bool qkv_bias = false;              // llama only: Qwen-style biases on q/k/v
  sparsesync::dtype dtype = dtype::bf16;
  sparsesync::dtype norm_dtype = dtype::bf16;  // some trainers keep norm gains in f32
};

inline model_layout make_gpt_like_layout(std::uint64_t hidden, std::uint64_t layers, std::uint64_t vocab,
                                         const gpt_like_options& opt = {}) {
  if (hidden == 0 || vocab == 0) throw error(errc::invalid_argument, "make_gpt_like_layout: hidden and vocab must be positive");
  std::vector<tensor_info> t;
  auto add = [&](std::string name, std::vector<std::uint64_t> shape, sparsesync::dtype d) {
    t.push_back({std::move(name), d, std::move(shape)});
  };
  const auto d = opt.dtype;
  const auto nd = opt.norm_dtype;
  if (opt.style == layout_style::gpt2) {
    const std::uint64_t mlp = opt.mlp_hidden ? opt.mlp_hidden : 4 * hidden;
    add("transformer.wte.weight", {vocab, hidden}, d);
    if (opt.positions) add("transformer.wpe.weight", {opt.positions, hidden}, d);
    for (std::uint64_t l = 0; l < layers; ++l) {
      const std::string p = "transformer.h." + std::to_string(l) + ".";
      add(p + "ln_1.weight", {hidden}, nd);
      add(p + "ln_1.bias", {hidden}, nd);
      add(p + "attn.c_attn.weight", {hidden, 3 * hidden}, d);
      add(p + "attn.c_attn.bias", {3 * hidden}, d);
      add(p + "attn.c_proj.weight", {hidden, hidden}, d);
      add(p + "attn.c_proj.bias", {hidden}, d);
      add(p + "ln_2.weight", {hidden}, nd);
      add(p + "ln_2.bias", {hidden}, nd);
      add(p + "mlp.c_fc.weight", {hidden, mlp}, d);
      add(p + "mlp.c_fc.bias", {mlp}, d);
      add(p + "mlp.c_proj.weight", {mlp, hidden}, d);
      add(p + "mlp.c_proj.bias", {hidden}, d);
    }
    add("transformer.ln_f.weight", {hidden}, nd);
    add("transformer.ln_f.bias", {hidden}, nd);
  } else {
    const std::uint64_t mlp = opt.mlp_hidden ? opt.mlp_hidden : (8 * hidden / 3 + 63) / 64 * 64;
    const std::uint64_t kv = opt.kv_hidden ? opt.kv_hidden : hidden;
    add("model.embed_tokens.weight", {vocab, hidden}, d);
    for (std::uint64_t l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      add(p + "input_layernorm.weight", {hidden}, nd);
      add(p + "self_attn.q_proj.weight", {hidden, hidden}, d);
      if (opt.qkv_bias) add(p + "self_attn.q_proj.bias", {hidden}, d);
      add(p + "self_attn.k_proj.weight", {kv, hidden}, d);
      if (opt.qkv_bias) add(p + "self_attn.k_proj.bias", {kv}, d);
      add(p + "self_attn.v_proj.weight", {kv, hidden}, d);
      if (opt.qkv_bias) add(p + "self_attn.v_proj.bias", {kv}, d);
      add(p + "self_attn.o_proj.weight", {hidden, hidden}, d);
      add(p + "post_attention_layernorm.weight", {hidden}, nd);
      add(p + "mlp.gate_proj.weight", {mlp, hidden}, d);
      add(p + "mlp.up_proj.weight", {mlp, hidden}, d);
      add(p + "mlp.down_proj.weight", {hidden, mlp}, d);
    }
    add("model.norm.weight", {hidden}, nd);
  }
  if (!opt.tie_embeddings) add("lm_head.weight", {vocab, hidden}, d);
  return model_layout(std::move(t));
}

struct flat_layout_options {
  std::uint64_t max_tensor_elements = std::uint64_t(1) << 24;  // larger totals are split into tensors this big
  sparsesync::dtype dtype = dtype::bf16;
  std::string name_prefix = "flat";
};

// `total_elements` elements in 1-D tensors named "<prefix>.<i>.weight" (initialised as matrices).
inline model_layout make_flat_layout(std::uint64_t total_elements, const flat_layout_options& opt = {}) {
  if (opt.max_tensor_elements == 0) throw error(errc::invalid_argument, "make_flat_layout: max_tensor_elements must be positive");
  std::vector<tensor_info> t;
  for (std::uint64_t at = 0, i = 0; at < total_elements; ++i) {
    const std::uint64_t n = std::min(opt.max_tensor_elements, total_elements - at);
    t.push_back({opt.name_prefix + "." + std::to_string(i) + ".weight", opt.dtype, {n}});
    at += n;
  }
  return model_layout(std::move(t));
}

}  // namespace gen
SPARSESYNC_NS_END
