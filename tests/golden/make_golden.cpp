// Rewrites the golden patches. The committed files pin wire format v1: rewriting them is only allowed in the
// same change that bumps the format version in docs/FORMAT.md (and wire.hpp's format_version); README.md.
// Usage: make_golden DIR   (the repository's copy is tests/golden/data)
#include "golden_cases.hpp"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  using namespace sparsesync;
  using namespace sparsesync::golden;
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: make_golden DIR\n"
                 "Writes one patch per encoder x value mode x dtype into DIR. Only with a format version bump.\n");
    return 2;
  }
  try {
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);
    std::size_t total = 0;
    for (dtype t = static_cast<dtype>(1); is_valid(t); t = static_cast<dtype>(static_cast<std::uint8_t>(t) + 1)) {
      const auto in = make_golden_inputs(t);
      for (const auto& c : golden_cases()) {
        if (c.type != t) continue;
        const auto bytes = encode_golden(c, in);
        if (!write_golden_file(dir / c.file_name(), bytes)) {
          std::fprintf(stderr, "make_golden: cannot write %s\n", (dir / c.file_name()).c_str());
          return 1;
        }
        total += bytes.size();
        const auto headers = golden_bucket_headers(bytes).value();
        std::string encoders;
        for (const auto& h : headers) encoders += (encoders.empty() ? "" : " ") + std::string(encoder_name(h.encoder));
        std::printf("%-28s %6zu bytes  buckets: %s\n", c.file_name().c_str(), bytes.size(), encoders.c_str());
      }
    }
    std::printf("total %zu bytes\n", total);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_golden: %s\n", e.what());
    return 1;
  }
  return 0;
}
