// CPU codec benchmark: bits per changed element and ratio of every encoder x value mode, next to the i.i.d.
// entropy floor, the floors conditioned on each old value's class (its exponent field: what `entropy` codes
// against), the PULSE-style baseline (zstd-1 over index deltas + raw BF16) and zstd -19 of NEW XOR BASE, on
// the real update stream and on the Adam/BF16 generator at scale; single-threaded encode and apply+verify
// throughput. --density-sweep adds the generator at densities 0.3%..10% (a smaller model, several learning rates).
//
//   codec_bench [--stream DIR] [--gen-elements N] [--gen-steps K] [--density-sweep N] [--out results.json]
//   codec_bench --throughput REPS [--stream DIR] [--out results.json] [--walk auto|scalar]
// --throughput measures only one-core throughput on real steps 1, 12 and 24 (medians of REPS runs): end to
// end (encode_patch, apply_patch with every check) for rice, entropy and auto in ulp mode; the chunk codecs
// alone (no diff, checksums or framing); and the parts every encoder shares (model checksum, diff scan).
#include "host_timing.hpp"
#include "pulse_baseline.hpp"
#include "update_stream.hpp"

#include <sparsesync/gen/adam_bf16.hpp>
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/sparsesync.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>
#include <zstd.h>

namespace ss = sparsesync;
using json = nlohmann::json;

