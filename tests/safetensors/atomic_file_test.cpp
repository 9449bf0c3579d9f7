// Atomic replacement: complete new content or the old state, never a partial file or a stray temporary.
#include "test_dir.hpp"

#include <sparsesync/cli/atomic_file.hpp>

#include <doctest/doctest.h>

#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace tools = sparsesync::tools;

namespace {
std::vector<unsigned char> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
}  // namespace

TEST_CASE("write_file_atomic creates and replaces") {
  test_dir dir;
  const auto target = dir.path / "out.bin";
  const auto a = bytes_of("hello "), b = bytes_of("world");
  const std::span<const unsigned char> parts[] = {a, b};
  tools::write_file_atomic(target, parts);
  CHECK(read_bytes(target) == bytes_of("hello world"));
  CHECK(dir.entries().size() == 1);

  ::chmod(target.c_str(), 0640);
  tools::write_file_atomic(target, [](tools::file_sink& s) { s.write("x", 1); });
  CHECK(read_bytes(target) == bytes_of("x"));
  struct stat st {};
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);  // an existing file's permissions survive replacement
  CHECK(dir.entries().size() == 1);

  // Large writes bypass the buffer and must still arrive in order.
  std::vector<unsigned char> big(3 << 20);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<unsigned char>(i * 7);
  tools::write_file_atomic(target, [&](tools::file_sink& s) {
    s.write(std::span<const unsigned char>(big).first(10));
    s.write(std::span<const unsigned char>(big).subspan(10));
  });
  CHECK(read_bytes(target) == big);
}

TEST_CASE("a failing producer leaves the old file and no temporary") {
  test_dir dir;
  const auto target = dir.path / "keep.bin";
  write_bytes(target, bytes_of("old"));
  CHECK_THROWS_AS(tools::write_file_atomic(target,
                                           [](tools::file_sink& s) {
                                             s.write("partial", 7);
                                             throw std::runtime_error("producer failed");
                                           }),
                  std::runtime_error);
  CHECK(read_bytes(target) == bytes_of("old"));
  CHECK(dir.entries().size() == 1);
}

TEST_CASE("a failing rename removes the temporary") {
  test_dir dir;
  const auto target = dir.path / "is_a_dir";
  std::filesystem::create_directory(target);
  std::filesystem::create_directory(target / "child");  // a non-empty directory cannot be renamed over
  try {
    tools::write_file_atomic(target, [](tools::file_sink& s) { s.write("data", 4); });
    FAIL("expected an error");
  } catch (const sparsesync::error& e) {
    CHECK(e.code() == sparsesync::errc::io);
    CHECK(std::string(e.what()).find("is_a_dir") != std::string::npos);
  }
  CHECK(dir.entries().size() == 1);
}

TEST_CASE("missing or unwritable directories fail cleanly") {
  test_dir dir;
  CHECK_THROWS_AS(tools::write_file_atomic(dir.path / "no" / "such" / "dir.bin", [](tools::file_sink&) {}), sparsesync::error);
  CHECK(dir.entries().empty());

  const auto locked = dir.path / "locked";
  std::filesystem::create_directory(locked);
  std::filesystem::permissions(locked, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  if (::geteuid() == 0) {
    MESSAGE("running as root: permission bits do not stop writes, unwritable-directory check skipped");
  } else {
    CHECK_THROWS_AS(tools::write_file_atomic(locked / "f.bin", [](tools::file_sink& s) { s.write("x", 1); }), sparsesync::error);
    CHECK(std::filesystem::is_empty(locked));
  }
}
