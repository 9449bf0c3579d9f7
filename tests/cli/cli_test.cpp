// The `sparsesync` command-line tool, driven as a separate process on generated safetensors checkpoints:
// byte-identical round trips for every encoder x value mode over bf16/f16/f32 tensors, inspect's JSON,
// and refusals (wrong base, other layout, damaged or truncated patches) that leave no output behind.
#include "cli_support.hpp"

#include <sparsesync/gen/adam_bf16.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

using namespace cli_test;
namespace ss = sparsesync;

namespace {

// Tensors of every CLI dtype, in an order the builder can align (wider elements first), with an empty
// tensor, a scalar and sizes that are not multiples of 8, 32 or a chunk.
ss::model_layout test_layout() {
  return ss::model_layout({
      {"model.norm.weight", ss::dtype::f32, {1000}},
      {"lm_head.bias", ss::dtype::f32, {37}},
      {"model.embed.weight", ss::dtype::bf16, {515, 131}},
      {"model.empty", ss::dtype::bf16, {0, 7}},
      {"model.layers.0.mlp.weight", ss::dtype::bf16, {257, 300}},
      {"model.layers.0.scale", ss::dtype::bf16, {}},
      {"model.layers.0.attn.weight", ss::dtype::f16, {129, 65}},
      {"model.layers.0.attn.bias", ss::dtype::f16, {65}},
  });
}

// BASE = the model after one AdamW step at lr 1e-6, NEW = after the next: a realistic sparse update
// (a few % of bf16 elements move by +-1..2 ULP, f16 more, f32 all).
struct pair_files {
  fs::path base, next;
};

pair_files make_pair(const temp_dir& dir, std::uint64_t seed = 11) {
  ss::gen::adam_bf16_options o;
  o.seed = seed;
  o.lr = 1e-6;
  o.threads = 1;
  ss::gen::adam_bf16_model m(test_layout(), o);
  m.step();
  pair_files p{dir / "base.safetensors", dir / "new.safetensors"};
  auto v = m.views();
  write_checkpoint(p.base, m.layout(), v, {{"format", "pt"}});
  m.step();
  v = m.views();
  write_checkpoint(p.next, m.layout(), v, {{"format", "pt"}, {"step", "2"}});
  return p;
}

bool no_temp_files(const temp_dir& dir) {
  for (const auto& e : dir.entries())
    if (e.find(".tmp") != std::string::npos || e.find("tmp.") != std::string::npos) return false;
  return true;
}

// Every encoder_table row by its CLI name, then auto.
const std::vector<std::string> encoders = [] {
  std::vector<std::string> v;
  for (const auto& row : sparsesync::encoder_table) v.emplace_back(row.name);
  v.emplace_back("auto");
  return v;
}();

}  // namespace