namespace {

struct flags {
  std::string stream = std::string(SPARSESYNC_SHARED_DIR) + "/data/rl-gpt2-small-lr1e-6";
  std::uint64_t gen_elements = 100'000'000;
  int gen_steps = 3;
  std::uint64_t sweep_elements = 0;  // 0: no density sweep
  std::string out = "bench/results/cpu-codec.json";
  int throughput_reps = 0;  // > 0: only the throughput measurements
};

using ss::bench::cpu_name;
using ss::bench::median;
using ss::bench::now_s;

// i.i.d. floor in bits per change: H(mask)/k + H(ulp distance), from the model and the change histogram.
double iid_floor(std::uint64_t n, std::uint64_t k, const std::map<std::int64_t, std::uint64_t>& hist) {
  if (k == 0 || k == n) return 0;
  const double p = static_cast<double>(k) / static_cast<double>(n);
  const double mask = static_cast<double>(n) * (-p * std::log2(p) - (1 - p) * std::log2(1 - p)) / static_cast<double>(k);
  double h = 0;
  for (const auto& [d, c] : hist) {
    const double q = static_cast<double>(c) / static_cast<double>(k);
    h -= q * std::log2(q);
  }
  return mask + h;
}

template <class W>
void histogram(const ss::const_tensor_view& a, const ss::const_tensor_view& b, std::uint64_t& k, std::map<std::int64_t, std::uint64_t>& hist) {
  const auto* x = static_cast<const W*>(a.data);
  const auto* y = static_cast<const W*>(b.data);
  for (std::uint64_t i = 0; i < a.numel; ++i) {
    if (x[i] == y[i]) continue;
    ++k;
    const auto d = static_cast<std::make_signed_t<W>>(ss::ulp_delta<W>(x[i], y[i]));
    ++hist[d];
  }
}

// Floors conditioned on each old value's class (the class of `entropy`: codec/entropy_params.hpp), in bits
// per change: H(mask | class) + H(ulp distance) (the anchors' "floor given each old value's exponent"), and
// with the distance conditioned on the class too.
struct class_floors {
  double mask_given_class = 0, values_given_class = 0;
};

template <class W>
void class_counts(const ss::const_tensor_view& a, const ss::const_tensor_view& b, std::vector<std::uint64_t>& elements,
                  std::vector<std::uint64_t>& changed, std::vector<std::unordered_map<std::int64_t, std::uint64_t>>& values) {
  const auto* x = static_cast<const W*>(a.data);
  const auto* y = static_cast<const W*>(b.data);
  for (std::uint64_t i = 0; i < a.numel; ++i) {
    const unsigned c = ss::entropy_params::class_of<W>(x[i]) + (sizeof(W) == 1 ? 512 : sizeof(W) == 2 ? 0 : 256);
    ++elements[c];
    if (x[i] == y[i]) continue;
    ++changed[c];
    ++values[c][static_cast<std::make_signed_t<W>>(ss::ulp_delta<W>(x[i], y[i]))];
  }
}

class_floors class_floor(const ss::model_layout& layout, std::span<const ss::const_tensor_view> base,
                         std::span<const ss::const_tensor_view> target, std::uint64_t k) {
  std::vector<std::uint64_t> elements(544), changed(544);
  std::vector<std::unordered_map<std::int64_t, std::uint64_t>> values(544);
  for (std::size_t t = 0; t < layout.size(); ++t) {
    switch (ss::size_of(layout[t].dtype)) {
      case 1: class_counts<std::uint8_t>(base[t], target[t], elements, changed, values); break;
      case 2: class_counts<std::uint16_t>(base[t], target[t], elements, changed, values); break;
      default: class_counts<std::uint32_t>(base[t], target[t], elements, changed, values); break;
    }
  }
  class_floors f;
  if (k == 0) return f;
  double mask = 0, vals = 0;
  for (std::size_t c = 0; c < elements.size(); ++c) {
    if (changed[c] == 0 || changed[c] == elements[c]) continue;
    const double p = static_cast<double>(changed[c]) / static_cast<double>(elements[c]);
    mask += static_cast<double>(elements[c]) * (-p * std::log2(p) - (1 - p) * std::log2(1 - p));
    for (const auto& [d, n] : values[c]) vals -= static_cast<double>(n) * std::log2(static_cast<double>(n) / static_cast<double>(changed[c]));
  }
  f.mask_given_class = mask / static_cast<double>(k);
  f.values_given_class = vals / static_cast<double>(k);
  return f;
}

// zstd -19 of the dense NEW XOR BASE (what a generic compressor makes of the change).
std::size_t zstd19_xor_bytes(const ss::model_layout& layout, std::span<const ss::const_tensor_view> base,
                             std::span<const ss::const_tensor_view> target) {
  std::vector<unsigned char> x(layout.bytes());
  std::size_t at = 0;
  for (std::size_t t = 0; t < layout.size(); ++t) {
    const auto* a = static_cast<const unsigned char*>(base[t].data);
    const auto* b = static_cast<const unsigned char*>(target[t].data);
    for (std::size_t i = 0; i < layout[t].bytes(); ++i) x[at + i] = a[i] ^ b[i];
    at += layout[t].bytes();
  }
  std::vector<unsigned char> out(ZSTD_compressBound(x.size()));
  const std::size_t n = ZSTD_compress(out.data(), out.size(), x.data(), x.size(), 19);
  if (ZSTD_isError(n)) throw ss::error(ss::errc::io, "zstd failed");
  return n;
}

// Sum of the buckets' chunk data bytes: the patch without its framing (headers, segment and chunk tables).
std::size_t chunk_data_bytes(std::span<const unsigned char> patch) {
  ss::patch_prologue pro;
  if (auto s = ss::parse_patch_prologue(patch, pro); !s) throw ss::error(s.code(), s.message());
  std::size_t at = pro.bytes, data = 0;
  for (std::uint32_t b = 0; b < pro.header.bucket_count; ++b) {
    ss::bucket_view v;
    if (auto s = ss::parse_bucket(patch.subspan(at), v); !s) throw ss::error(s.code(), s.message());
    data += v.header.data_bytes;
    at += v.frame_bytes;
  }
  return data;
}

template <class Sel>
json measure(const ss::model_layout& layout, std::span<const ss::const_tensor_view> base, std::span<const ss::const_tensor_view> target,
             ss::value_mode mode, std::uint64_t changed) {
  ss::patch_options o;
  o.encode.mode = mode;
  double t0 = now_s();
  const auto patch = ss::encode_patch<Sel>(layout, base, target, o);
  const double enc = now_s() - t0;
  // Apply into a copy of the base, verifying base and target checksums as a receiver does.
  std::vector<std::vector<unsigned char>> copy(layout.size());
  std::vector<ss::tensor_view> views(layout.size());
  for (std::size_t t = 0; t < layout.size(); ++t) {
    copy[t].assign(static_cast<const unsigned char*>(base[t].data), static_cast<const unsigned char*>(base[t].data) + layout[t].bytes());
    views[t] = {copy[t].data(), layout[t].numel(), layout[t].dtype};
  }
  t0 = now_s();
  const auto rep = ss::apply_patch(patch, layout, views);
  const double dec = now_s() - t0;
  bool identical = rep.changed == changed;
  for (std::size_t t = 0; t < layout.size(); ++t) identical = identical && std::memcmp(copy[t].data(), target[t].data, layout[t].bytes()) == 0;
  if (!identical) throw ss::error(ss::errc::target_mismatch, "benchmark round trip is not bit-identical");
  const double dense = static_cast<double>(layout.bytes());
  const std::size_t data = chunk_data_bytes(patch);
  return {{"encoder", std::string(Sel::name)},
          {"values", std::string(ss::to_string(mode))},
          {"payload_bytes", patch.size()},
          {"chunk_data_bytes", data},
          {"chunk_data_bits_per_change", changed ? 8.0 * static_cast<double>(data) / static_cast<double>(changed) : 0.0},
          {"bits_per_change", changed ? 8.0 * static_cast<double>(patch.size()) / static_cast<double>(changed) : 0.0},
          {"ratio_vs_dense", dense / static_cast<double>(patch.size())},
          {"encode_seconds", enc},
          {"apply_verify_seconds", dec},
          {"encode_gbps_of_weights", dense / enc / 1e9},
          {"apply_verify_gbps_of_weights", dense / dec / 1e9},
          {"bit_identical", identical}};
}

json measure_all(const ss::model_layout& layout, std::span<const ss::const_tensor_view> base, std::span<const ss::const_tensor_view> target,
                 std::uint64_t changed) {
  json rows = json::array();
  for (auto mode : {ss::value_mode::absolute, ss::value_mode::ulp}) {
    rows.push_back(measure<ss::raw_index32>(layout, base, target, mode, changed));
    rows.push_back(measure<ss::bitmap>(layout, base, target, mode, changed));
    rows.push_back(measure<ss::delta_varint>(layout, base, target, mode, changed));
    rows.push_back(measure<ss::rice>(layout, base, target, mode, changed));
    rows.push_back(measure<ss::entropy>(layout, base, target, mode, changed));
    rows.push_back(measure<ss::auto_encoder>(layout, base, target, mode, changed));
  }
  return rows;
}

json step_record(const ss::model_layout& layout, std::span<const ss::const_tensor_view> base, std::span<const ss::const_tensor_view> target,
                 const std::vector<std::pair<std::uint32_t, std::uint16_t>>* flat_changes) {
  std::uint64_t k = 0;
  std::map<std::int64_t, std::uint64_t> hist;
  for (std::size_t t = 0; t < layout.size(); ++t) {
    switch (ss::size_of(layout[t].dtype)) {
      case 1: histogram<std::uint8_t>(base[t], target[t], k, hist); break;
      case 2: histogram<std::uint16_t>(base[t], target[t], k, hist); break;
      default: histogram<std::uint32_t>(base[t], target[t], k, hist); break;
    }
  }
  const std::uint64_t n = layout.numel();
  std::uint64_t within1 = 0, within2 = 0;
  for (const auto& [d, c] : hist) {
    if (std::llabs(d) <= 1) within1 += c;
    if (std::llabs(d) <= 2) within2 += c;
  }
  json r = {{"numel", n},
            {"changed", k},
            {"density", static_cast<double>(k) / static_cast<double>(n)},
            {"share_within_1_ulp", k ? static_cast<double>(within1) / static_cast<double>(k) : 0.0},
            {"share_within_2_ulp", k ? static_cast<double>(within2) / static_cast<double>(k) : 0.0},
            {"iid_floor_bits_per_change", iid_floor(n, k, hist)},
            {"encoders", measure_all(layout, base, target, k)}};
  const auto cf = class_floor(layout, base, target, k);
  double values_iid = 0;
  for (const auto& [d, c] : hist) values_iid -= static_cast<double>(c) / static_cast<double>(k) * std::log2(static_cast<double>(c) / static_cast<double>(k));
  r["class_floor_bits_per_change"] = cf.mask_given_class + values_iid;
  r["class_floor_values_given_class_bits_per_change"] = cf.mask_given_class + cf.values_given_class;
  r["class_floor_positions_bits_per_change"] = cf.mask_given_class;
  const auto z = zstd19_xor_bytes(layout, base, target);
  r["zstd19_xor_bytes"] = z;
  r["zstd19_xor_bits_per_change"] = k ? 8.0 * static_cast<double>(z) / static_cast<double>(k) : 0.0;
  if (flat_changes) {
    const auto pulse = ss::bench::pulse_style_bytes(layout, *flat_changes);
    r["pulse_style_bytes"] = pulse;
    r["pulse_style_bits_per_change"] = 8.0 * static_cast<double>(pulse) / static_cast<double>(k);
  }
  return r;
}

void print_rows(const json& step, const char* label) {
  std::printf("%s: %llu changed of %llu (%.3f%%), floors: class %.2f, class+values %.2f, zstd-19 xor %.2f; i.i.d. floor %.2f bits/change",
              label, step["changed"].get<unsigned long long>(), step["numel"].get<unsigned long long>(), 100.0 * step["density"].get<double>(),
              step["class_floor_bits_per_change"].get<double>(), step["class_floor_values_given_class_bits_per_change"].get<double>(),
              step["zstd19_xor_bits_per_change"].get<double>(), step["iid_floor_bits_per_change"].get<double>());
  if (step.contains("pulse_style_bits_per_change")) std::printf(", PULSE-style %.2f", step["pulse_style_bits_per_change"].get<double>());
  std::printf("\n");
  for (const auto& e : step["encoders"])
    std::printf("  %-7s %-8s %7.2f bits/change (data %5.2f) %7.1fx  encode %6.3f GB/s  apply+verify %6.3f GB/s\n", e["encoder"].get<std::string>().c_str(),
                e["values"].get<std::string>().c_str(), e["bits_per_change"].get<double>(), e["chunk_data_bits_per_change"].get<double>(),
                e["ratio_vs_dense"].get<double>(),
                e["encode_gbps_of_weights"].get<double>(), e["apply_verify_gbps_of_weights"].get<double>());
}

// ---- --throughput: one-core throughput only -------------------------------------------------------------

// Median seconds of `reps` calls of f.
template <class F>
double time_median(int reps, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    f();
    t.push_back(now_s() - t0);
  }
  return median(t);
}

