// safetensors checkpoints: u64 LE header length N, N bytes of JSON header, then the data area.
//
// The reader validates everything a hostile or damaged file could get wrong and exposes the tensors in
// data-offset order (the layout order the CLI patches in), with the header bytes exactly as in the file,
// so `header_bytes() + tensors in layout order` rebuilds the file byte for byte. The writer replaces files
// atomically; the builder makes canonical files (compact JSON padded with spaces so the data area starts
// at a multiple of 8, as the reference implementation does).
#pragma once

#include "atomic_file.hpp"

#include <sparsesync/core/config.hpp>
#include <sparsesync/core/dtype.hpp>
#include <sparsesync/core/error.hpp>
#include <sparsesync/core/layout.hpp>
#include <sparsesync/core/little_endian.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

SPARSESYNC_NS_BEGIN
namespace tools {

// The reference implementation refuses larger headers; so do we, before allocating for one.
inline constexpr std::uint64_t safetensors_max_header_size = 100'000'000;

using safetensors_metadata = std::map<std::string, std::string>;

// The safetensors spelling of the dtypes sparsesync handles (exact, upper case).
constexpr std::optional<dtype> safetensors_dtype(std::string_view s) {
  if (s == "BF16") return dtype::bf16;
  if (s == "F16") return dtype::f16;
  if (s == "F32") return dtype::f32;
  if (s == "F8_E4M3") return dtype::f8_e4m3;
  if (s == "F8_E5M2") return dtype::f8_e5m2;
  return std::nullopt;
}

constexpr std::string_view safetensors_dtype_name(dtype t) {
  switch (t) {
    case dtype::bf16: return "BF16";
    case dtype::f16: return "F16";
    case dtype::f32: return "F32";
    case dtype::f8_e4m3: return "F8_E4M3";
    case dtype::f8_e5m2: return "F8_E5M2";
  }
  return "?";
}

// What a file's first 8 + N bytes say, validated against the file's size.
struct safetensors_header {
  model_layout layout;                  // tensors in data-offset order
  std::vector<std::uint64_t> offsets;   // data-area offset of each tensor (layout order), then the data size
  safetensors_metadata metadata;
  std::uint64_t header_size = 0;        // 8 + N: where the data area starts in the file
  [[nodiscard]] std::uint64_t data_size() const { return offsets.empty() ? 0 : offsets.back(); }
};

namespace detail {

[[noreturn]] inline void malformed(std::string_view what, const std::string& problem) {
  throw error(errc::malformed, std::string(what) + ": " + problem);
}


}  // namespace detail

// Parses and validates the header at the start of `prefix` (at least its first 8 + N bytes) of a file of
// `file_size` bytes. `what` names the source in error messages.
safetensors_header parse_safetensors_header(std::span<const unsigned char> prefix, std::uint64_t file_size, std::string_view what);

// A safetensors file held in memory, validated. The data area starts on a 64-byte boundary, so tensor views
// are aligned for their element type.
class safetensors_file {
 public:
  static safetensors_file read(const std::filesystem::path& path) {
    const std::string what = path.string();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) detail::throw_io(path, "cannot open", errno);
    struct closer {
      int fd;
      ~closer() { ::close(fd); }
    } guard{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) detail::throw_io(path, "cannot stat", errno);
    if (!S_ISREG(st.st_mode)) throw error(errc::io, what + ": not a regular file");
    const auto size = static_cast<std::uint64_t>(st.st_size);
    unsigned char len[8] = {};
    const std::uint64_t got = read_fully(fd, len, size < 8 ? size : 8, path);
    if (got < 8) detail::malformed(what, "file is shorter than the 8-byte header length");
    const std::uint64_t n = sparsesync::detail::load_le<std::uint64_t>(len);
    // Checked before allocating, so a lying length cannot make us allocate the size it claims.
    if (n > safetensors_max_header_size || n > size - 8) (void)parse_safetensors_header({len, 8}, size, what);