TEST_CASE("diff + apply reproduce NEW byte for byte: every encoder x value mode, bf16/f16/f32") {
  temp_dir dir;
  const auto p = make_pair(dir);
  const auto expected = read_bytes(p.next);
  const std::uint64_t changed = count_changes(p.base, p.next);
  const std::uint64_t numel = test_layout().numel();
  REQUIRE(changed > 0);
  REQUIRE(changed < numel);
  MESSAGE("generated update: " << changed << " of " << numel << " elements changed");

  int combo = 0;
  for (const std::string mode : {"absolute", "ulp"}) {
    for (const auto& enc : encoders) {
      CAPTURE(enc);
      CAPTURE(mode);
      // Vary the bucketing too: several buckets with tensors split across them, and chunk sizes 2^8..2^16.
      const std::string bucket = (combo % 2) ? "32KiB" : "268435456";
      const std::string chunk = std::to_string(std::array{8, 10, 16}[combo % 3]);
      ++combo;
      const auto patch = dir / ("p-" + enc + "-" + mode + ".ssp");
      const auto out = dir / ("out-" + enc + "-" + mode + ".safetensors");
      auto r = run_cli({"diff", p.base.string(), p.next.string(), "-o", patch.string(), "--encoder", enc, "--values", mode,
                        "--bucket-bytes", bucket, "--chunk-log2", chunk},
                       dir.path);
      REQUIRE_MESSAGE(r.rc == 0, r.err);
      CHECK(r.err.empty());  // no progress bar when stderr is not a terminal
      CHECK(r.out.find("changed") != std::string::npos);
      r = run_cli({"apply", p.base.string(), patch.string(), "-o", out.string()}, dir.path);
      REQUIRE_MESSAGE(r.rc == 0, r.err);
      CHECK(r.err.empty());
      CHECK(read_bytes(out) == expected);

      r = run_cli({"inspect", patch.string(), "--json"}, dir.path);
      REQUIRE_MESSAGE(r.rc == 0, r.err);
      const auto j = nlohmann::json::parse(r.out);
      CHECK(j.at("numel").get<std::uint64_t>() == numel);
      CHECK(j.at("changed").get<std::uint64_t>() == changed);
      CHECK(j.at("payload_bytes").get<std::uint64_t>() == fs::file_size(patch));
      std::uint64_t bucket_numel = 0, bucket_changed = 0, frames = 0;
      std::set<std::string> names;
      for (const auto& b : j.at("buckets")) {
        bucket_numel += b.at("numel").get<std::uint64_t>();
        bucket_changed += b.at("changed").get<std::uint64_t>();
        frames += b.at("payload_bytes").get<std::uint64_t>();
        CHECK(b.at("value_mode") == mode);
        if (enc != "auto") CHECK(b.at("encoder") == enc);
        for (const auto& s : b.at("segments")) names.insert(s.at("name").get<std::string>());
      }
      CHECK(bucket_numel == numel);
      CHECK(bucket_changed == changed);
      CHECK(frames < fs::file_size(patch));
      CHECK(names.size() == 7);  // every tensor but the empty one
      fs::remove(out);
    }
  }
  CHECK(no_temp_files(dir));
}

TEST_CASE("auto is no larger than any of its encoders, and the CLI writes the library's exact patch") {
  temp_dir dir;
  const auto p = make_pair(dir, 5);
  std::map<std::string, std::uint64_t> sizes;
  for (const auto& enc : encoders) {
    const auto patch = dir / (enc + ".ssp");
    const auto r = run_cli({"diff", p.base.string(), p.next.string(), "-o", patch.string(), "--encoder", enc, "--bucket-bytes", "64KiB"}, dir.path);
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    sizes[enc] = fs::file_size(patch);
  }
  // With no link stated (no --link-gbps), auto chooses among its members that read no base (codec/registry.hpp).
  const auto members = []<class... Es>(ss::best_of<Es...>) {
    std::vector<std::string> out;
    ((Es::needs_base ? void() : out.push_back(std::string(Es::name))), ...);
    return out;
  }(ss::auto_encoder{});
  CHECK(members.size() == 4);
  for (const auto& enc : members) CHECK(sizes["auto"] <= sizes[enc]);

  // The same patch from the library, in process: the CLI adds nothing but NEW's header as metadata.
  const auto base = ss::tools::safetensors_file::read(p.base);
  const auto next = ss::tools::safetensors_file::read(p.next);
  ss::patch_options opt;
  opt.encode.mode = ss::value_mode::ulp;
  opt.metadata = next.header_bytes();
  const auto bv = base.views(), nv = next.views();
  const auto lib = ss::encode_patch<ss::auto_encoder>(base.layout(), bv, nv, opt, ss::fixed_bytes{64 << 10});
  CHECK(read_bytes(dir / "auto.ssp") == lib);

  // With the link's speed stated, auto weighs entropy too (format/link_cost.hpp), as the library does; the patch
  // applies bit for bit. Over 0.1 Gb/s to GPU receivers entropy's walk counts for little: auto is no larger than
  // any single encoder's patch but by the walks of the buckets entropy did not take.
  for (const std::string receivers : {"gpu", "cpu"}) {
    CAPTURE(receivers);
    const auto linked = dir / ("auto-link-" + receivers + ".ssp");
    auto r = run_cli({"diff", p.base.string(), p.next.string(), "-o", linked.string(), "--bucket-bytes", "64KiB", "--link-gbps", "0.1",
                      "--receivers", receivers},
                     dir.path);
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    ss::patch_options lo = opt;
    lo.encode.link = ss::link_cost::gigabits(0.1, receivers == "gpu" ? ss::link_cost::gpu_receiver : ss::link_cost::cpu_receiver);
    CHECK(read_bytes(linked) == ss::encode_patch<ss::auto_encoder>(base.layout(), bv, nv, lo, ss::fixed_bytes{64 << 10}));
    if (receivers == "gpu") CHECK(fs::file_size(linked) < sizes["auto"]);
    const auto out = dir / ("auto-link-" + receivers + ".safetensors");
    r = run_cli({"apply", p.base.string(), linked.string(), "-o", out.string()}, dir.path);
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(read_bytes(out) == read_bytes(p.next));
  }
}