template <class Sel>
json e2e_throughput(const ss::model_layout& layout, std::span<const ss::const_tensor_view> base, std::span<const ss::const_tensor_view> target,
                    int reps) {
  ss::patch_options o;
  o.encode.mode = ss::value_mode::ulp;
  std::vector<unsigned char> patch;
  const double enc = time_median(reps, [&] { patch = ss::encode_patch<Sel>(layout, base, target, o); });
  // Every bucket of a patch_encoder into `out`, then its header.
  const auto encode_all = [](ss::patch_encoder<Sel>& e, std::vector<unsigned char>& out) {
    out.clear();
    e.prologue(out);
    while (e.next_bucket() < e.bucket_count()) e.encode_next(out);
    e.final_header(out.data());
  };
  // As a sync sender encodes it (host_source): the base is its snapshot of the version it sent last, whose bucket
  // checksums it recorded then, so the base is compared, not hashed. Same bytes.
  std::vector<std::uint64_t> known_buckets;
  std::vector<unsigned char> patch_known;
  {
    ss::patch_encoder<Sel> same(layout, base, base, o);  // (untimed: the checksums the sender kept)
    encode_all(same, patch_known);
    known_buckets = same.bucket_target_checksums();
  }
  const double enc_known = time_median(reps, [&] {
    ss::patch_encoder<Sel> e(layout, base, target, o);
    e.use_known_base_checksums(known_buckets);
    encode_all(e, patch_known);
  });
  if (patch_known != patch) throw ss::error(ss::errc::target_mismatch, "throughput: the known-base encode wrote other bytes");
  std::vector<std::uint16_t> flat(layout.numel());
  std::vector<ss::tensor_view> views(layout.size());
  for (std::size_t t = 0; t < layout.size(); ++t) views[t] = {flat.data() + layout.first_element(t), layout[t].numel(), layout[t].dtype};
  // The median apply of the patch onto a fresh copy of the base, which must then equal the target.
  const auto time_apply = [&](const ss::apply_options& opt, const char* what) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      for (std::size_t i = 0; i < layout.size(); ++i) std::memcpy(views[i].data, base[i].data, layout[i].bytes());
      const double t0 = now_s();
      ss::apply_patch(patch, layout, views, opt);
      t.push_back(now_s() - t0);
    }
    for (std::size_t i = 0; i < layout.size(); ++i)
      if (std::memcmp(views[i].data, target[i].data, layout[i].bytes()) != 0) throw ss::error(ss::errc::target_mismatch, what);
    return median(t);
  };
  const double apply = time_apply({}, "throughput round trip");
  // As a sync receiver applies it (host_sink): it holds the checksum of the version it last verified, so the
  // patch's base is proven by comparing checksums instead of hashing every base element.
  ss::apply_options known;
  known.known_base_checksum = ss::model_checksum(layout, base);
  const double apply_known = time_apply(known, "throughput round trip (known base)");
  const double dense = static_cast<double>(layout.bytes());
  return {{"encoder", std::string(Sel::name)},
          {"encode_gbps", dense / enc / 1e9},
          {"encode_known_base_gbps", dense / enc_known / 1e9},
          {"apply_verify_gbps", dense / apply / 1e9},
          {"apply_verify_known_base_gbps", dense / apply_known / 1e9}};
}

