// Writes the seed corpora under corpus/ (one folder per harness) from real payloads: chunks as each encoder
// writes them, the golden patches' pairs, a session's messages as the sync engine sends them, canonical
// safetensors files and well-formed handshakes. Deterministic; rerun (and commit) only when a format changes:
//   cmake --build B --target fuzz_make_seeds && B/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
#include "fuzz_support.hpp"
#include "golden_cases.hpp"
#include <sparsesync/cli/safetensors.hpp>

#include <sparsesync/sync/protocol.hpp>
#include <sparsesync/transport/detail/frame.hpp>

#include <cstdio>
#include <filesystem>
#include <tuple>

namespace {
using namespace sparsesync;
namespace fs = std::filesystem;
using bytes = std::vector<unsigned char>;

void put_u16(bytes& b, std::uint32_t v) {
  b.push_back(v & 0xFF);
  b.push_back((v >> 8) & 0xFF);
}
void put_u32(bytes& b, std::uint32_t v) {
  put_u16(b, v & 0xFFFF);
  put_u16(b, v >> 16);
}
void append(bytes& b, std::span<const unsigned char> s) { b.insert(b.end(), s.begin(), s.end()); }
void append(bytes& b, std::span<const std::byte> s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  b.insert(b.end(), p, p + s.size());
}

struct corpus {
  fs::path dir;
  int n = 0;
  void add(const bytes& b) {
    char name[32];
    std::snprintf(name, sizeof name, "seed-%03d", n++);
    if (!golden::write_golden_file(dir / name, b)) throw error(errc::io, "cannot write " + (dir / name).string());
  }
};

// A chunk with every third-to-seventh element changed by small steps, as each encoder writes it.
template <class E, element_word W>
bytes chunk_seed(value_mode mode, std::uint32_t numel, std::uint32_t stride) {
  std::vector<std::uint32_t> positions;
  std::vector<W> values;
  golden::splitmix64 rng{numel * 31u + stride};
  for (std::uint32_t p = rng.next() % stride; p < numel; p += 1 + rng.next() % stride) {
    positions.push_back(p);
    const W v = mode == value_mode::ulp ? static_cast<W>((rng.next() & 1) ? 1 : W(-1)) : static_cast<W>(rng.next() | 1);
    values.push_back(v);
  }
  std::vector<W> base;
  chunk_changes<W> in;
  in.numel = numel;
  in.mode = mode;
  in.positions = positions;
  in.values = values;
  if constexpr (E::needs_base) {  // entropy's classes come from the base: the one the harness decodes against
    for (std::uint32_t i = 0; i < numel; ++i) base.push_back(fuzz::chunk_base_element<W>(i));
    in.base = base;
  }
  bytes out = {static_cast<unsigned char>(static_cast<unsigned>(E::id) - 1),
               static_cast<unsigned char>((mode == value_mode::ulp ? 1 : 0) | (sizeof(W) == 1 ? 0 : sizeof(W) == 2 ? 2 : 4))};
  put_u16(out, numel - 1);
  put_u32(out, static_cast<std::uint32_t>(positions.size()));
  E::template encode<W>(in, out);
  return out;
}

// A session as the sender streams it: welcome, version_begin, buckets, version_end.
bytes session_seed(std::uint8_t selector, const golden::golden_inputs& in, value_mode mode, bool full) {
  bytes out = {selector};
  auto frame = [&](std::span<const std::byte> m) {
    put_u16(out, static_cast<std::uint32_t>(m.size()));
    append(out, m);
  };
  frame(sync::encode(sync::welcome{in.base.layout.hash(), true, golden::golden_target_version}));
  auto opt = golden::golden_options(mode);
  opt.include_layout = false;
  auto zero = in.base.views();
  for (auto& v : zero) v.data = nullptr;
  const auto base = full ? zero : in.base.views();
  const auto target = in.target.views();
  patch_encoder<auto_encoder> enc(in.base.layout, base, target, opt, fixed_bytes{golden::golden_bucket_bytes});
  bytes b;
  enc.prologue(b);
  frame(sync::wrap(sync::message_type::version_begin, b));
  while (enc.next_bucket() < enc.bucket_count()) {
    b.clear();
    enc.encode_next(b);
    frame(sync::wrap(sync::message_type::bucket, b));
  }
  unsigned char end[patch_header_bytes];
  enc.final_header(end);
  frame(sync::wrap(sync::message_type::version_end, end));
  return out;
}

// Transport frames (docs/TRANSPORTS.md): data frames of the given sizes, then a close frame.
void frames(bytes& out, std::initializer_list<std::size_t> sizes) {
  std::uint64_t seq = 0;
  for (const auto n : sizes) {
    append(out, sparsesync::detail::encode_header({sparsesync::detail::frame_type::data, seq++, n}));
    for (std::size_t i = 0; i < n; ++i) out.push_back(static_cast<unsigned char>(i));
  }
  append(out, sparsesync::detail::encode_header({sparsesync::detail::frame_type::close, seq, 0}));
}

bytes hello_seed(std::uint8_t selector, std::string_view magic, std::uint16_t mode, std::size_t size) {
  bytes out = {selector};
  for (const char c : magic.substr(0, 8)) out.push_back(static_cast<unsigned char>(c));
  put_u16(out, 2);  // transport protocol version (transport/detail/handshake.hpp)
  put_u16(out, mode);
  out.resize(1 + size, 0x5A);  // reserved, nonce (and the server's proof)
  std::fill(out.begin() + 13, out.begin() + 17, 0);
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR\n");
    return 2;
  }
  const fs::path root = argv[1];
  auto make = [&](const char* name) {
    fs::remove_all(root / name);
    fs::create_directories(root / name);
    return corpus{root / name};
  };

