// Damaged, truncated, lying and mismatched payloads are refused with a clear error and the model untouched.
#include "test_models.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace sparsesync;
using namespace sparsesync::test;

namespace {

struct fixture {
  host_model base{model_layout({{"w", dtype::bf16, {300, 70}}, {"b", dtype::bf16, {70}}, {"s", dtype::f32, {50}}})};
  host_model target = base;
  fixture() {
    fill_random(base, 1);
    target = base;
    perturb_ulp(target, 0.03, 2);
  }
};

status apply_copy(const host_model& base, std::span<const unsigned char> patch, bool& untouched) {
  host_model rx = base;
  auto v = rx.mutable_views();
  const auto s = try_apply_patch(patch, rx.layout, v);
  untouched = rx == base;
  return s;
}

template <class E>
void flip_every_bit_region(const fixture& f, value_mode mode) {
  const auto patch = make_patch<E>(f.base, f.target, mode, 10, fixed_bytes{8192});
  std::mt19937_64 rng(9);
  // Every bit of the first 400 bytes (headers and tables), then random bits everywhere.
  std::vector<std::size_t> bits;
  for (std::size_t i = 0; i < std::min<std::size_t>(400 * 8, patch.size() * 8); ++i) bits.push_back(i);
  for (int i = 0; i < 3000; ++i) bits.push_back(rng() % (patch.size() * 8));
  for (auto bit : bits) {
    auto bad = patch;
    bad[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    bool untouched = false;
    const auto s = apply_copy(f.base, bad, untouched);
    INFO("encoder ", E::name, " flipped bit ", bit, " of ", patch.size() * 8);
    REQUIRE_FALSE(s.ok());
    REQUIRE(untouched);
    REQUIRE_FALSE(s.message().empty());
  }
}

// Rewrites a header field and fixes its checksum, as a buggy or hostile sender would.
void patch_bucket_field(std::vector<unsigned char>& p, std::size_t bucket_at, std::size_t offset, std::uint64_t value, unsigned width) {
  for (unsigned i = 0; i < width; ++i) p[bucket_at + offset + i] = static_cast<unsigned char>(value >> (8 * i));
  detail::store_le<std::uint64_t>(p.data() + bucket_at + 72, stream_hash(p.data() + bucket_at, 72, 0));
}

std::size_t first_bucket_offset(std::span<const unsigned char> p) {
  patch_prologue pro;
  REQUIRE(parse_patch_prologue(p, pro).ok());
  return pro.bytes;
}

}  // namespace

TEST_CASE("single bit flips anywhere are refused, model untouched") {
  fixture f;
  flip_every_bit_region<raw_index32>(f, value_mode::absolute);
  flip_every_bit_region<bitmap>(f, value_mode::ulp);
  flip_every_bit_region<delta_varint>(f, value_mode::ulp);
  flip_every_bit_region<rice>(f, value_mode::ulp);
  flip_every_bit_region<rice>(f, value_mode::absolute);
}

TEST_CASE("every truncation and any trailing garbage are refused") {
  fixture f;
  const auto patch = make_patch<auto_encoder>(f.base, f.target, value_mode::ulp, 10, fixed_bytes{8192});
  for (std::size_t n = 0; n < patch.size(); n += (n < 600 ? 1 : 97)) {
    bool untouched = false;
    const auto s = apply_copy(f.base, std::span(patch).first(n), untouched);
    REQUIRE_FALSE(s.ok());
    REQUIRE(untouched);
  }
  auto longer = patch;
  longer.push_back(0);
  bool untouched = false;
  CHECK(apply_copy(f.base, longer, untouched).code() == errc::malformed);
  CHECK(untouched);
}

TEST_CASE("wrong base, wrong layout, and a patch applied twice are refused") {
  fixture f;
  const auto patch = make_patch<delta_varint>(f.base, f.target, value_mode::ulp);
  bool untouched = false;
  // Applying to the target (a second time) is a base mismatch.
  CHECK(apply_copy(f.target, patch, untouched).code() == errc::base_mismatch);
  CHECK(untouched);
  // One element of the base differs.
  host_model other = f.base;
  other.set(2, 7, other.get(2, 7) ^ 1);
  CHECK(apply_copy(other, patch, untouched).code() == errc::base_mismatch);
  CHECK(untouched);
  // Same sizes, another name.
  host_model renamed(model_layout({{"w", dtype::bf16, {300, 70}}, {"bias", dtype::bf16, {70}}, {"s", dtype::f32, {50}}}));
  renamed.tensors = f.base.tensors;
  CHECK(apply_copy(renamed, patch, untouched).code() == errc::layout_mismatch);
  CHECK(untouched);
  // A receiver that vouches for a wrong whole-model checksum.
  host_model rx = f.base;
  auto v = rx.mutable_views();
  apply_options opt;
  opt.known_base_checksum = 12345;
  CHECK(try_apply_patch(patch, rx.layout, v, opt).code() == errc::base_mismatch);
  CHECK(rx == f.base);
}

// entropy's decoder hashes the base while it counts its classes (apply.hpp): a wrong base is found only once
// the bucket decoded, and a decoder fed another base may fail in any way first; either way the receiver must
// hear "base mismatch". Weight-like values (BF16 of a normal, small ones changing more often), so that chunks
// take the class body.
TEST_CASE("an entropy patch applied to another base is a base mismatch") {
  host_model base(model_layout({{"w", dtype::bf16, {200, 300}}, {"b", dtype::bf16, {300}}}));
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (std::size_t t = 0; t < base.layout.size(); ++t)
    for (std::uint64_t i = 0; i < base.layout[t].numel(); ++i) {
      const float x = normal(rng);
      std::uint32_t u = 0;
      std::memcpy(&u, &x, 4);
      base.set(t, i, u >> 16);
    }
  host_model target = base;
  for (std::uint64_t i = 0; i < base.layout[0].numel(); ++i) {
    std::uint32_t u = base.get(0, i) << 16;
    float x = 0;
    std::memcpy(&x, &u, 4);
    if (std::uniform_real_distribution<double>(0, 1)(rng) < std::min(0.5, 0.00005 / (std::fabs(x) + 1e-6)))
      target.set(0, i, apply_ulp_delta<std::uint16_t>(static_cast<std::uint16_t>(base.get(0, i)), (rng() & 1) ? 1 : 0xFFFF));
  }
  const auto patch = make_patch<entropy>(base, target, value_mode::ulp);
  REQUIRE(patch.size() < make_patch<rice>(base, target, value_mode::ulp).size());  // class bodies taken
  bool untouched = false;
  host_model rx = base;
  auto v = rx.mutable_views();
  REQUIRE(try_apply_patch(patch, rx.layout, v).ok());
  CHECK(rx == target);
  CHECK(apply_copy(target, patch, untouched).code() == errc::base_mismatch);
  CHECK(untouched);
  // One element differs: in its low mantissa bit (same class), or in its exponent (another class: the
  // chunk's groups change), in the first chunk, a middle one, the last.
  for (std::uint64_t i : {std::uint64_t{0}, std::uint64_t{30001}, std::uint64_t{59999}})
    for (std::uint32_t flip : {0x1u, 0x80u, 0x2000u}) {
      host_model other = base;
      other.set(0, i, other.get(0, i) ^ flip);
      CHECK(apply_copy(other, patch, untouched).code() == errc::base_mismatch);
      CHECK(untouched);
    }
}

TEST_CASE("lying counts, sizes and indices with valid checksums are refused") {
  fixture f;
  const auto patch = make_patch<raw_index32>(f.base, f.target, value_mode::absolute, 10, fixed_bytes{1 << 20});
  const std::size_t at = first_bucket_offset(patch);
  bucket_view view;
  REQUIRE(parse_bucket(std::span(patch).subspan(at), view).ok());
  struct lie {
    const char* what;
    std::size_t offset;
    std::uint64_t value;
    unsigned width;
  };
  const lie lies[] = {
      {"segment count", 12, 1000000, 4},       {"segment count zero", 12, 0, 4},
      {"numel", 16, view.header.numel + 1, 8}, {"numel huge", 16, ~0ull, 8},
      {"changed", 24, view.header.changed + 1, 8}, {"chunk count", 32, view.header.chunk_count + 1, 4},
      {"data bytes", 40, view.header.data_bytes + 1, 8}, {"data bytes huge", 40, ~0ull >> 1, 8},
      {"encoder", 8, 9, 1},                    {"encoder swapped", 8, 3, 1},
      {"value mode", 9, 7, 1},                 {"dtype", 10, 3, 1},
      {"log2 chunk", 11, 30, 1},               {"log2 chunk other", 11, 11, 1},
      {"bucket index", 4, 5, 4},               {"reserved", 36, 1, 4},
      {"base checksum", 48, 1, 8},             {"target checksum", 56, 1, 8},
  };
  for (const auto& l : lies) {
    auto bad = patch;
    patch_bucket_field(bad, at, l.offset, l.value, l.width);
    bool untouched = false;
    const auto s = apply_copy(f.base, bad, untouched);
    INFO(l.what, ": ", s.message());
    CHECK_FALSE(s.ok());
    CHECK(untouched);
  }
}

TEST_CASE("a chunk whose index points past the chunk is refused even with every checksum recomputed") {
  // Hand-build a bucket with an out-of-range raw index, and correct payload and header checksums.
  fixture f;
  auto patch = make_patch<raw_index32>(f.base, f.target, value_mode::absolute, 10, fixed_bytes{1 << 20});
  const std::size_t at = first_bucket_offset(patch);
  bucket_view view;
  REQUIRE(parse_bucket(std::span(patch).subspan(at), view).ok());
  const std::size_t seg_at = at + bucket_header_bytes;
  const std::size_t table_at = seg_at + segment_entry_bytes * view.segments.size();
  const std::size_t data_at = table_at + chunk_entry_bytes * view.chunks.size();
  REQUIRE(view.chunks[0].changes > 0);
  detail::store_le<std::uint32_t>(patch.data() + data_at, 5000);  // chunk 0's first index, chunk holds 1024
  std::uint64_t payload = stream_hash(patch.data() + seg_at, table_at - seg_at, 0);
  for (std::size_t c = 0; c < view.chunks.size(); ++c) {
    stream_hasher h(c);
    h.update(patch.data() + table_at + chunk_entry_bytes * c, chunk_entry_bytes);
    h.update(patch.data() + data_at + view.chunk_offsets[c], view.chunks[c].data_bytes);
    payload += h.digest();
  }
  patch_bucket_field(patch, at, 64, payload, 8);
  bool untouched = false;
  const auto s = apply_copy(f.base, patch, untouched);
  CHECK(s.code() == errc::index_out_of_range);
  CHECK(s.message().find("bucket 0") != std::string::npos);
  CHECK(untouched);
}

TEST_CASE("random garbage and a patch header alone are refused") {
  fixture f;
  std::mt19937_64 rng(4);
  for (int i = 0; i < 200; ++i) {
    std::vector<unsigned char> junk(rng() % 4000);
    for (auto& b : junk) b = static_cast<unsigned char>(rng());
    bool untouched = false;
    CHECK_FALSE(apply_copy(f.base, junk, untouched).ok());
    CHECK(untouched);
  }
}

namespace {
// Recomputes a bucket's payload and header checksums after its tables or data were edited.
void reseal_bucket(std::vector<unsigned char>& p, std::size_t at) {
  bucket_header h;
  REQUIRE(detail::read_bucket_header(std::span(p).subspan(at), h).ok());
  const std::size_t seg_at = at + bucket_header_bytes;
  const std::size_t table_at = seg_at + segment_entry_bytes * h.segment_count;
  const std::size_t data_at = table_at + chunk_entry_bytes * h.chunk_count;
  std::uint64_t payload = stream_hash(p.data() + seg_at, table_at - seg_at, 0);
  std::size_t offset = 0;
  for (std::size_t c = 0; c < h.chunk_count; ++c) {
    const auto len = detail::load_le<std::uint32_t>(p.data() + table_at + chunk_entry_bytes * c + 4);
    if (data_at + offset + len > p.size()) return;  // a table edit broke the lengths: leave it to the reader
    stream_hasher hs(c);
    hs.update(p.data() + table_at + chunk_entry_bytes * c, chunk_entry_bytes);
    hs.update(p.data() + data_at + offset, len);
    payload += hs.digest();
    offset += len;
  }
  patch_bucket_field(p, at, 64, payload, 8);
}

template <class E>
void fuzz_resealed(const fixture& f, value_mode mode, int rounds) {
  const auto patch = make_patch<E>(f.base, f.target, mode, 8, fixed_bytes{1 << 20});
  const std::size_t at = first_bucket_offset(patch);
  bucket_view view;
  REQUIRE(parse_bucket(std::span(patch).subspan(at), view).ok());
  const std::size_t tables_at = at + bucket_header_bytes + segment_entry_bytes * view.segments.size();
  std::mt19937_64 rng(77);
  for (int i = 0; i < rounds; ++i) {
    auto bad = patch;
    // Mostly chunk data, sometimes the chunk table: 1..8 random byte edits, checksums made valid again.
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const std::size_t lo = (rng() % 8 == 0) ? tables_at : tables_at + chunk_entry_bytes * view.chunks.size();
      const std::size_t pos = lo + rng() % (bad.size() - lo);
      bad[pos] = static_cast<unsigned char>(rng());
    }
    reseal_bucket(bad, at);
    if (bad == patch) continue;
    bool untouched = false;
    const auto s = apply_copy(f.base, bad, untouched);
    INFO("encoder ", E::name, " round ", i, ": ", s.message());
    REQUIRE_FALSE(s.ok());
    REQUIRE(untouched);
  }
}
}  // namespace

TEST_CASE("decoders survive arbitrary chunk bytes behind valid checksums (run under ASan in the asan preset)") {
  fixture f;
  fuzz_resealed<raw_index32>(f, value_mode::absolute, 1500);
  fuzz_resealed<bitmap>(f, value_mode::ulp, 1500);
  fuzz_resealed<delta_varint>(f, value_mode::ulp, 1500);
  fuzz_resealed<rice>(f, value_mode::ulp, 1500);
  fuzz_resealed<rice>(f, value_mode::absolute, 1500);
}