// Every chunk of a patch as an encoder sees it: changes, base, and the data the patch carries for it.
struct bench_chunk {
  std::vector<std::uint32_t> positions;
  std::vector<std::uint16_t> values, base;
  std::uint32_t numel = 0;
};

std::vector<bench_chunk> chunks_of(std::span<const unsigned char> patch, const ss::model_layout& layout, std::span<const ss::const_tensor_view> base) {
  ss::patch_prologue pro;
  if (auto s = ss::parse_patch_prologue(patch, pro); !s) throw ss::error(s.code(), s.message());
  std::vector<bench_chunk> out;
  std::size_t at = pro.bytes;
  for (std::uint32_t b = 0; b < pro.header.bucket_count; ++b) {
    ss::bucket_view v;
    if (auto s = ss::parse_bucket(patch.subspan(at), v); !s) throw ss::error(s.code(), s.message());
    const auto starts = ss::detail::segment_starts(v.segments);
    const std::uint64_t chunk = std::uint64_t{1} << v.header.log2_chunk;
    for (std::uint32_t c = 0; c < v.header.chunk_count; ++c) {
      bench_chunk k;
      const std::uint64_t first = c * chunk;
      k.numel = static_cast<std::uint32_t>(std::min(chunk, v.header.numel - first));
      ss::detail::for_each_run(layout, v.segments, starts, first, k.numel, [&](const ss::detail::bucket_run& r) {
        const auto* p = static_cast<const std::uint16_t*>(base[r.tensor].data) + r.tensor_offset;
        k.base.insert(k.base.end(), p, p + r.count);
      });
      ss::chunk_context<std::uint16_t> ctx;
      ctx.numel = k.numel;
      ctx.changes = v.chunks[c].changes;
      ctx.mode = v.header.mode;
      ctx.base = k.base;
      if (auto s = ss::entropy::decode<std::uint16_t>(v.data.subspan(v.chunk_offsets[c], v.chunks[c].data_bytes), ctx, k.positions, k.values); !s)
        throw ss::error(s.code(), s.message());
      out.push_back(std::move(k));
    }
    at += v.frame_bytes;
  }
  return out;
}

