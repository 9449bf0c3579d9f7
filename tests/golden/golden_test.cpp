// The committed golden patches (data/, README.md) against today's encoder and decoder: a change to the wire
// bytes of any encoder, value mode or dtype fails here unless the files are regenerated with a version bump.
#include "golden_cases.hpp"
#include "temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

using namespace sparsesync;
using namespace sparsesync::golden;

namespace {

const std::filesystem::path golden_dir = SPARSESYNC_GOLDEN_DIR;

const golden_inputs& inputs(dtype t) {
  static std::map<dtype, golden_inputs> cache;
  auto it = cache.find(t);
  if (it == cache.end()) it = cache.emplace(t, make_golden_inputs(t)).first;
  return it->second;
}

// A missing file is a failure: the set of golden files is part of what they pin.
std::vector<unsigned char> load(const golden_case& c) {
  auto bytes = read_golden_file(golden_dir / c.file_name());
  REQUIRE_MESSAGE(bytes.has_value(), "missing golden file ", (golden_dir / c.file_name()).string(),
                  " (make_golden writes it, only with a format version bump: tests/golden/README.md)");
  return std::move(*bytes);
}

std::string first_difference(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  const auto n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return "first difference at byte " + std::to_string(i);
  return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size());
}

// Applies `patch` to a copy of the case's base; the copy and the verdict come back.
status apply_to_base(const golden_case& c, std::span<const unsigned char> patch, host_model& out) {
  out = inputs(c.type).base;
  auto views = out.mutable_views();
  return try_apply_patch(patch, out.layout, views);
}

// The members a best_of weighs with no link stated (the golden files state none): those that read no base.
template <class... Es>
std::vector<encoder_id> tie_order(best_of<Es...>) {
  std::vector<encoder_id> out;
  ((Es::needs_base ? void() : out.push_back(Es::id)), ...);
  return out;
}

}  // namespace

TEST_CASE("the golden cases cover every encoder, value mode and dtype, and the inputs have the intended shape") {
  const auto cases = golden_cases();
  std::set<std::string> names;
  for (const auto& c : cases) names.insert(c.file_name());
  CHECK(names.size() == cases.size());
  for (auto t : {dtype::bf16, dtype::f16, dtype::f32, dtype::f8_e4m3, dtype::f8_e5m2})
    for (auto m : {value_mode::absolute, value_mode::ulp}) {
      CHECK(names.count(golden_case{std::nullopt, m, t}.file_name()) == 1);
      for (const auto& row : encoder_table) CHECK(names.count(golden_case{row.id, m, t}.file_name()) == 1);
    }
  for (const auto& c : cases) {
    const auto& in = inputs(c.type);
    CHECK(in.base.get(0, 0) != in.target.get(0, 0));                 // first element changed
    CHECK(in.base.get(5, 0) != in.target.get(5, 0));                 // last element changed
    CHECK(in.base.tensors[3] == in.target.tensors[3]);               // "frozen" unchanged
    CHECK(in.base.tensors[0] != in.target.tensors[0]);
  }
}

TEST_CASE("golden files: re-encoding the inputs gives the committed bytes") {
  for (const auto& c : golden_cases()) {
    INFO(c.file_name());
    const auto want = load(c);
    const auto got = encode_golden(c, inputs(c.type));
    INFO(first_difference(want, got));
    CHECK(got == want);
  }
}

TEST_CASE("golden files: decoding the committed bytes onto the base gives the target bit for bit") {
  for (const auto& c : golden_cases()) {
    INFO(c.file_name());
    const auto patch = load(c);
    host_model rx = inputs(c.type).base;
    const auto s = apply_to_base(c, patch, rx);
    INFO(s.message());
    REQUIRE(s.ok());
    CHECK(rx == inputs(c.type).target);
  }
}

