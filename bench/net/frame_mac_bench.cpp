// The frame MAC's floor in a full transfer (bench/net/full_transfer_floor.sh): seconds to tag BYTES of frames of
// 16 MiB, once, with the transport's ChaCha20-Poly1305 (protocol version 2) and, for comparison, with the
// HMAC-SHA256 of version 1. Each side of a connection pays this once (the sender tags, the receiver checks).
//   frame_mac_bench BYTES   -> JSON on stdout
#include <sparsesync/transport/detail/crypto.hpp>
#include <sparsesync/transport/detail/frame.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace d = sparsesync::detail;

int main(int argc, char** argv) {
  const std::size_t total = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : std::size_t{1} << 30;
  const std::size_t frame = std::size_t{16} << 20;
  std::vector<std::byte> buf(frame, std::byte{0x5A});
  std::vector<std::byte> key(32, std::byte{7});
  using clk = std::chrono::steady_clock;
  auto time = [&](auto&& tag_one) {
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = clk::now();
      for (std::size_t done = 0, seq = 0; done < total; done += frame, ++seq) tag_one(std::span(buf).first(std::min(frame, total - done)), seq);
      best = std::min(best, std::chrono::duration<double>(clk::now() - t0).count());
    }
    return best;
  };
  d::chacha20_poly1305_mac poly(key);
  unsigned sink = 0;
  const double poly_s = time([&](std::span<const std::byte> f, std::uint64_t seq) {
    sink += std::to_integer<unsigned>(poly.begin(d::frame_nonce(d::payload_tag_domain, seq)).update(f).finish()[0]);
  });
  d::hmac_sha256 hmac(key);
  const double hmac_s = time([&](std::span<const std::byte> f, std::uint64_t) { sink += std::to_integer<unsigned>(hmac.update(f).digest()[0]); });
  std::printf("{\"bytes\": %zu, \"chacha20_poly1305_seconds\": %.3f, \"hmac_sha256_seconds\": %.3f, \"sink\": %u}\n", total, poly_s,
              hmac_s, sink & 1);
  return 0;
}