    safetensors_file f(size, 8 + n, what);
    std::memcpy(f.base_, len, 8);
    if (read_fully(fd, f.base_ + 8, size - 8, path) != size - 8) throw error(errc::io, what + ": file shrank while being read");
    unsigned char extra = 0;
    if (read_fully(fd, &extra, 1, path) != 0) throw error(errc::io, what + ": file grew while being read");
    f.parse();
    return f;
  }

  // Validates a file image already in memory (copied to aligned storage).
  static safetensors_file from_bytes(std::span<const unsigned char> bytes, std::string name = "<memory>") {
    std::uint64_t header_size = 8;
    if (bytes.size() >= 8) {
      const std::uint64_t n = sparsesync::detail::load_le<std::uint64_t>(bytes.data());
      if (n > safetensors_max_header_size || n > bytes.size() - 8) (void)parse_safetensors_header(bytes, bytes.size(), name);
      header_size = 8 + n;
    } else {
      (void)parse_safetensors_header(bytes, bytes.size(), name);
    }
    safetensors_file f(bytes.size(), header_size, std::move(name));
    if (!bytes.empty()) std::memcpy(f.base_, bytes.data(), bytes.size());
    f.parse();
    return f;
  }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const model_layout& layout() const noexcept { return header_.layout; }
  [[nodiscard]] std::size_t size() const noexcept { return header_.layout.size(); }
  [[nodiscard]] const safetensors_metadata& metadata() const noexcept { return header_.metadata; }
  [[nodiscard]] const safetensors_header& header() const noexcept { return header_; }

  // The 8-byte length and the JSON exactly as in the file.
  [[nodiscard]] std::span<const unsigned char> header_bytes() const { return {base_, header_.header_size}; }
  [[nodiscard]] std::span<const unsigned char> data_area() const { return {base_ + header_.header_size, header_.data_size()}; }
  [[nodiscard]] std::span<unsigned char> data_area() { return {base_ + header_.header_size, header_.data_size()}; }
  // The whole file image: header_bytes() followed by data_area().
  [[nodiscard]] std::span<const unsigned char> bytes() const { return {base_, header_.header_size + header_.data_size()}; }

  [[nodiscard]] const_tensor_view tensor(std::size_t i) const {
    return {base_ + header_.header_size + header_.offsets.at(i), header_.layout[i].numel(), header_.layout[i].dtype};
  }
  [[nodiscard]] tensor_view tensor(std::size_t i) {
    return {base_ + header_.header_size + header_.offsets.at(i), header_.layout[i].numel(), header_.layout[i].dtype};
  }
  [[nodiscard]] std::vector<const_tensor_view> views() const {
    std::vector<const_tensor_view> v;
    for (std::size_t i = 0; i < size(); ++i) v.push_back(tensor(i));
    return v;
  }
  [[nodiscard]] std::vector<tensor_view> mutable_views() {
    std::vector<tensor_view> v;
    for (std::size_t i = 0; i < size(); ++i) v.push_back(tensor(i));
    return v;
  }

 private:
  static constexpr std::size_t alignment = 64;
  struct alignas(alignment) block {
    unsigned char b[alignment];
  };

  // Places byte `header_size` of the image on an alignment boundary.
  safetensors_file(std::uint64_t file_size, std::uint64_t header_size, std::string name) : name_(std::move(name)) {
    const std::uint64_t pad = (alignment - header_size % alignment) % alignment;
    storage_.reset(new block[(pad + file_size) / alignment + 1]);
    base_ = reinterpret_cast<unsigned char*>(storage_.get()) + pad;
    file_size_ = file_size;
  }

  void parse() { header_ = parse_safetensors_header({base_, file_size_}, file_size_, name_); }