TEST_CASE("golden files: headers name the expected encoder, value mode, dtype, versions and sections") {
  for (const auto& c : golden_cases()) {
    INFO(c.file_name());
    const auto patch = load(c);
    patch_prologue pro;
    REQUIRE(parse_patch_prologue(patch, pro).ok());
    CHECK(pro.header.base_version == golden_base_version);
    CHECK(pro.header.target_version == golden_target_version);
    REQUIRE(pro.layout.has_value());
    CHECK(pro.layout->hash() == golden_layout(c.type).hash());
    CHECK(std::string_view(reinterpret_cast<const char*>(pro.metadata.data()), pro.metadata.size()) == golden_metadata);
    const auto buckets = golden_bucket_headers(patch);
    REQUIRE(buckets.has_value());
    CHECK(buckets->size() >= 2);
    bool multi_chunk = false;
    for (const auto& h : *buckets) {
      if (c.encoder) CHECK(h.encoder == *c.encoder);
      CHECK(is_builtin_encoder(static_cast<std::uint8_t>(h.encoder)));
      CHECK(h.mode == c.mode);
      CHECK(h.dtype == c.type);
      CHECK(h.log2_chunk == golden_log2_chunk);
      multi_chunk = multi_chunk || h.chunk_count > 1;
    }
    CHECK(multi_chunk);
  }
}

TEST_CASE("golden files: auto keeps, per bucket, the smallest payload of its members that read no base (ties in auto_encoder's order)") {
  const auto order = tie_order(auto_encoder{});
  std::set<encoder_id> chosen;
  for (const auto& c : golden_cases()) {
    if (c.encoder) continue;
    INFO(c.file_name());
    const auto picked = golden_bucket_headers(load(c));
    REQUIRE(picked.has_value());
    std::map<encoder_id, std::vector<bucket_header>> single;
    for (auto id : order) {
      const auto h = golden_bucket_headers(load({id, c.mode, c.type}));
      REQUIRE(h.has_value());
      REQUIRE(h->size() == picked->size());
      single[id] = *h;
    }
    for (std::size_t b = 0; b < picked->size(); ++b) {
      encoder_id best = order.front();
      for (auto id : order)
        if (single[id][b].data_bytes < single[best][b].data_bytes) best = id;
      INFO("bucket ", b);
      CHECK((*picked)[b].encoder == best);
      CHECK((*picked)[b].data_bytes == single[best][b].data_bytes);
      chosen.insert((*picked)[b].encoder);
    }
  }
  CHECK(chosen.size() >= 2);  // the inputs make auto choose between encoders, not pin one of them twice
}

TEST_CASE("the data directory holds exactly the golden files") {
  std::set<std::string> want;
  for (const auto& c : golden_cases()) want.insert(c.file_name());
  std::set<std::string> have;
  for (const auto& e : std::filesystem::directory_iterator(golden_dir)) have.insert(e.path().filename().string());
  CHECK(have == want);
}

TEST_CASE("a missing golden file reads as missing") {
  test::temp_dir dir;
  CHECK_FALSE(read_golden_file(dir / "raw-ulp-bf16.patch").has_value());
}

TEST_CASE("a golden file with one byte flipped is refused, and no longer matches the encoder") {
  test::temp_dir dir;
  splitmix64 rng{7};
  for (const auto& c : golden_cases()) {
    INFO(c.file_name());
    const auto original = load(c);
    // The first byte, the last one, and a few in between: headers, tables and chunk data.
    std::vector<std::size_t> at = {0, original.size() - 1};
    for (int i = 0; i < 4; ++i) at.push_back(rng.next() % original.size());
    for (auto pos : at) {
      INFO("byte ", pos);
      auto bytes = original;
      bytes[pos] ^= static_cast<unsigned char>(1u << (rng.next() % 8));
      const auto copy = dir / c.file_name();
      REQUIRE(write_golden_file(copy, bytes));
      const auto flipped = read_golden_file(copy);
      REQUIRE(flipped.has_value());
      CHECK(*flipped != encode_golden(c, inputs(c.type)));
      host_model rx = inputs(c.type).base;
      CHECK_FALSE(apply_to_base(c, *flipped, rx).ok());
      CHECK(rx == inputs(c.type).base);  // refused before anything was written
    }
  }
}
