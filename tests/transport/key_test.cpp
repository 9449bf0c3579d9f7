#include "test_support.hpp"

#include <sparsesync/transport/key.hpp>

#include <doctest/doctest.h>

using namespace sparsesync;
using sparsesync_test::error_of;
using sparsesync_test::write_file;

TEST_CASE("key files: hex and raw forms load to the same key") {
  sparsesync_test::temp_dir dir;
  std::string raw(32, '\0');
  for (int i = 0; i < 32; ++i) raw[i] = static_cast<char>(0xA0 + i);  // not all hex digits: read as raw
  std::string hex;
  for (unsigned char c : raw) {
    static const char* d = "0123456789ABCDEF";
    hex += d[c >> 4];
    hex += d[c & 15];
  }
  write_file(dir / "raw.key", raw);
  write_file(dir / "hex.key", "  " + hex + "\r\n");
  const auto a = load_key_file(dir / "raw.key");
  const auto b = load_key_file(dir / "hex.key");
  CHECK(std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin(), b.bytes().end()));
  CHECK(a.id() == b.id());
  CHECK(a.id().size() == 16);

  const auto g = pre_shared_key::generate();
  write_key_file(dir / "gen.key", g);
  CHECK((std::filesystem::status(dir / "gen.key").permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  CHECK(load_key_file(dir / "gen.key").id() == g.id());
  CHECK(g.id() != a.id());
  CHECK(error_of([&] { write_key_file(dir / "gen.key", g); }) == transport_errc::key_file);  // never overwrites
}

TEST_CASE("key files: short, odd, open and missing files are refused with a reason") {
  sparsesync_test::temp_dir dir;
  std::string msg;
  write_file(dir / "short.hex", std::string(62, 'a'));
  CHECK(error_of([&] { load_key_file(dir / "short.hex"); }, &msg) == transport_errc::key_file);
  CHECK(msg.find("64 hex digits") != std::string::npos);
  write_file(dir / "odd.hex", std::string(65, 'a'));
  CHECK(error_of([&] { load_key_file(dir / "odd.hex"); }, &msg) == transport_errc::key_file);
  CHECK(msg.find("odd") != std::string::npos);
  write_file(dir / "short.raw", std::string(31, 'z'));
  CHECK(error_of([&] { load_key_file(dir / "short.raw"); }) == transport_errc::key_file);
  write_file(dir / "open.key", std::string(64, 'b'), std::filesystem::perms::owner_read | std::filesystem::perms::group_read);
  CHECK(error_of([&] { load_key_file(dir / "open.key"); }, &msg) == transport_errc::key_file);
  CHECK(msg.find("chmod 600") != std::string::npos);
  CHECK(error_of([&] { load_key_file(dir / "open.key", {.require_private = false}); }) == transport_errc::ok);
  CHECK(error_of([&] { load_key_file(dir / "missing.key"); }) == transport_errc::key_file);
  CHECK(error_of([&] { pre_shared_key::from_bytes(std::vector<std::byte>(16)); }) == transport_errc::invalid_argument);
}
