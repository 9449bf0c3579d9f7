// A synthetic RL post-training run: FP32 master weights updated by AdamW from noisy, step-correlated
// gradients, cast to each tensor's dtype (round to nearest even) after every step, as a trainer does before
// pushing weights. Sparsity is not imposed; it emerges as in real training: an element's BF16 cast changes
// only when its accumulated FP32 drift crosses a rounding boundary, so the density depends on lr against
// |w| (one BF16 ULP is |w|/128..|w|/256) and falls over the first steps as Adam's normalised step shrinks
// from exactly lr (step 1) to a noise-averaged fraction of it.
//
// Model of one element j of tensor T at step t (all per-element arithmetic in FP32, in this order):
//   g   = s_T * c_{T,t} * (rho_T * p_j + n_{j,t})     p_j = float(N(0,1)) fixed, n_{j,t} = float(N(0,1)) fresh each step
//   w   = w * float(1 - lr*wd)                         (decoupled decay; a no-op in FP32 at lr 1e-6, as in PyTorch)
//   m   = m + float(1 - beta1) * (g - m)
//   v   = v * float(beta2) + float(1 - beta2) * g * g
//   w   = w + float(-lr / (1 - beta1^t)) * m / (sqrt(v) / float(sqrt(1 - beta2^t)) + float(eps))
// which is torch.optim.AdamW's single-tensor FP32 update, with no product fused into an add (exact_math.hpp).
// Random numbers: rng_streams.hpp. Results depend only on the seed and options, never on the thread count
// or the compiler. Memory: 16 bytes per element (master, m, v and the persistent gradient direction, all
// FP32) plus the cast output.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/dtype.hpp>
#include <sparsesync/core/error.hpp>
#include <sparsesync/core/layout.hpp>
#include <sparsesync/gen/exact_math.hpp>
#include <sparsesync/gen/float_cast.hpp>
#include <sparsesync/gen/normal.hpp>
#include <sparsesync/gen/parallel.hpp>
#include <sparsesync/gen/rng_streams.hpp>
#include <sparsesync/gen/tensor_kind.hpp>
#include <sparsesync/gen/tensor_set.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace gen {

struct gradient_model {
  double scale = 1e-3;              // typical |g| of an element; Adam is scale-free, so it matters only against eps
  double scale_jitter_log2 = 1.0;   // per-tensor factor 2^N(0, s^2)
  double persistence = 0.1;         // sd of the persistent component relative to the per-step noise
  double step_jitter_log2 = 0.3;    // per-(tensor, step) factor 2^N(0, s^2): gradient norms vary between steps
};

// One tensor's resolved parameters (after per-tensor jitter); `customize` may rewrite them.
struct tensor_params {
  tensor_kind kind = tensor_kind::matrix;
  double mean = 0.0;
  double stddev = 0.02;
  double outlier_fraction = 0.0;
  double outlier_scale = 1.0;
  double grad_scale = 1e-3;
  double persistence = 0.1;
  double step_jitter_log2 = 0.3;
};

struct adam_bf16_options {
  std::uint64_t seed = 0;
  double lr = 1e-6;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  gradient_model gradients{};
  std::array<init_spec, tensor_kind_count> init = default_init_specs;  // indexed by tensor_kind
  // Per-tensor override hook, called once per tensor at construction (e.g. force a tensor's stddev).
  std::function<void(const tensor_info&, tensor_params&)> customize;
  // Loaded weights only: a trainer's FP32 master lies anywhere in the rounding interval of the value it
  // pushed, not on it. Starting exactly on representable values would need half an ULP of drift before
  // anything changes and understates early density about twofold, so by default each master is placed
  // uniformly inside its interval (init_value stream); false keeps the exact values.
  bool dither_initial = true;
  unsigned threads = 0;  // 0: one per hardware core; the output is identical for every value
};

class adam_bf16_model {
 public:
  // Initial weights drawn from the per-kind distributions.
  adam_bf16_model(model_layout layout, adam_bf16_options opts) : adam_bf16_model(std::move(layout), std::move(opts), nullptr) {}

  // Starts from given weights (e.g. a real checkpoint), widened exactly to FP32; `initial` matches `layout`.
  adam_bf16_model(model_layout layout, std::span<const const_tensor_view> initial, adam_bf16_options opts)
      : adam_bf16_model(std::move(layout), std::move(opts), &initial) {}