// The chunk codec alone: encode every chunk, then decode every chunk (base given), medians of reps.
template <class E>
json codec_throughput(const std::vector<bench_chunk>& chunks, std::uint64_t model_bytes, int reps) {
  std::vector<std::vector<unsigned char>> data(chunks.size());
  auto in_of = [&](const bench_chunk& k) {
    ss::chunk_changes<std::uint16_t> in;
    in.numel = k.numel;
    in.mode = ss::value_mode::ulp;
    in.positions = k.positions;
    in.values = k.values;
    in.base = k.base;
    return in;
  };
  const double enc = time_median(reps, [&] {
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      data[c].clear();
      E::template encode<std::uint16_t>(in_of(chunks[c]), data[c]);
    }
  });
  std::vector<std::uint32_t> pos;
  std::vector<std::uint16_t> val;
  bool same = true;
  const double dec = time_median(reps, [&] {
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      ss::chunk_context<std::uint16_t> ctx;
      ctx.numel = chunks[c].numel;
      ctx.changes = static_cast<std::uint32_t>(chunks[c].positions.size());
      ctx.mode = ss::value_mode::ulp;
      ctx.base = chunks[c].base;
      if (auto s = E::template decode<std::uint16_t>(data[c], ctx, pos, val); !s) throw ss::error(s.code(), s.message());
      same = same && pos == chunks[c].positions && val == chunks[c].values;
    }
  });
  if (!same) throw ss::error(ss::errc::target_mismatch, "codec round trip");
  const double dense = static_cast<double>(model_bytes);
  return {{"encoder", std::string(E::name)}, {"encode_gbps", dense / enc / 1e9}, {"decode_gbps", dense / dec / 1e9}};
}

