// Pre-shared keys for the authenticated transports, and their key files (format in docs/TRANSPORTS.md):
// either hex text (at least 64 hex digits, surrounding whitespace ignored) or at least 32 raw bytes.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/transport/detail/crypto.hpp>
#include <sparsesync/transport/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

SPARSESYNC_NS_BEGIN

class pre_shared_key {
 public:
  static constexpr std::size_t min_size = 32;  // 256 bits: the HMAC-SHA256 security level
  static constexpr std::size_t max_size = 4096;

  static pre_shared_key from_bytes(std::span<const std::byte> bytes) {
    if (bytes.size() < min_size || bytes.size() > max_size)
      throw transport_error(transport_errc::invalid_argument,
                            "a pre-shared key must have " + std::to_string(min_size) + " to " + std::to_string(max_size) +
                                " bytes, got " + std::to_string(bytes.size()));
    return pre_shared_key(detail::secret(bytes));
  }

  // A fresh random key from OpenSSL's CSPRNG.
  static pre_shared_key generate(std::size_t size = min_size) {
    std::vector<std::byte> b(size);
    detail::random_bytes(b);
    auto k = from_bytes(b);
    detail::cleanse(b);
    return k;
  }

  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return secret_.bytes(); }

  // 16 hex digits that name the key without revealing it (a hash prefix of a high-entropy key), so operators
  // can compare keys across machines from log lines and error messages.
  [[nodiscard]] std::string id() const {
    std::vector<std::byte> in;
    constexpr std::string_view label = "sparsesync key id v1";
    for (char c : label) in.push_back(static_cast<std::byte>(c));
    in.insert(in.end(), secret_.bytes().begin(), secret_.bytes().end());
    const auto h = detail::sha256(in);
    detail::cleanse(in);
    return detail::to_hex(std::span(h).first(8));
  }

 private:
  explicit pre_shared_key(detail::secret s) : secret_(std::move(s)) {}
  detail::secret secret_;
};

struct key_file_options {
  // Refuse key files that the group or others may read or write (as ssh does with private keys).
  bool require_private = true;
};

namespace detail {

inline int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Hex when the trimmed text is nothing but hex digits; raw bytes otherwise.
inline pre_shared_key parse_key_file_contents(std::span<const std::byte> content, const std::string& where) {
  std::string_view text(reinterpret_cast<const char*>(content.data()), content.size());
  std::size_t b = 0, e = text.size();
  while (b < e && is_space(text[b])) ++b;
  while (e > b && is_space(text[e - 1])) --e;
  const std::string_view trimmed = text.substr(b, e - b);
  bool all_hex = !trimmed.empty();
  for (char c : trimmed) all_hex = all_hex && hex_value(c) >= 0;
  if (all_hex) {
    if (trimmed.size() % 2 != 0)
      throw transport_error(transport_errc::key_file, where + ": hex key has an odd number of digits");
    if (trimmed.size() < 2 * pre_shared_key::min_size)
      throw transport_error(transport_errc::key_file, where + ": hex key has " + std::to_string(trimmed.size() / 2) +
                                                          " bytes, at least " + std::to_string(pre_shared_key::min_size) +
                                                          " (64 hex digits) are needed");
    std::vector<std::byte> key(trimmed.size() / 2);
    for (std::size_t i = 0; i < key.size(); ++i)
      key[i] = static_cast<std::byte>(hex_value(trimmed[2 * i]) * 16 + hex_value(trimmed[2 * i + 1]));
    try {
      auto k = pre_shared_key::from_bytes(key);
      cleanse(key);
      return k;
    } catch (const transport_error& err) {
      cleanse(key);
      throw transport_error(transport_errc::key_file, where + ": " + err.what());
    }
  }
  if (content.size() < pre_shared_key::min_size)
    throw transport_error(transport_errc::key_file, where + ": raw key has " + std::to_string(content.size()) +
                                                        " bytes, at least " + std::to_string(pre_shared_key::min_size) +
                                                        " are needed");
  if (content.size() > pre_shared_key::max_size)
    throw transport_error(transport_errc::key_file, where + ": raw key is larger than " +
                                                        std::to_string(pre_shared_key::max_size) + " bytes");
  return pre_shared_key::from_bytes(content);
}

inline std::string errno_text(int err) { return std::string(std::strerror(err)); }

}  // namespace detail

inline pre_shared_key load_key_file(const std::filesystem::path& path, const key_file_options& options = {}) {
  const std::string where = "key file " + path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw transport_error(transport_errc::key_file, where + ": " + detail::errno_text(errno));
  struct fd_guard {
    int fd;
    ~fd_guard() { ::close(fd); }
  } guard{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw transport_error(transport_errc::key_file, where + ": " + detail::errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw transport_error(transport_errc::key_file, where + ": not a regular file");
  if (options.require_private && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw transport_error(transport_errc::key_file, where + ": group or others have access (mode " + mode +
                                                        "); run `chmod 600` on it, or set key_file_options::require_private = false");
  }
  constexpr std::size_t limit = 2 * pre_shared_key::max_size + 64;
  std::vector<std::byte> content(limit + 1);
  std::size_t got = 0;
  while (got < content.size()) {
    const ssize_t n = ::read(fd, content.data() + got, content.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw transport_error(transport_errc::key_file, where + ": " + detail::errno_text(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > limit) {
    detail::cleanse(content);
    throw transport_error(transport_errc::key_file, where + ": too large to be a key file");
  }
  content.resize(got);
  try {
    auto k = detail::parse_key_file_contents(content, where);
    detail::cleanse(content);
    return k;
  } catch (...) {
    detail::cleanse(content);
    throw;
  }
}

// Writes the key as hex text with mode 0600; refuses to replace an existing file.
inline void write_key_file(const std::filesystem::path& path, const pre_shared_key& key) {
  const std::string where = "key file " + path.string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw transport_error(transport_errc::key_file, where + ": " + detail::errno_text(errno));
  std::string text = detail::to_hex(key.bytes()) + "\n";
  std::size_t done = 0;
  int err = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  ::close(fd);
  OPENSSL_cleanse(text.data(), text.size());
  if (err != 0) {
    ::unlink(path.c_str());
    throw transport_error(transport_errc::key_file, where + ": " + detail::errno_text(err));
  }
}

SPARSESYNC_NS_END