  auto chunks = make("chunk_decode");
  for (const auto& row : encoder_table)
    visit_encoder(row.id, [&]<class E>(E) {
      for (auto mode : {value_mode::absolute, value_mode::ulp}) {
        chunks.add(chunk_seed<E, std::uint8_t>(mode, 256, 5));
        chunks.add(chunk_seed<E, std::uint16_t>(mode, 1000, 3));
        chunks.add(chunk_seed<E, std::uint32_t>(mode, 300, 40));
      }
    });

  auto patches = make("patch");
  int i = 0;
  for (const auto& c : golden::golden_cases()) {
    const auto file = golden::read_golden_file(fs::path(SPARSESYNC_GOLDEN_DIR) / c.file_name());
    if (!file) throw error(errc::io, "cannot read golden file " + c.file_name());
    bytes b = {static_cast<unsigned char>(i++ % 4)};
    append(b, *file);
    patches.add(b);
  }

  auto sessions = make("protocol");
  for (std::uint8_t d = 1; is_valid(static_cast<dtype>(d)); ++d) {
    const auto in = golden::make_golden_inputs(static_cast<dtype>(d));
    const auto sel = static_cast<std::uint8_t>((d - 1) << 1);
    sessions.add(session_seed(sel | 1, in, value_mode::ulp, false));
    sessions.add(session_seed(sel | 1, in, value_mode::absolute, false));
    sessions.add(session_seed(sel, in, value_mode::ulp, true));
  }

  auto st = make("safetensors");
  for (std::uint8_t d = 1; is_valid(static_cast<dtype>(d)); ++d) {
    const model_layout layout({{"w", static_cast<dtype>(d), {3, 4}}, {"b", static_cast<dtype>(d), {5}}, {"e", static_cast<dtype>(d), {0}}});
    test::host_model m(layout);
    test::fill_random(m, d);
    const tools::safetensors_metadata meta = d % 2 ? tools::safetensors_metadata{{"format", "pt"}} : tools::safetensors_metadata{};
    st.add(tools::build_safetensors(layout, m.views(), meta));
  }

  auto hs = make("handshake");
  for (std::uint8_t sel : {0, 4, 8, 12}) {  // client: the server's hello, then frames
    auto b = hello_seed(sel, "SSYNCSH1", 0, 80);
    frames(b, {0, 5, 17, 300});
    hs.add(b);
  }
  for (std::uint8_t sel : {1, 5, 9, 13}) {  // server: the client's hello, then frames
    auto b = hello_seed(sel, "SSYNCCH1", 0, 48);
    frames(b, {1, 16, 200});
    hs.add(b);
  }
  // With a key: a hello in key mode, then a finish message whose proof cannot verify.
  for (const auto& [sel, hello, finish, size] : {std::tuple{2, "SSYNCSH1", "SSYNCSF1", 80}, std::tuple{3, "SSYNCCH1", "SSYNCCF1", 48}}) {
    auto b = hello_seed(static_cast<std::uint8_t>(sel), hello, 1, size + 48);
    std::copy_n(finish, 8, b.begin() + 1 + size);
    b[1 + size + 8] = 0;  // verdict: accept
    hs.add(b);
  }
  std::printf("seeds: %d chunk_decode, %d patch, %d protocol, %d safetensors, %d handshake\n", chunks.n, patches.n, sessions.n,
              st.n, hs.n);
  return 0;
}
