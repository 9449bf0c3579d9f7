// The patch file reader and the atomic apply (format/patch_reader.hpp, bucket_reader.hpp, apply.hpp) on
// arbitrary patch files. Input: an option byte, then the patch. Option bit 0: the receiver vouches for its
// base checksum (apply_options::known_base_checksum); bit 1: before reading, the harness recomputes every
// header hash and bucket payload checksum, so that mutated tables and chunk data reach the decoders instead
// of stopping at a checksum (lengths, counts and content checksums stay as the fuzzer wrote them).
// The model is the golden pair's base (tests/golden) of the dtype whose layout the patch names.
// Properties: a refused patch leaves the model byte-identical; an accepted one leaves a model whose content
// checksum is the patch's target checksum, and equal to the golden target where that is the checksum claimed.
#include "fuzz_support.hpp"

#include "golden_cases.hpp"

#include <sparsesync/core/model_checksum.hpp>
#include <sparsesync/format/apply.hpp>

#include <memory>

namespace {
using namespace sparsesync;

struct golden_model {
  golden::golden_inputs in;
  std::uint64_t base_checksum, target_checksum;
};

const std::vector<std::unique_ptr<golden_model>>& models() {
  static const auto all = [] {
    std::vector<std::unique_ptr<golden_model>> v;
    for (std::uint8_t d = 1; is_valid(static_cast<dtype>(d)); ++d) {
      auto in = golden::make_golden_inputs(static_cast<dtype>(d));
      const auto b = model_checksum(in.base.layout, in.base.views());
      const auto t = model_checksum(in.target.layout, in.target.views());
      v.push_back(std::make_unique<golden_model>(golden_model{std::move(in), b, t}));
    }
    return v;
  }();
  return all;
}

// See the file comment (option bit 1). Walks the structure as far as its lengths stay inside the input.
void fix_checksums(std::vector<unsigned char>& p) {
  using detail::load_le;
  using detail::store_le;
  if (p.size() < patch_header_bytes) return;
  const std::uint64_t layout_bytes = load_le<std::uint32_t>(p.data() + 64);
  const std::uint64_t metadata_bytes = load_le<std::uint32_t>(p.data() + 68);
  std::uint64_t pos = patch_header_bytes + layout_bytes;
  if (metadata_bytes && pos + metadata_bytes <= p.size()) store_le<std::uint64_t>(p.data() + 72, stream_hash(p.data() + pos, metadata_bytes, 0));
  store_le<std::uint64_t>(p.data() + 80, stream_hash(p.data(), 80, 0));
  pos += metadata_bytes;
  const std::uint32_t buckets = load_le<std::uint32_t>(p.data() + 12);
  for (std::uint32_t b = 0; b < buckets && pos + bucket_header_bytes <= p.size(); ++b) {
    unsigned char* h = p.data() + pos;
    const std::uint64_t segments = load_le<std::uint32_t>(h + 12), chunks = load_le<std::uint32_t>(h + 32);
    const std::uint64_t data_bytes = load_le<std::uint64_t>(h + 40);
    const std::uint64_t tables = segment_entry_bytes * segments + chunk_entry_bytes * chunks;
    const std::uint64_t avail = p.size() - pos - bucket_header_bytes;
    if (tables > avail || data_bytes > avail - tables) break;
    const unsigned char* seg = h + bucket_header_bytes;
    const unsigned char* table = seg + segment_entry_bytes * segments;
    const unsigned char* data = table + chunk_entry_bytes * chunks;
    std::uint64_t payload = stream_hash(seg, segment_entry_bytes * segments, 0), offset = 0;
    for (std::uint64_t c = 0; c < chunks; ++c) {
      const unsigned char* e = table + chunk_entry_bytes * c;
      const std::uint64_t n = std::min<std::uint64_t>(load_le<std::uint32_t>(e + 4), data_bytes - offset);
      stream_hasher hs(c);
      hs.update(e, chunk_entry_bytes);
      hs.update(data + offset, n);
      payload += hs.digest();
      offset += n;
    }
    store_le<std::uint64_t>(h + 64, payload);
    store_le<std::uint64_t>(h + 72, stream_hash(h, 72, 0));
    pos += bucket_header_bytes + tables + data_bytes;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::cursor in(data, size);
  const std::uint8_t options = in.byte();
  const auto rest = in.rest();
  std::vector<unsigned char> patch(rest.begin(), rest.end());
  if (options & 2) fix_checksums(patch);

  patch_prologue pro;
  const bool prologue_ok = parse_patch_prologue(patch, pro).ok();
  if (prologue_ok) FUZZ_CHECK(pro.bytes <= patch.size());

  // The golden model whose layout the patch names (bf16's when it names none of them).
  const golden_model* g = models().front().get();
  for (const auto& m : models())
    if (prologue_ok && pro.header.layout_hash == m->in.base.layout.hash()) g = m.get();
  const model_layout& layout = g->in.base.layout;
  test::host_model model = g->in.base;
  apply_options opt;
  if (options & 1) opt.known_base_checksum = g->base_checksum;

  apply_report report;
  const auto views = model.mutable_views();
  const status st = try_apply_patch(patch, layout, views, opt, &report);
  if (!st) {
    FUZZ_CHECK(model == g->in.base);  // atomic: nothing written
    return 0;
  }
  FUZZ_CHECK(prologue_ok);
  const auto sum = model_checksum(layout, model.views());
  FUZZ_CHECK(sum == report.target_checksum);
  if (sum == g->target_checksum) FUZZ_CHECK(model == g->in.target);
  if (!(pro.header.flags & flag_from_zero)) FUZZ_CHECK(report.base_checksum == g->base_checksum);
  return 0;
}