  // One optimizer step on every element, then the cast of every tensor.
  void step() {
    if (step_ >= std::numeric_limits<std::uint32_t>::max()) throw error(errc::invalid_argument, "adam_bf16_model: step counter exhausted");
    ++step_;
    const step_scalars s = scalars();
    std::vector<float> gscale(layout().size());
    for (std::size_t t = 0; t < gscale.size(); ++t) {
      const double jitter = detail::exp2_det(params_[t].step_jitter_log2 *
                                             tensor_normal(opts_.seed, static_cast<std::uint32_t>(t), tensor_param_id::grad_step_scale,
                                                           static_cast<std::uint32_t>(step_)));
      gscale[t] = static_cast<float>(params_[t].grad_scale * jitter);
    }
    detail::parallel_for(chunks_.size(), opts_.threads, [&](std::size_t c) {
      update_chunk(chunks_[c], s, gscale[chunks_[c].tensor]);
      cast_chunk(chunks_[c]);
    });
  }

  void step(std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) step();
  }

  // A learning-rate schedule can change lr between steps.
  void set_lr(double lr) { opts_.lr = lr; }

  [[nodiscard]] std::uint64_t step_count() const noexcept { return step_; }
  [[nodiscard]] const model_layout& layout() const noexcept { return out_.layout(); }
  [[nodiscard]] const adam_bf16_options& options() const noexcept { return opts_; }
  [[nodiscard]] const tensor_params& params(std::size_t i) const { return params_.at(i); }

  // The current cast weights (valid until the next step).
  [[nodiscard]] const_tensor_view tensor(std::size_t i) const { return out_.tensor(i); }
  [[nodiscard]] std::vector<const_tensor_view> views() const { return out_.views(); }
  [[nodiscard]] const tensor_set& weights() const noexcept { return out_; }
  [[nodiscard]] tensor_set snapshot() const { return out_; }

  [[nodiscard]] std::span<const std::uint16_t> bf16(std::size_t i) const { return typed<std::uint16_t>(i, dtype::bf16); }
  [[nodiscard]] std::span<const std::uint16_t> f16(std::size_t i) const { return typed<std::uint16_t>(i, dtype::f16); }
  [[nodiscard]] std::span<const float> f32(std::size_t i) const {
    (void)typed<std::uint32_t>(i, dtype::f32);
    return {static_cast<const float*>(out_.tensor(i).data), layout()[i].numel()};
  }
  // The FP32 master copy of tensor i.
  [[nodiscard]] std::span<const float> master(std::size_t i) const {
    return {master_.data() + layout().first_element(i), layout()[i].numel()};
  }

 private:
  struct chunk {
    std::uint32_t tensor;
    std::uint64_t begin, end;  // element range inside the tensor; begin is a multiple of 4 (one Philox block)
  };

  struct step_scalars {
    float decay, one_minus_beta1, beta2, one_minus_beta2, neg_step_size, bc2_sqrt, eps;
  };

  static constexpr std::uint64_t chunk_elements = std::uint64_t(1) << 16;

  adam_bf16_model(model_layout layout, adam_bf16_options opts, const std::span<const const_tensor_view>* initial)
      : opts_(std::move(opts)), out_(std::move(layout)) {
    validate_options();
    const auto& L = out_.layout();
    if (L.size() > std::numeric_limits<std::uint32_t>::max()) throw error(errc::invalid_argument, "adam_bf16_model: too many tensors");
    if (initial) throw_if_error(check_views(L, *initial, "adam_bf16_model initial weights"));
    master_.assign(L.numel(), 0.0f);
    m_.assign(L.numel(), 0.0f);
    v_.assign(L.numel(), 0.0f);
    persistent_.assign(L.numel(), 0.0f);
    params_.resize(L.size());
    for (std::size_t t = 0; t < L.size(); ++t) {
      params_[t] = resolve_params(static_cast<std::uint32_t>(t), L[t]);
      for (std::uint64_t b = 0; b < L[t].numel(); b += chunk_elements)
        chunks_.push_back({static_cast<std::uint32_t>(t), b, std::min(L[t].numel(), b + chunk_elements)});
    }
    detail::parallel_for(chunks_.size(), opts_.threads, [&](std::size_t c) {
      if (initial)
        load_chunk(chunks_[c], (*initial)[chunks_[c].tensor]);
      else
        init_chunk(chunks_[c]);
      init_persistent_chunk(chunks_[c]);
      cast_chunk(chunks_[c]);
    });
  }

  void validate_options() const {
    auto bad = [](const char* what) { throw error(errc::invalid_argument, std::string("adam_bf16_options: ") + what); };
    if (!(opts_.lr >= 0 && std::isfinite(opts_.lr))) bad("lr must be finite and non-negative");
    if (!(opts_.beta1 >= 0 && opts_.beta1 < 1)) bad("beta1 must lie in [0, 1)");
    if (!(opts_.beta2 >= 0 && opts_.beta2 < 1)) bad("beta2 must lie in [0, 1)");
    if (!(opts_.eps > 0)) bad("eps must be positive");
    if (!(opts_.weight_decay >= 0)) bad("weight_decay must be non-negative");
    if (!(opts_.gradients.scale > 0)) bad("gradients.scale must be positive");
    for (const auto& s : opts_.init)
      if (!(s.stddev >= 0 && s.outlier_fraction >= 0 && s.outlier_fraction <= 1 && s.outlier_scale > 0)) bad("invalid init_spec");
  }

  tensor_params resolve_params(std::uint32_t t, const tensor_info& info) const {
    tensor_params p;
    p.kind = classify_tensor(info.name);
    const init_spec& s = opts_.init[static_cast<std::size_t>(p.kind)];
    p.mean = s.mean + detail::mul(s.mean_jitter, tensor_normal(opts_.seed, t, tensor_param_id::init_mean));
    p.stddev = s.stddev * detail::exp2_det(s.stddev_jitter_log2 * tensor_normal(opts_.seed, t, tensor_param_id::init_stddev));
    p.outlier_fraction = s.outlier_fraction;
    p.outlier_scale = s.outlier_scale;
    const auto& g = opts_.gradients;
    p.grad_scale = g.scale * detail::exp2_det(g.scale_jitter_log2 * tensor_normal(opts_.seed, t, tensor_param_id::grad_scale));
    p.persistence = g.persistence;
    p.step_jitter_log2 = g.step_jitter_log2;
    if (opts_.customize) opts_.customize(info, p);
    return p;
  }

  // PyTorch computes these in double and hands them to the FP32 kernel as floats; so do we.
  step_scalars scalars() const {
    const double t = static_cast<double>(step_);
    const double bc1 = 1.0 - std::pow(opts_.beta1, t);
    const double bc2 = 1.0 - std::pow(opts_.beta2, t);
    return {static_cast<float>(1.0 - detail::mul(opts_.lr, opts_.weight_decay)), static_cast<float>(1.0 - opts_.beta1),
            static_cast<float>(opts_.beta2), static_cast<float>(1.0 - opts_.beta2), static_cast<float>(-opts_.lr / bc1),
            static_cast<float>(std::sqrt(bc2)), static_cast<float>(opts_.eps)};
  }

  void init_chunk(const chunk& c) {
    const tensor_params& p = params_[c.tensor];
    // Scale the mixture so the tensor's standard deviation stays `stddev` whatever the outlier share.
    const double f = p.outlier_fraction, k = p.outlier_scale;
    const double unit = p.stddev / std::sqrt(1.0 - f + detail::mul(f * k, k));
    const double threshold = std::ldexp(f, 32);
    float* w = master_.data() + layout().first_element(c.tensor);
    for (std::uint64_t blk = c.begin; blk < c.end; blk += 4) {
      const philox_block z = rng_block(opts_.seed, rng_stream::init_value, c.tensor, blk >> 2, 0);
      const philox_block o = rng_block(opts_.seed, rng_stream::init_outlier, c.tensor, blk >> 2, 0);
      for (std::uint64_t i = blk; i < blk + 4 && i < c.end; ++i) {
        const double scale = static_cast<double>(o.v[i & 3]) < threshold ? unit * k : unit;
        w[i] = static_cast<float>(p.mean + detail::mul(scale, normal_from_u32(z.v[i & 3])));
      }
    }
  }

  void load_chunk(const chunk& c, const_tensor_view src) {
    float* w = master_.data() + layout().first_element(c.tensor);
    for (std::uint64_t i = c.begin; i < c.end; ++i) {
      const std::uint32_t code = load_bits(src, i);
      w[i] = std::bit_cast<float>(widen_to_f32_bits(src.dtype, code));
      if (opts_.dither_initial && src.dtype != dtype::f32)
        w[i] = dither(src.dtype, code, w[i], rng_word(opts_.seed, rng_stream::init_value, c.tensor, i, 0));
    }
  }

  // A uniform point of the open interval between the midpoints to the neighbouring codes, kept only if it
  // still casts to `code` (so the initial output equals the loaded weights bit for bit).
  static float dither(sparsesync::dtype t, std::uint32_t code, float value, std::uint32_t word) {
    if (!std::isfinite(value)) return value;
    auto neighbour = [&](int dir) -> double {
      std::uint32_t n = 0;
      switch (size_of(t)) {
        case 1: n = apply_ulp_delta<std::uint8_t>(static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(dir)); break;
        default: n = apply_ulp_delta<std::uint16_t>(static_cast<std::uint16_t>(code), static_cast<std::uint16_t>(dir)); break;
      }
      return static_cast<double>(std::bit_cast<float>(widen_to_f32_bits(t, n)));
    };
    const double down = neighbour(-1), up = neighbour(1);
    if (!std::isfinite(down) || !std::isfinite(up)) return value;
    const double lo = detail::mul(0.5, down + value), hi = detail::mul(0.5, value + up);
    const float x = static_cast<float>(lo + detail::mul(hi - lo, uniform_open01(word)));
    return cast_f32_bits(t, std::bit_cast<std::uint32_t>(x)) == code ? x : value;
  }

  // The persistent direction never changes, so it is drawn once and kept: a third fewer random numbers
  // per step for 4 bytes per element.
  void init_persistent_chunk(const chunk& c) {
    float* p = persistent_.data() + layout().first_element(c.tensor);
    for (std::uint64_t blk = c.begin; blk < c.end; blk += 4) {
      const philox_block pb = rng_block(opts_.seed, rng_stream::grad_persistent, c.tensor, blk >> 2, 0);
      for (std::uint64_t i = blk; i < blk + 4 && i < c.end; ++i) p[i] = static_cast<float>(normal_from_u32(pb.v[i & 3]));
    }
  }

  void update_chunk(const chunk& c, const step_scalars& s, float gscale) {
    const std::uint64_t first = layout().first_element(c.tensor);
    float* w = master_.data() + first;
    float* m = m_.data() + first;
    float* v = v_.data() + first;
    const float* p = persistent_.data() + first;
    const float rho = static_cast<float>(params_[c.tensor].persistence);
    const auto step = static_cast<std::uint32_t>(step_);
    for (std::uint64_t blk = c.begin; blk < c.end; blk += 4) {
      const philox_block nb = rng_block(opts_.seed, rng_stream::grad_noise, c.tensor, blk >> 2, step);
      for (std::uint64_t i = blk; i < blk + 4 && i < c.end; ++i) {
        const float zn = static_cast<float>(normal_from_u32(nb.v[i & 3]));
        using detail::mul;
        const float g = mul(gscale, mul(rho, p[i]) + zn);
        w[i] = mul(w[i], s.decay);
        m[i] = m[i] + mul(s.one_minus_beta1, g - m[i]);
        v[i] = mul(v[i], s.beta2) + mul(s.one_minus_beta2 * g, g);
        const float denom = std::sqrt(v[i]) / s.bc2_sqrt + s.eps;
        w[i] = w[i] + s.neg_step_size * m[i] / denom;
      }
    }
  }

  void cast_chunk(const chunk& c) {
    const float* w = master_.data() + layout().first_element(c.tensor);
    tensor_view out = out_.tensor(c.tensor);
    switch (out.dtype) {
      case dtype::bf16: {
        auto* o = static_cast<std::uint16_t*>(out.data);
        for (std::uint64_t i = c.begin; i < c.end; ++i) o[i] = bf16_from_f32_bits(std::bit_cast<std::uint32_t>(w[i]));
        break;
      }
      case dtype::f16: {
        auto* o = static_cast<std::uint16_t*>(out.data);
        for (std::uint64_t i = c.begin; i < c.end; ++i) o[i] = f16_from_f32_bits(std::bit_cast<std::uint32_t>(w[i]));
        break;
      }
      case dtype::f32: {
        auto* o = static_cast<float*>(out.data);
        for (std::uint64_t i = c.begin; i < c.end; ++i) o[i] = w[i];
        break;
      }
      case dtype::f8_e4m3: {
        auto* o = static_cast<std::uint8_t*>(out.data);
        for (std::uint64_t i = c.begin; i < c.end; ++i) o[i] = f8_e4m3_from_f32_bits(std::bit_cast<std::uint32_t>(w[i]));
        break;
      }
      case dtype::f8_e5m2: {
        auto* o = static_cast<std::uint8_t*>(out.data);
        for (std::uint64_t i = c.begin; i < c.end; ++i) o[i] = f8_e5m2_from_f32_bits(std::bit_cast<std::uint32_t>(w[i]));
        break;
      }
    }
  }

  static std::uint32_t load_bits(const_tensor_view v, std::uint64_t i) {
    switch (size_of(v.dtype)) {
      case 1: return static_cast<const std::uint8_t*>(v.data)[i];
      case 2: return static_cast<const std::uint16_t*>(v.data)[i];
      default: return static_cast<const std::uint32_t*>(v.data)[i];
    }
  }

  template <class W>
  std::span<const W> typed(std::size_t i, sparsesync::dtype want) const {
    if (layout()[i].dtype != want)
      throw error(errc::invalid_argument, "tensor '" + layout()[i].name + "' is " + std::string(to_string(layout()[i].dtype)) +
                                              ", not " + std::string(to_string(want)));
    return out_.words<W>(i);
  }

  adam_bf16_options opts_;
  tensor_set out_;
  std::vector<float> master_, m_, v_, persistent_;  // flat, layout order
  std::vector<tensor_params> params_;
  std::vector<chunk> chunks_;
  std::uint64_t step_ = 0;
};

}  // namespace gen
SPARSESYNC_NS_END