  static std::uint64_t read_fully(int fd, unsigned char* p, std::uint64_t n, const std::filesystem::path& path) {
    std::uint64_t done = 0;
    while (done < n) {
      const std::uint64_t want = std::min<std::uint64_t>(n - done, std::uint64_t(1) << 30);
      const ssize_t r = ::read(fd, p + done, want);
      if (r < 0) {
        if (errno == EINTR) continue;
        detail::throw_io(path, "read failed", errno);
      }
      if (r == 0) break;
      done += static_cast<std::uint64_t>(r);
    }
    return done;
  }

  std::string name_;
  std::unique_ptr<block[]> storage_;
  unsigned char* base_ = nullptr;
  std::uint64_t file_size_ = 0;
  safetensors_header header_;
};

// The canonical header for `layout` laid out contiguously in layout order: the 8-byte length, then
// compact JSON ({"__metadata__":...} first when non-empty; each tensor as {"dtype","shape","data_offsets"}),
// padded with spaces to a multiple of 8 bytes.
std::vector<unsigned char> make_safetensors_header(const model_layout& layout, const safetensors_metadata& metadata = {});

namespace detail {

// The header must parse, and `tensors` must be its tensors in data-offset order, so the result is valid.
inline void check_file_parts(const std::filesystem::path& path, std::span<const unsigned char> header_bytes,
                             std::span<const const_tensor_view> tensors) {
  std::uint64_t data = 0;
  for (const auto& t : tensors) data += t.numel * size_of(t.dtype);
  const auto h = parse_safetensors_header(header_bytes, header_bytes.size() + data, path.string() + " (header to write)");
  if (h.header_size != header_bytes.size())
    throw error(errc::invalid_argument, path.string() + ": header bytes run past the header length they announce");
  throw_if_error(check_views(h.layout, tensors, path.string()));
}

}  // namespace detail

// Atomically writes `header_bytes` (the 8-byte length and JSON, e.g. another file's header_bytes()) followed by
// `tensors`, which must be that header's tensors in data-offset order. Validated before anything is written.
inline void write_safetensors_atomic(const std::filesystem::path& path, std::span<const unsigned char> header_bytes,
                                     std::span<const const_tensor_view> tensors) {
  detail::check_file_parts(path, header_bytes, tensors);
  write_file_atomic(path, [&](file_sink& sink) {
    sink.write(header_bytes);
    for (const auto& t : tensors) sink.write(t.data, t.numel * size_of(t.dtype));
  });
}

// Atomically writes `header_bytes` followed by a whole data area (e.g. a patched copy of data_area()).
inline void write_safetensors_atomic(const std::filesystem::path& path, std::span<const unsigned char> header_bytes,
                                     std::span<const unsigned char> data_area) {
  (void)parse_safetensors_header(header_bytes, header_bytes.size() + data_area.size(), path.string() + " (header to write)");
  write_file_atomic(path, [&](file_sink& sink) {
    sink.write(header_bytes);
    sink.write(data_area);
  });
}

// Atomically writes a canonical file for `layout` with `tensors` (layout order).
inline void write_safetensors_atomic(const std::filesystem::path& path, const model_layout& layout,
                                     std::span<const const_tensor_view> tensors, const safetensors_metadata& metadata = {}) {
  throw_if_error(check_views(layout, tensors, path.string()));
  const auto header = make_safetensors_header(layout, metadata);
  write_safetensors_atomic(path, std::span<const unsigned char>(header), tensors);
}

// A canonical file image in memory.
inline std::vector<unsigned char> build_safetensors(const model_layout& layout, std::span<const const_tensor_view> tensors,
                                                    const safetensors_metadata& metadata = {}) {
  throw_if_error(check_views(layout, tensors, "build_safetensors"));
  auto out = make_safetensors_header(layout, metadata);
  out.reserve(out.size() + layout.bytes());
  for (const auto& t : tensors) {
    const auto* p = static_cast<const unsigned char*>(t.data);
    out.insert(out.end(), p, p + t.numel * size_of(t.dtype));
  }
  return out;
}

}  // namespace tools
SPARSESYNC_NS_END