// Parts every encoder's end-to-end path pays: the element hash of a whole model (encode hashes the base;
// apply hashes the base and the changes) and the diff scan.
json shared_throughput(const ss::model_layout& layout, std::span<const ss::const_tensor_view> base, std::span<const ss::const_tensor_view> target,
                       int reps) {
  std::uint64_t sink = 0;
  const double hash = time_median(reps, [&] { sink += ss::model_checksum(layout, base); });
  std::vector<std::uint32_t> found;
  const double scan = time_median(reps, [&] {
    for (std::size_t t = 0; t < layout.size(); ++t) {
      found.resize(layout[t].numel() + 2);
      const auto* a = static_cast<const std::uint16_t*>(target[t].data);
      const auto* b = static_cast<const std::uint16_t*>(base[t].data);
      sink += static_cast<std::uint64_t>(ss::detail::find_differences(a, b, layout[t].numel(), found.data()) - found.data());
    }
  });
  const double dense = static_cast<double>(layout.bytes());
  return {{"model_checksum_gbps", dense / hash / 1e9}, {"diff_scan_gbps", dense / scan / 1e9}, {"sink", sink & 1}};
}

json throughput(const std::string& stream, int reps) {
  const auto s = ss::bench::load_update_stream(stream);
  json rows = json::array();
  std::vector<std::uint16_t> prev = s.base, next = s.base;
  for (std::size_t i = 0; i < s.steps.size(); ++i) {
    s.apply(i, next);
    if (i == 0 || i == 11 || i + 1 == s.steps.size()) {
      const auto bv = s.views(prev), tv = s.views(next);
      json r = {{"step", i + 1}, {"changed", s.steps[i].size()}, {"numel", s.layout.numel()}};
      r["end_to_end"] = {e2e_throughput<ss::rice>(s.layout, bv, tv, reps), e2e_throughput<ss::entropy>(s.layout, bv, tv, reps),
                         e2e_throughput<ss::auto_encoder>(s.layout, bv, tv, reps)};
      ss::patch_options o;
      o.encode.mode = ss::value_mode::ulp;
      const auto chunks = chunks_of(ss::encode_patch<ss::entropy>(s.layout, bv, tv, o), s.layout, bv);
      r["codec_alone"] = {codec_throughput<ss::rice>(chunks, s.layout.bytes(), reps), codec_throughput<ss::entropy>(chunks, s.layout.bytes(), reps)};
      r["shared"] = shared_throughput(s.layout, bv, tv, reps);
      std::printf("real step %zu (%zu changed):\n", i + 1, s.steps[i].size());
      for (const auto& e : r["end_to_end"])
        std::printf("  end to end  %-8s encode %6.3f GB/s (known base %6.3f)  apply+verify %6.3f GB/s (known base %6.3f)\n",
                    e["encoder"].get<std::string>().c_str(), e["encode_gbps"].get<double>(), e["encode_known_base_gbps"].get<double>(),
                    e["apply_verify_gbps"].get<double>(), e["apply_verify_known_base_gbps"].get<double>());
      for (const auto& e : r["codec_alone"])
        std::printf("  codec alone %-8s encode %6.3f GB/s  decode       %6.3f GB/s\n", e["encoder"].get<std::string>().c_str(),
                    e["encode_gbps"].get<double>(), e["decode_gbps"].get<double>());
      std::printf("  shared: model checksum %6.3f GB/s, diff scan %6.3f GB/s\n", r["shared"]["model_checksum_gbps"].get<double>(),
                  r["shared"]["diff_scan_gbps"].get<double>());
      std::fflush(stdout);
      rows.push_back(std::move(r));
    }
    prev = next;
  }
  double load[3] = {0, 0, 0};
  if (std::ifstream la("/proc/loadavg"); la) la >> load[0] >> load[1] >> load[2];
  return {{"stream", std::filesystem::path(stream).filename().string()}, {"reps", reps}, {"steps", rows}, {"loadavg_after", {load[0], load[1], load[2]}}};
}

}  // namespace

