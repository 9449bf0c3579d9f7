// The golden patches' inputs, options and file names: one small deterministic model pair per dtype, encoded
// with every encoder_table row and `auto`, in both value modes. golden_test checks the committed files against
// them; make_golden writes the files (only together with a format version bump: README.md).
#pragma once

#include "test_models.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace sparsesync::golden {

using test::host_model;

// splitmix64: the inputs must be the same on every compiler and library, which std:: distributions are not.
struct splitmix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  bool per_mille(unsigned p) { return next() % 1000 < p; }
};

// 256-element chunks and 2 KiB buckets: tensors split over several buckets, buckets of several chunks.
inline constexpr unsigned golden_log2_chunk = 8;
inline constexpr std::uint64_t golden_bucket_bytes = 2048;
inline constexpr std::uint64_t golden_base_version = 41;
inline constexpr std::uint64_t golden_target_version = 42;
inline constexpr std::string_view golden_metadata = "sparsesync golden patch";

inline model_layout golden_layout(dtype t) {
  return model_layout({{"embed", t, {24, 100}},  // sparse: +-1 ULP steps, a few jumps and sign flips
                       {"dense", t, {300}},      // about 40 % changed
                       {"empty", t, {0}},        // skipped by the tiling
                       {"frozen", t, {257}},     // unchanged
                       {"edges", t, {130}},      // only its first and last element change
                       {"one", t, {1}}});        // the model's last element: a sign flip
}

struct golden_inputs {
  host_model base;
  host_model target;
};

namespace detail {

inline std::uint32_t ulp_step(dtype t, std::uint32_t bits, int steps) {
  return visit_word(t, [&]<class W>() -> std::uint32_t { return apply_ulp_delta<W>(static_cast<W>(bits), static_cast<W>(steps)); });
}

// A training-like change: mostly +-1 ULP, sometimes +-2, rarely a sign flip or a jump to an unrelated value.
inline std::uint32_t changed_value(dtype t, std::uint32_t bits, splitmix64& rng) {
  const unsigned w = size_of(t);
  const std::uint32_t sign = 1u << (8 * w - 1);
  const std::uint32_t mask = w == 4 ? 0xFFFFFFFFu : (1u << (8 * w)) - 1;
  const auto r = rng.next() % 32;
  if (r == 0) return bits ^ sign;
  if (r == 1) {
    const auto v = static_cast<std::uint32_t>(rng.next()) & mask;
    return v != bits ? v : bits ^ 1u;
  }
  const int magnitude = r < 5 ? 2 : 1;
  return ulp_step(t, bits, (rng.next() & 1) ? magnitude : -magnitude);
}

}  // namespace detail

inline golden_inputs make_golden_inputs(dtype t) {
  golden_inputs in{host_model(golden_layout(t)), host_model(golden_layout(t))};
  splitmix64 rng{0x5EED0000u + static_cast<std::uint8_t>(t)};
  const unsigned w = size_of(t);
  for (auto& tensor : in.base.tensors)
    for (auto& b : tensor) b = static_cast<unsigned char>(rng.next());
  in.target = in.base;
  auto change = [&](std::size_t tensor, std::uint64_t i) {
    in.target.set(tensor, i, detail::changed_value(t, in.base.get(tensor, i), rng));
  };
  for (std::uint64_t i = 0; i < in.base.layout[0].numel(); ++i)
    if (rng.per_mille(25)) change(0, i);
  for (std::uint64_t i = 0; i < in.base.layout[1].numel(); ++i)
    if (rng.per_mille(400)) change(1, i);
  // The model's first element, the first and last of "edges", and the model's last element.
  in.target.set(0, 0, detail::ulp_step(t, in.base.get(0, 0), 1));
  in.target.set(4, 0, detail::ulp_step(t, in.base.get(4, 0), -1));
  in.target.set(4, 129, in.base.get(4, 129) ^ (1u << (8 * w - 1)));
  in.target.set(5, 0, in.base.get(5, 0) ^ (1u << (8 * w - 1)));
  return in;
}

// One golden file: an encoder_table row (or `auto` when `encoder` is empty), a value mode, a dtype.
struct golden_case {
  std::optional<encoder_id> encoder;
  value_mode mode;
  dtype type;

  [[nodiscard]] std::string encoder_label() const { return encoder ? std::string(encoder_name(*encoder)) : std::string("auto"); }
  [[nodiscard]] std::string file_name() const {
    return encoder_label() + "-" + std::string(to_string(mode)) + "-" + std::string(to_string(type)) + ".patch";
  }
};

// Every dtype the format knows x both value modes x (every encoder_table row, then `auto`).
inline std::vector<golden_case> golden_cases() {
  std::vector<golden_case> out;
  for (std::uint8_t d = 1; is_valid(static_cast<dtype>(d)); ++d)
    for (auto mode : {value_mode::absolute, value_mode::ulp}) {
      for (const auto& row : encoder_table) out.push_back({row.id, mode, static_cast<dtype>(d)});
      out.push_back({std::nullopt, mode, static_cast<dtype>(d)});
    }
  return out;
}

inline patch_options golden_options(value_mode mode) {
  patch_options o;
  o.encode.mode = mode;
  o.encode.log2_chunk = golden_log2_chunk;
  o.base_version = golden_base_version;
  o.target_version = golden_target_version;
  o.metadata = {reinterpret_cast<const unsigned char*>(golden_metadata.data()), golden_metadata.size()};
  return o;
}

inline std::vector<unsigned char> encode_golden(const golden_case& c, const golden_inputs& in) {
  const auto b = in.base.views();
  const auto t = in.target.views();
  const auto opt = golden_options(c.mode);
  const fixed_bytes policy{golden_bucket_bytes};
  if (!c.encoder) return encode_patch<auto_encoder>(in.base.layout, b, t, opt, policy);
  std::vector<unsigned char> out;
  if (!visit_encoder(*c.encoder, [&]<class E>(E) { out = encode_patch<E>(in.base.layout, b, t, opt, policy); }))
    throw error(errc::invalid_argument, "golden case names an unknown encoder");
  return out;
}

// The bucket headers of a patch, in order; nothing when its structure does not parse.
inline std::optional<std::vector<bucket_header>> golden_bucket_headers(std::span<const unsigned char> patch) {
  patch_prologue pro;
  if (!parse_patch_prologue(patch, pro).ok()) return std::nullopt;
  std::vector<bucket_header> out;
  std::size_t pos = pro.bytes;
  for (std::uint32_t b = 0; b < pro.header.bucket_count; ++b) {
    bucket_view v;
    if (!parse_bucket(patch.subspan(pos), v).ok()) return std::nullopt;
    out.push_back(v.header);
    pos += v.frame_bytes;
  }
  if (pos != patch.size()) return std::nullopt;
  return out;
}

// The file's bytes, or nothing when it cannot be read.
inline std::optional<std::vector<unsigned char>> read_golden_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return std::nullopt;
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(f), {});
}

inline bool write_golden_file(const std::filesystem::path& p, const std::vector<unsigned char>& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(f);
}

}  // namespace sparsesync::golden
