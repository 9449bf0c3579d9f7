// A crafted patch that claims every element changed, behind valid checksums but with chunk data that cannot
// back the claim (issue 14, found 6): apply must report it damaged (exit 3), not run out of memory reserving
// 16 bytes per claimed change before it decodes anything.
#include "cli_support.hpp"

#include <sparsesync/format/wire.hpp>

#include <doctest/doctest.h>

#include <sys/resource.h>

using namespace cli_test;
namespace ss = sparsesync;

namespace {

void write_model(const fs::path& p, std::uint64_t n, std::uint32_t step, std::uint64_t changed_at) {
  const ss::model_layout layout({{"w", ss::dtype::f32, {n}}});
  std::vector<std::uint32_t> data(n);
  for (std::uint64_t i = 0; i < n; ++i) data[i] = static_cast<std::uint32_t>(i);
  if (changed_at < n) data[changed_at] += step;
  const std::vector<ss::const_tensor_view> views{{data.data(), n, ss::dtype::f32}};
  write_checkpoint(p, layout, views);
}

// Rewrites the first bucket of `patch` so that every chunk claims all its elements changed, with the
// payload and header checksums recomputed (the data stays what it was: a single change's worth).
void claim_everything_changed(std::vector<unsigned char>& patch) {
  using namespace ss::detail;
  REQUIRE(patch.size() > ss::patch_header_bytes);
  const std::size_t at = ss::patch_header_bytes + load_le<std::uint32_t>(patch.data() + 64) + load_le<std::uint32_t>(patch.data() + 68);
  REQUIRE(load_le<std::uint32_t>(patch.data() + at) == ss::bucket_magic);
  ss::bucket_header h;
  REQUIRE(read_bucket_header(std::span(patch).subspan(at), h).ok());
  unsigned char* seg = patch.data() + at + ss::bucket_header_bytes;
  unsigned char* table = seg + ss::segment_entry_bytes * h.segment_count;
  const unsigned char* data = table + ss::chunk_entry_bytes * h.chunk_count;
  const std::uint64_t chunk = std::uint64_t{1} << h.log2_chunk;
  std::uint64_t payload = ss::stream_hash(seg, ss::segment_entry_bytes * h.segment_count, 0), offset = 0;
  for (std::uint32_t c = 0; c < h.chunk_count; ++c) {
    unsigned char* e = table + ss::chunk_entry_bytes * c;
    store_le<std::uint32_t>(e, static_cast<std::uint32_t>(std::min(chunk, h.numel - std::uint64_t{c} * chunk)));
    const auto bytes = load_le<std::uint32_t>(e + 4);
    ss::stream_hasher hs(c);
    hs.update(e, ss::chunk_entry_bytes);
    hs.update(data + offset, bytes);
    payload += hs.digest();
    offset += bytes;
  }
  h.changed = h.numel;
  h.payload_checksum = payload;
  write_bucket_header(patch.data() + at, h);
}

}  // namespace

TEST_CASE("apply: a patch claiming every element changed is refused as damaged (exit 3) under a memory limit") {
  temp_dir dir;
  const std::uint64_t n = 24ull << 20;  // 96 MiB of f32; 16 B per claimed change would be 384 MiB
  write_model(dir / "base.safetensors", n, 0, n);
  write_model(dir / "new.safetensors", n, 1, 12345);
  const auto patch = dir / "p.ssp";
  auto r = run_cli({"diff", (dir / "base.safetensors").string(), (dir / "new.safetensors").string(), "-o", patch.string(), "--bucket-bytes",
                    "1GiB", "--encoder", "delta_varint"},
                   dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  auto bytes = read_bytes(patch);
  claim_everything_changed(bytes);
  write_bytes(patch, bytes);

  // The limit applies to the child (inherited through fork); this process lowers only its soft limit and
  // restores it.
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_AS, &old) == 0);
  rlimit lower = old;
  lower.rlim_cur = 320ull << 20;
  REQUIRE(::setrlimit(RLIMIT_AS, &lower) == 0);
  r = run_cli({"apply", (dir / "base.safetensors").string(), patch.string(), "-o", (dir / "out.safetensors").string()}, dir.path);
  ::setrlimit(RLIMIT_AS, &old);
  CHECK_MESSAGE(r.rc == 3, r.err);
  CHECK(r.err.find("out of memory") == std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out.safetensors"));
}
