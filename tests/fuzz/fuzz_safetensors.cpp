// The CLI's safetensors reader (tools/sparsesync/include/sparsesync/cli/safetensors.hpp) on arbitrary file images.
// Properties: it either refuses with sparsesync::error (any other exception is a finding) or accepts a file
// whose parts rebuild it byte for byte; the tensors tile the data area in layout order; and the canonical
// header the writer makes for the same layout and metadata reads back as the same layout and metadata.
#include "fuzz_support.hpp"

// The reader's include path is set in one place, tests/fuzz/CMakeLists.txt (SPARSESYNC_FUZZ_SAFETENSORS_DIR).
#include <sparsesync/cli/safetensors.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sparsesync;
  const std::span<const unsigned char> bytes(data, size);
  std::optional<tools::safetensors_file> file;
  try {
    file.emplace(tools::safetensors_file::from_bytes(bytes));
  } catch (const error&) {
    return 0;
  }
  const auto image = file->bytes();
  FUZZ_CHECK(image.size() == size && std::equal(image.begin(), image.end(), bytes.begin()));
  const auto& h = file->header();
  FUZZ_CHECK(h.offsets.size() == file->size() + 1);
  FUZZ_CHECK(h.header_size + h.data_size() == size);
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < file->size(); ++i) {
    FUZZ_CHECK(h.offsets[i] == at);
    at += file->layout()[i].bytes();
  }
  FUZZ_CHECK(at == h.data_size() && file->layout().bytes() == h.data_size());

  // Names and metadata came through a JSON parser that checks UTF-8, so the writer must accept them.
  const auto canonical = tools::make_safetensors_header(file->layout(), file->metadata());
  const auto again = tools::parse_safetensors_header(canonical, canonical.size() + h.data_size(), "canonical");
  FUZZ_CHECK(again.layout.hash() == file->layout().hash());
  FUZZ_CHECK(again.metadata == file->metadata());
  FUZZ_CHECK(again.offsets == h.offsets);
  return 0;
}