TEST_CASE("inspect: text report, JSON totals, versions and checksums") {
  temp_dir dir;
  const auto p = make_pair(dir);
  const auto patch = dir / "p.ssp";
  auto r = run_cli({"diff", p.base.string(), p.next.string(), "-o", patch.string(), "--base-version", "41", "--target-version", "42",
                    "--bucket-bytes", "100k"},
                   dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  r = run_cli({"inspect", patch.string(), "--json"}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const auto j = nlohmann::json::parse(r.out);  // exactly one JSON object
  CHECK(j.at("base_version") == 41);
  CHECK(j.at("target_version") == 42);
  CHECK(j.at("tensors") == 8);
  CHECK(j.at("dense_bytes").get<std::uint64_t>() == test_layout().bytes());
  CHECK(j.at("bucket_count").get<std::size_t>() == j.at("buckets").size());
  CHECK(j.at("buckets").size() > 2);
  CHECK(j.at("base_checksum").get<std::string>().size() == 18);
  const double bits = j.at("bits_per_changed").get<double>();
  CHECK(bits == doctest::Approx(8.0 * static_cast<double>(fs::file_size(patch)) / j.at("changed").get<double>()));
  CHECK(j.at("target_header").at("form") == "stored");  // NEW's header differs from BASE's (its metadata says step 2)
  CHECK(j.at("target_header").at("bytes").get<std::uint64_t>() == ss::tools::safetensors_file::read(p.next).header_bytes().size());
  std::set<std::string> dtypes;
  for (const auto& b : j.at("buckets")) dtypes.insert(b.at("dtype").get<std::string>());
  CHECK(dtypes == std::set<std::string>{"bf16", "f16", "f32"});

  r = run_cli({"inspect", patch.string()}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.out.find("model.embed.weight") != std::string::npos);
  CHECK(r.out.find("bits/changed element") != std::string::npos);
  CHECK(r.out.find("41 -> 42") != std::string::npos);
}

TEST_CASE("apply refuses a wrong BASE and writes nothing; an existing OUT is left untouched") {
  temp_dir dir;
  const auto p = make_pair(dir);
  const auto patch = dir / "p.ssp";
  REQUIRE(run_cli({"diff", p.base.string(), p.next.string(), "-o", patch.string()}, dir.path).rc == 0);
  const auto out = dir / "out.safetensors";

  // NEW as the base: same layout, other contents.
  auto r = run_cli({"apply", p.next.string(), patch.string(), "-o", out.string()}, dir.path);
  CHECK(r.rc == 4);
  CHECK(r.err.find("not the patch's base") != std::string::npos);
  CHECK(!fs::exists(out));

  // A base from another run (other seed), and a base one element away from the right one.
  temp_dir other;
  const auto q = make_pair(other, 99);
  r = run_cli({"apply", q.base.string(), patch.string(), "-o", out.string()}, dir.path);
  CHECK(r.rc == 4);
  CHECK(!fs::exists(out));
  auto tweaked = read_bytes(p.base);
  tweaked[tweaked.size() - 1] ^= 0x01;  // last element's low byte
  write_bytes(dir / "tweaked.safetensors", tweaked);
  r = run_cli({"apply", (dir / "tweaked.safetensors").string(), patch.string(), "-o", out.string()}, dir.path);
  CHECK(r.rc == 4);
  CHECK(!fs::exists(out));

  // An existing OUT survives a refused apply unchanged.
  const std::vector<unsigned char> sentinel{'k', 'e', 'e', 'p'};
  write_bytes(out, sentinel);
  r = run_cli({"apply", p.next.string(), patch.string(), "-o", out.string()}, dir.path);
  CHECK(r.rc == 4);
  CHECK(read_bytes(out) == sentinel);
  CHECK(no_temp_files(dir));

  // Applying in place (OUT = BASE) turns BASE into NEW.
  const auto copy = dir / "inplace.safetensors";
  fs::copy_file(p.base, copy);
  r = run_cli({"apply", copy.string(), patch.string(), "-o", copy.string()}, dir.path);
  CHECK_MESSAGE(r.rc == 0, r.err);
  CHECK(read_bytes(copy) == read_bytes(p.next));
  CHECK(no_temp_files(dir));
}

TEST_CASE("layouts must match: diff names the first difference, apply refuses another layout") {
  temp_dir dir;
  const auto p = make_pair(dir);
  const auto base = ss::tools::safetensors_file::read(p.base);
  auto tensors = base.layout().tensors();
  const auto views = base.views();

  struct variant {
    const char* what;
    std::vector<ss::tensor_info> tensors;
    std::vector<ss::const_tensor_view> views;
    const char* expect;
  };
  std::vector<variant> variants;
  {
    auto t = tensors;
    t[4].name = "model.layers.0.mlp.weight_renamed";
    variants.push_back({"renamed", t, views, "mlp.weight_renamed"});
  }
  {
    auto t = tensors;
    t[4].shape = {300, 257};  // same size, other shape
    variants.push_back({"reshaped", t, views, "[300,257]"});
  }
  {
    auto t = tensors;
    auto v = views;
    t.pop_back();
    v.pop_back();
    variants.push_back({"missing tensor", t, v, "8 tensors"});
  }
  {
    auto t = tensors;
    auto v = views;
    std::swap(t[6], t[7]);
    std::swap(v[6], v[7]);
    variants.push_back({"reordered", t, v, "attn.bias"});
  }
  const auto patch = dir / "p.ssp";
  REQUIRE(run_cli({"diff", p.base.string(), p.next.string(), "-o", patch.string()}, dir.path).rc == 0);
  for (const auto& v : variants) {
    CAPTURE(v.what);
    const auto other = dir / "other.safetensors";
    const ss::model_layout layout(v.tensors);
    write_checkpoint(other, layout, v.views);
    auto r = run_cli({"diff", p.base.string(), other.string(), "-o", (dir / "x.ssp").string()}, dir.path);
    CHECK(r.rc == 4);
    CHECK_MESSAGE(r.err.find(v.expect) != std::string::npos, r.err);
    CHECK(!fs::exists(dir / "x.ssp"));
    r = run_cli({"apply", other.string(), patch.string(), "-o", (dir / "out.safetensors").string()}, dir.path);
    CHECK(r.rc == 4);
    CHECK(r.err.find("layout") != std::string::npos);
    CHECK(!fs::exists(dir / "out.safetensors"));
  }
  CHECK(no_temp_files(dir));
}

TEST_CASE("damaged patches: bit flips anywhere and truncations are refused, nothing is written") {
  temp_dir dir;
  const auto p = make_pair(dir);
  const auto good_path = dir / "good.ssp";
  // Small buckets and chunks: many frames, tables and chunk boundaries to hit.
  REQUIRE(run_cli({"diff", p.base.string(), p.next.string(), "-o", good_path.string(), "--bucket-bytes", "64KiB", "--chunk-log2", "12"},
                  dir.path)
              .rc == 0);
  const auto good = read_bytes(good_path);
  const auto bad = dir / "bad.ssp";
  const auto out = dir / "out.safetensors";
  std::uint64_t runs = 0;
  auto refused = [&](const std::vector<unsigned char>& patch, int expect_rc) {
    write_bytes(bad, patch);
    const auto r = run_cli({"apply", p.base.string(), bad.string(), "-o", out.string()}, dir.path);
    ++runs;
    CHECK(r.rc == expect_rc);
    CHECK(!r.err.empty());
    CHECK(!fs::exists(out));
    return r;
  };

  // Bit flips: every byte of the patch header, then positions spread over the whole file (layout section,
  // stored NEW header, bucket headers, segment and chunk tables, chunk data), a different bit each time.
  std::vector<std::size_t> positions;
  for (std::size_t i = 0; i < 88; ++i) positions.push_back(i);
  const std::size_t step = std::max<std::size_t>(1, good.size() / 300);
  for (std::size_t i = 88; i < good.size(); i += step) positions.push_back(i);
  positions.push_back(good.size() - 1);
  for (std::size_t k = 0; k < positions.size(); ++k) {
    auto patch = good;
    patch[positions[k]] ^= static_cast<unsigned char>(1u << (k % 8));
    CAPTURE(positions[k]);
    refused(patch, 3);
  }
  // Truncations, from empty to one byte short.
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{8}, std::size_t{87}, std::size_t{88}, std::size_t{89}, good.size() / 3,
                        good.size() / 2, good.size() - 9, good.size() - 1}) {
    CAPTURE(n);
    refused(std::vector<unsigned char>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)), 3);
  }
  // Trailing garbage, and a whole second copy.
  {
    auto patch = good;
    patch.push_back(0);
    refused(patch, 3);
    patch = good;
    patch.insert(patch.end(), good.begin(), good.end());
    refused(patch, 3);
  }
  // inspect reports damage the same way.
  {
    auto patch = good;
    patch[good.size() / 2] ^= 0x10;
    write_bytes(bad, patch);
    const auto r = run_cli({"inspect", bad.string(), "--json"}, dir.path);
    CHECK(r.rc == 3);
    CHECK(r.out.empty());
    CHECK(!r.err.empty());
  }
  MESSAGE(runs << " damaged patches refused");
  CHECK(no_temp_files(dir));
  // The undamaged patch still applies (the refusals were not for another reason).
  const auto r = run_cli({"apply", p.base.string(), good_path.string(), "-o", out.string()}, dir.path);
  CHECK(r.rc == 0);
  CHECK(read_bytes(out) == read_bytes(p.next));
}