int main(int argc, char** argv) try {
  flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--stream") f.stream = argv[i + 1];
    else if (a == "--gen-elements") f.gen_elements = std::stoull(argv[i + 1]);
    else if (a == "--gen-steps") f.gen_steps = std::stoi(argv[i + 1]);
    else if (a == "--out") f.out = argv[i + 1];
    else if (a == "--density-sweep") f.sweep_elements = std::stoull(argv[i + 1]);
    else if (a == "--throughput") f.throughput_reps = std::stoi(argv[i + 1]);
    else if (a == "--walk") {  // the entropy decoder's placing walk: auto, or scalar (no vector path) to compare the two
      const std::string w = argv[i + 1];
      if (w != "auto" && w != "scalar") throw std::invalid_argument("--walk takes auto or scalar");
      ss::entropy::placing_walk() = w == "scalar" ? ss::entropy::walk_mode::scalar : ss::entropy::walk_mode::automatic;
    }
    else throw std::invalid_argument("unknown option " + a);
  }
  json result = {{"benchmark", "cpu-codec"},
                 {"machine", {{"cpu", cpu_name()}, {"hardware_threads", std::thread::hardware_concurrency()}}},
                 {"timestamp_unix", static_cast<long long>(std::time(nullptr))},
                 {"threads_used", 1}};
  if (f.throughput_reps > 0) {
    result["throughput"] = throughput(f.stream, f.throughput_reps);
    std::ofstream(f.out) << result.dump(1) << "\n";
    std::printf("wrote %s\n", f.out.c_str());
    return 0;
  }

  if (std::filesystem::exists(std::filesystem::path(f.stream) / "patches.bin")) {
    const auto s = ss::bench::load_update_stream(f.stream);
    json steps = json::array();
    std::vector<std::uint16_t> prev = s.base, next = s.base;
    for (std::size_t i = 0; i < s.steps.size(); ++i) {
      s.apply(i, next);
      auto r = step_record(s.layout, s.views(prev), s.views(next), &s.steps[i]);
      r["step"] = i + 1;
      if (i == 0 || i == 11 || i + 1 == s.steps.size()) print_rows(r, ("real stream step " + std::to_string(i + 1)).c_str());
      steps.push_back(std::move(r));
      prev = next;
    }
    result["real_stream"] = {{"path", std::filesystem::path(f.stream).filename().string()}, {"steps", steps}};
  } else {
    std::printf("real stream not found at %s: skipped\n", f.stream.c_str());
  }

  if (f.sweep_elements) {
    // Densities 0.3%..10%: one GPT-shaped model of about sweep_elements parameters, one learning rate each,
    // step 3 measured (Adam's first steps are denser).
    const auto layout = ss::gen::make_gpt_like_layout(512, std::max<std::uint64_t>(1, f.sweep_elements / (12 * 512 * 512)), 8000);
    json sweep = json::array();
    for (double lr : {1e-7, 2e-7, 5e-7, 1e-6, 2e-6, 5e-6}) {
      ss::gen::adam_bf16_options gopt;
      gopt.seed = 11;
      gopt.lr = lr;
      ss::gen::adam_bf16_model model(layout, gopt);
      model.step();
      model.step();
      const auto before = model.snapshot();
      model.step();
      std::vector<std::pair<std::uint32_t, std::uint16_t>> flat;
      const auto bv = before.views();
      const auto tv = model.views();
      for (std::size_t t = 0; t < layout.size(); ++t) {
        const auto* a = static_cast<const std::uint16_t*>(bv[t].data);
        const auto* b = static_cast<const std::uint16_t*>(tv[t].data);
        for (std::uint64_t i = 0; i < layout[t].numel(); ++i)
          if (a[i] != b[i]) flat.push_back({static_cast<std::uint32_t>(layout.first_element(t) + i), b[i]});
      }
      auto r = step_record(layout, bv, tv, &flat);
      r["lr"] = lr;
      r["step"] = 3;
      char label[64];
      std::snprintf(label, sizeof label, "generator lr %g step 3", lr);
      print_rows(r, label);
      sweep.push_back(std::move(r));
    }
    result["density_sweep"] = {{"layout", "gpt2-like hidden 512, vocab 8000"}, {"numel", layout.numel()}, {"steps", sweep}};
  }

  // The generator at scale: a GPT-shaped model of about gen_elements parameters.
  const std::uint64_t hidden = 1024;
  const std::uint64_t vocab = 32000;
  const std::uint64_t per_layer = 12 * hidden * hidden;
  const std::uint64_t layers = std::max<std::uint64_t>(1, (f.gen_elements > vocab * hidden ? f.gen_elements - vocab * hidden : 0) / per_layer);
  const auto layout = ss::gen::make_gpt_like_layout(hidden, layers, vocab);
  ss::gen::adam_bf16_options gopt;
  gopt.seed = 7;
  gopt.lr = 1e-6;
  ss::gen::adam_bf16_model model(layout, gopt);
  json gen_steps = json::array();
  for (int step = 1; step <= f.gen_steps; ++step) {
    const auto before = model.snapshot();
    model.step();
    auto r = step_record(layout, before.views(), model.views(), nullptr);
    r["step"] = step;
    print_rows(r, ("generator step " + std::to_string(step)).c_str());
    gen_steps.push_back(std::move(r));
  }
  result["generator"] = {{"layout", "gpt2-like hidden " + std::to_string(hidden) + ", layers " + std::to_string(layers) + ", vocab " +
                                        std::to_string(vocab)},
                         {"numel", layout.numel()},
                         {"lr", gopt.lr},
                         {"steps", gen_steps}};
  std::ofstream(f.out) << result.dump(1) << "\n";
  std::printf("wrote %s\n", f.out.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "codec_bench: %s\n", e.what());
  return 1;
}