TEST_CASE("NEW's header is reproduced exactly: key order, whitespace and metadata of a hand-written file") {
  temp_dir dir;
  const auto p = make_pair(dir);
  const auto base = ss::tools::safetensors_file::read(p.base);
  const auto next = ss::tools::safetensors_file::read(p.next);
  // NEW rewritten with its JSON keys in reverse data order, __metadata__ last, spaces and no padding to 8.
  const auto& layout = next.layout();
  std::string json = "{ ";
  for (std::size_t i = layout.size(); i-- > 0;) {
    const auto& t = layout[i];
    json += "\"" + t.name + "\": {\"dtype\": \"" + std::string(ss::tools::safetensors_dtype_name(t.dtype)) + "\", \"shape\": [";
    for (std::size_t d = 0; d < t.shape.size(); ++d) json += (d ? ", " : "") + std::to_string(t.shape[d]);
    json += "], \"data_offsets\": [" + std::to_string(next.header().offsets[i]) + ", " + std::to_string(next.header().offsets[i + 1]) + "]}, ";
  }
  json += "\"__metadata__\": {\"note\": \"hand written\"}}";
  if ((8 + json.size()) % 8 == 0) json += " ";  // a data area that is not 8-aligned in the file: the reader copies
  std::vector<unsigned char> file(8);
  ss::detail::store_le<std::uint64_t>(file.data(), json.size());
  file.insert(file.end(), json.begin(), json.end());
  const auto data = next.data_area();
  file.insert(file.end(), data.begin(), data.end());
  const auto odd = dir / "odd.safetensors";
  write_bytes(odd, file);

  const auto patch = dir / "p.ssp";
  auto r = run_cli({"diff", p.base.string(), odd.string(), "-o", patch.string()}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const auto out = dir / "out.safetensors";
  r = run_cli({"apply", p.base.string(), patch.string(), "-o", out.string()}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(read_bytes(out) == file);
  // And the other way round: the hand-written file as BASE.
  r = run_cli({"diff", odd.string(), p.base.string(), "-o", patch.string()}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  r = run_cli({"apply", odd.string(), patch.string(), "-o", out.string()}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(read_bytes(out) == read_bytes(p.base));
  (void)base;
}

TEST_CASE("nothing changed, and everything changed") {
  temp_dir dir;
  const auto p = make_pair(dir);
  const auto patch = dir / "p.ssp";
  const auto out = dir / "out.safetensors";
  // BASE to itself: an empty change set still round-trips.
  auto r = run_cli({"diff", p.base.string(), p.base.string(), "-o", patch.string()}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  r = run_cli({"inspect", patch.string(), "--json"}, dir.path);
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(r.out).at("changed") == 0);
  CHECK(nlohmann::json::parse(r.out).at("bits_per_changed").is_null());
  r = run_cli({"apply", p.base.string(), patch.string(), "-o", out.string()}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(read_bytes(out) == read_bytes(p.base));

  // Every bit pattern flipped: every element changes (including -0/+0, NaN and Inf patterns).
  auto file = ss::tools::safetensors_file::read(p.base);
  for (auto& b : file.data_area()) b = static_cast<unsigned char>(~b);
  const auto flipped = dir / "flipped.safetensors";
  write_bytes(flipped, file.bytes());
  for (const std::string mode : {"absolute", "ulp"}) {
    r = run_cli({"diff", p.base.string(), flipped.string(), "-o", patch.string(), "--values", mode}, dir.path);
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    r = run_cli({"inspect", patch.string(), "--json"}, dir.path);
    REQUIRE(r.rc == 0);
    CHECK(nlohmann::json::parse(r.out).at("changed") == test_layout().numel());
    r = run_cli({"apply", p.base.string(), patch.string(), "-o", out.string()}, dir.path);
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(read_bytes(out) == read_bytes(flipped));
  }
}

TEST_CASE("usage and input errors have their documented exit codes") {
  temp_dir dir;
  const auto p = make_pair(dir);
  const auto patch = dir / "p.ssp";
  CHECK(run_cli({}, dir.path).rc == 1);
  CHECK(run_cli({"frobnicate"}, dir.path).rc == 1);
  CHECK(run_cli({"diff", p.base.string(), p.next.string()}, dir.path).rc == 1);  // no -o
  CHECK(run_cli({"diff", p.base.string(), p.next.string(), "-o", patch.string(), "--encoder", "zstd"}, dir.path).rc == 1);
  CHECK(run_cli({"diff", p.base.string(), p.next.string(), "-o", patch.string(), "--values", "relative"}, dir.path).rc == 1);
  CHECK(run_cli({"diff", p.base.string(), p.next.string(), "-o", patch.string(), "--chunk-log2", "7"}, dir.path).rc == 1);
  CHECK(run_cli({"diff", p.base.string(), p.next.string(), "-o", patch.string(), "--bucket-bytes", "0"}, dir.path).rc == 1);
  CHECK(run_cli({"diff", p.base.string(), p.next.string(), "-o", patch.string(), "--link-gbps", "-1"}, dir.path).rc == 1);
  CHECK(run_cli({"diff", p.base.string(), p.next.string(), "-o", patch.string(), "--link-gbps", "1", "--receivers", "tpu"}, dir.path).rc == 1);
  CHECK(!fs::exists(patch));
  const auto help = run_cli({"--help"}, dir.path);
  CHECK(help.rc == 0);
  CHECK(help.out.find("Exit codes") != std::string::npos);
  CHECK(run_cli({"--version"}, dir.path).rc == 0);

  // Missing files and files that are not safetensors: I/O errors.
  auto r = run_cli({"diff", (dir / "missing.safetensors").string(), p.next.string(), "-o", patch.string()}, dir.path);
  CHECK(r.rc == 2);
  CHECK(r.err.find("missing.safetensors") != std::string::npos);
  const std::vector<unsigned char> junk{'n', 'o', 't', ' ', 'a', ' ', 'f', 'i', 'l', 'e', ' ', 'a', 't', ' ', 'a', 'l', 'l'};
  write_bytes(dir / "junk.safetensors", junk);
  CHECK(run_cli({"diff", (dir / "junk.safetensors").string(), p.next.string(), "-o", patch.string()}, dir.path).rc == 2);
  CHECK(!fs::exists(patch));
  CHECK(run_cli({"inspect", (dir / "missing.ssp").string()}, dir.path).rc == 2);
  CHECK(run_cli({"inspect", (dir / "junk.safetensors").string()}, dir.path).rc == 3);  // not a patch
  // An output folder that does not exist: nothing is written, I/O error.
  CHECK(run_cli({"diff", p.base.string(), p.next.string(), "-o", (dir / "no" / "such" / "dir.ssp").string()}, dir.path).rc == 2);
  REQUIRE(run_cli({"diff", p.base.string(), p.next.string(), "-o", patch.string()}, dir.path).rc == 0);
  // Quiet: nothing on stdout.
  r = run_cli({"-q", "apply", p.base.string(), patch.string(), "-o", (dir / "out.safetensors").string()}, dir.path);
  CHECK(r.rc == 0);
  CHECK(r.out.empty());
  // An unsupported dtype in an input: refused with a message naming it.
  std::string json = R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})";
  std::vector<unsigned char> f(8);
  ss::detail::store_le<std::uint64_t>(f.data(), json.size());
  f.insert(f.end(), json.begin(), json.end());
  f.resize(f.size() + 16, 0);
  write_bytes(dir / "ints.safetensors", f);
  r = run_cli({"diff", (dir / "ints.safetensors").string(), (dir / "ints.safetensors").string(), "-o", patch.string()}, dir.path);
  CHECK(r.rc == 2);
  CHECK(r.err.find("I64") != std::string::npos);
}

TEST_CASE("NEW's header equal to BASE's is referenced, not stored; apply then requires BASE's header") {
  temp_dir dir;
  const auto p = make_pair(dir);
  // NEW with BASE's metadata: the two headers are byte-identical.
  const auto next = ss::tools::safetensors_file::read(p.next);
  const auto same = dir / "same.safetensors";
  auto nv = next.views();
  write_checkpoint(same, next.layout(), nv, {{"format", "pt"}});
  REQUIRE(ss::tools::safetensors_file::read(same).header_bytes().size() == ss::tools::safetensors_file::read(p.base).header_bytes().size());

  const auto ref = dir / "ref.ssp", full = dir / "full.ssp";
  auto r = run_cli({"diff", p.base.string(), same.string(), "-o", ref.string()}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  r = run_cli({"diff", p.base.string(), same.string(), "-o", full.string(), "--full-header"}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const auto header_size = ss::tools::safetensors_file::read(same).header_bytes().size();
  CHECK(fs::file_size(full) - fs::file_size(ref) == header_size - 16);
  r = run_cli({"inspect", ref.string(), "--json"}, dir.path);
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(r.out).at("target_header").at("form") == "same_as_base");
  CHECK(nlohmann::json::parse(r.out).at("metadata_bytes") == 16);

  const auto out = dir / "out.safetensors";
  for (const auto& patch : {ref, full}) {
    r = run_cli({"apply", p.base.string(), patch.string(), "-o", out.string()}, dir.path);
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(read_bytes(out) == read_bytes(same));
    fs::remove(out);
  }
  // BASE's tensors under another header (other metadata): the reference form refuses it, the stored form
  // still rebuilds NEW exactly.
  const auto base = ss::tools::safetensors_file::read(p.base);
  const auto rebadged = dir / "rebadged.safetensors";
  auto bv = base.views();
  write_checkpoint(rebadged, base.layout(), bv, {{"format", "pt"}, {"saved_by", "someone else"}});
  r = run_cli({"apply", rebadged.string(), ref.string(), "-o", out.string()}, dir.path);
  CHECK(r.rc == 4);
  CHECK(r.err.find("--full-header") != std::string::npos);
  CHECK(!fs::exists(out));
  r = run_cli({"apply", rebadged.string(), full.string(), "-o", out.string()}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(read_bytes(out) == read_bytes(same));
  CHECK(no_temp_files(dir));
}
