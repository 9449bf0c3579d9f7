// safetensors reading, validation and byte-exact rewriting.
#include "test_dir.hpp"

#include <sparsesync/cli/safetensors.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace tools = sparsesync::tools;
using sparsesync::const_tensor_view;
using sparsesync::dtype;
using sparsesync::errc;
using sparsesync::model_layout;

namespace {

// A file image: the length prefix, `json` verbatim, then `data_size` bytes of a recognisable pattern.
std::vector<unsigned char> craft(const std::string& json, std::uint64_t data_size) {
  // Sized up front and filled in place (vector::insert here trips a GCC 12 -Wstringop-overread false positive).
  std::vector<unsigned char> out(8 + json.size() + data_size);
  sparsesync::detail::store_le<std::uint64_t>(out.data(), json.size());
  std::copy(json.begin(), json.end(), out.begin() + 8);
  for (std::uint64_t i = 0; i < data_size; ++i) out[8 + json.size() + i] = static_cast<unsigned char>(i * 31 + 7);
  return out;
}

// Parses `image` expecting errc::malformed with `needle` in the message.
void expect_malformed(const std::vector<unsigned char>& image, const std::string& needle) {
  try {
    (void)tools::safetensors_file::from_bytes(image, "bad.safetensors");
    FAIL_CHECK("accepted a malformed file; expected: " << needle);
  } catch (const sparsesync::error& e) {
    CHECK(e.code() == errc::malformed);
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("bad.safetensors") != std::string::npos);
    CHECK(msg.find(needle) != std::string::npos);
  }
}

model_layout mixed_layout() {
  // Decreasing element size keeps every tensor aligned, as the reference writer arranges it.
  return model_layout({{"scale", dtype::f32, {7}},
                       {"scalar", dtype::f32, {}},
                       {"embed.weight", dtype::bf16, {3, 5}},
                       {"empty", dtype::bf16, {0, 4}},
                       {"half", dtype::f16, {2, 2, 2}},
                       {"caf\xc3\xa9 \"quoted\"", dtype::bf16, {1}},
                       {"e4", dtype::f8_e4m3, {8}},
                       {"e5", dtype::f8_e5m2, {7}}});
}

struct owned {
  model_layout layout;
  std::vector<std::vector<unsigned char>> data;
  std::vector<const_tensor_view> views;
  explicit owned(model_layout l) : layout(std::move(l)) {
    for (std::size_t i = 0; i < layout.size(); ++i) {
      data.emplace_back(layout[i].bytes() + 8);  // + 8 keeps data() distinct and non-null when empty
      for (std::size_t b = 0; b < layout[i].bytes(); ++b) data.back()[b] = static_cast<unsigned char>(i * 40 + b);
    }
    for (std::size_t i = 0; i < layout.size(); ++i) views.push_back({data[i].data(), layout[i].numel(), layout[i].dtype});
  }
};

}  // namespace

TEST_CASE("builder output reads back: layout, data, metadata, alignment") {
  owned src(mixed_layout());
  const tools::safetensors_metadata meta{{"format", "pt"}, {"step", "42"}};
  const auto image = tools::build_safetensors(src.layout, src.views, meta);
  const auto header = tools::make_safetensors_header(src.layout, meta);
  REQUIRE(image.size() == header.size() + src.layout.bytes());
  CHECK(header.size() % 8 == 0);
  CHECK(std::string(image.begin() + 8, image.begin() + 8 + 25) == "{\"__metadata__\":{\"format\"");

  const auto f = tools::safetensors_file::from_bytes(image, "built");
  REQUIRE(f.size() == src.layout.size());
  CHECK(f.layout().hash() == src.layout.hash());
  CHECK(f.metadata() == meta);
  CHECK(std::vector<unsigned char>(f.header_bytes().begin(), f.header_bytes().end()) == header);
  CHECK(std::vector<unsigned char>(f.bytes().begin(), f.bytes().end()) == image);
  CHECK(reinterpret_cast<std::uintptr_t>(f.data_area().data()) % 64 == 0);
  for (std::size_t i = 0; i < f.size(); ++i) {
    const auto v = f.tensor(i);
    CHECK(v.dtype == src.layout[i].dtype);
    CHECK(v.numel == src.layout[i].numel());
    CHECK(std::memcmp(v.data, src.data[i].data(), src.layout[i].bytes()) == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(v.data) % sparsesync::size_of(v.dtype) == 0);
  }

  test_dir dir;
  tools::write_safetensors_atomic(dir.path / "m.safetensors", src.layout, src.views, meta);
  CHECK(read_bytes(dir.path / "m.safetensors") == image);
  const auto g = tools::safetensors_file::read(dir.path / "m.safetensors");
  CHECK(std::vector<unsigned char>(g.bytes().begin(), g.bytes().end()) == image);
  CHECK(g.name() == (dir.path / "m.safetensors").string());
}

TEST_CASE("layout follows data offsets; header bytes + data rebuild the file exactly") {
  // Keys out of data order, odd spacing, metadata last, a 2-byte-aligned tensor after a 4-byte one.
  const std::string json =
      "{ \"b\" : {\"shape\":[2],\"dtype\":\"F32\",\"data_offsets\":[4,12]},\n"
      "  \"a\": {\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},\n"
      "  \"z0\": {\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[12,12]},\n"
      "  \"c\": {\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[12,18]},\n"
      "  \"__metadata__\": {\"k\": \"v\"} }";
  const auto image = craft(json, 18);
  auto f = tools::safetensors_file::from_bytes(image, "crafted");
  REQUIRE(f.size() == 4);
  CHECK(f.layout()[0].name == "a");
  CHECK(f.layout()[1].name == "b");
  CHECK(f.layout()[2].name == "z0");
  CHECK(f.layout()[3].name == "c");
  CHECK(f.header().offsets == std::vector<std::uint64_t>{0, 4, 12, 12, 18});
  CHECK(f.header_bytes().size() == 8 + json.size());
  CHECK(f.metadata().at("k") == "v");

  test_dir dir;
  const auto views = f.views();
  tools::write_safetensors_atomic(dir.path / "copy.safetensors", f.header_bytes(), views);
  CHECK(read_bytes(dir.path / "copy.safetensors") == image);

  // Changed tensor data through a mutable view, written as header + data area.
  static_cast<unsigned char*>(f.tensor(1).data)[0] ^= 0xFF;
  tools::write_safetensors_atomic(dir.path / "patched.safetensors", f.header_bytes(), std::as_const(f).data_area());
  auto expect = image;
  expect[8 + json.size() + 4] ^= 0xFF;
  CHECK(read_bytes(dir.path / "patched.safetensors") == expect);
}

TEST_CASE("empty and minimal files") {
  const auto f = tools::safetensors_file::from_bytes(craft("{}", 0));
  CHECK(f.size() == 0);
  CHECK(f.data_area().empty());
  const auto g = tools::safetensors_file::from_bytes(craft("{\"__metadata__\":{}}", 0));
  CHECK(g.metadata().empty());
}

TEST_CASE("malformed files are refused with a message naming the file and the problem") {
  const std::string ok = R"({"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}})";
  CHECK(tools::safetensors_file::from_bytes(craft(ok, 8)).size() == 1);

  expect_malformed({1, 0, 0}, "shorter than the 8-byte header length");
  expect_malformed({}, "shorter than the 8-byte header length");
  {
    auto image = craft(ok, 8);
    sparsesync::detail::store_le<std::uint64_t>(image.data(), image.size());  // points past EOF
    expect_malformed(image, "exceeds the file size");
    sparsesync::detail::store_le<std::uint64_t>(image.data(), ~std::uint64_t(0));
    expect_malformed(image, "exceeds the limit");
  }
  expect_malformed(craft(ok, 7), "past the data area");      // truncated data
  expect_malformed(craft(ok, 9), "bytes after the last tensor");
  expect_malformed(craft("{\"a\":{\"dtype\":", 0), "not valid JSON");
  expect_malformed(craft("\xff\xfe garbage", 0), "not valid JSON");
  expect_malformed(craft(R"({"a":{"dtype":"BF16\xff","shape":[1],"data_offsets":[0,2]}})", 2), "not valid JSON");  // bad UTF-8
  expect_malformed(craft("[1,2]", 0), "not a JSON object");
  expect_malformed(craft(R"({"a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},"a":{"dtype":"BF16","shape":[1],"data_offsets":[2,4]}})", 4),
                   "'a' twice");
  expect_malformed(craft(R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[2,6]}})", 6),
                   "overlaps");
  expect_malformed(craft(R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[6,10]}})", 10),
                   "hole of 2 bytes");
  expect_malformed(craft(R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[2,6]}})", 6), "hole of 2 bytes before tensor 'a'");
  expect_malformed(craft(R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", 4), "6 bytes but data_offsets span 4");
  expect_malformed(craft(R"({"weird":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8), "tensor 'weird' has unsupported dtype 'I64'");
  expect_malformed(craft(R"({"a":{"dtype":"bf16","shape":[1],"data_offsets":[0,2]}})", 2), "unsupported dtype 'bf16'");
  expect_malformed(craft(R"({"a":{"shape":[1],"data_offsets":[0,2]}})", 2), "no dtype");
  expect_malformed(craft(R"({"a":{"dtype":"BF16","data_offsets":[0,2]}})", 2), "no shape");
  expect_malformed(craft(R"({"a":{"dtype":"BF16","shape":[1],"data_offsets":[0]}})", 2), "no data_offsets");
  expect_malformed(craft(R"({"a":{"dtype":"BF16","shape":[-1],"data_offsets":[0,2]}})", 2), "shape entry is not a non-negative integer");
  expect_malformed(craft(R"({"a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2.0]}})", 2), "data_offsets[1] is not");
  expect_malformed(craft(R"({"a":{"dtype":"BF16","shape":[0],"data_offsets":[2,0]}})", 2), "run backwards");
  expect_malformed(craft(R"({"a":{"dtype":"BF16","shape":[4294967296,4294967296],"data_offsets":[0,2]}})", 2), "too many elements");
  expect_malformed(craft(R"({"a":"x"})", 0), "tensor 'a' is not an object");
  expect_malformed(craft(R"({"__metadata__":{"k":1}})", 0), "value of 'k' is not a string");
  expect_malformed(craft(R"({"__metadata__":[]})", 0), "__metadata__ is not an object");
  expect_malformed(craft(R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[1,3]}})", 3),
                   "not aligned");
}

TEST_CASE("i/o errors name the file") {
  test_dir dir;
  try {
    (void)tools::safetensors_file::read(dir.path / "missing.safetensors");
    FAIL("expected an error");
  } catch (const sparsesync::error& e) {
    CHECK(e.code() == errc::io);
    CHECK(std::string(e.what()).find("missing.safetensors") != std::string::npos);
  }
  CHECK_THROWS_AS((void)tools::safetensors_file::read(dir.path), sparsesync::error);
  write_bytes(dir.path / "short", {1, 2, 3});
  try {
    (void)tools::safetensors_file::read(dir.path / "short");
    FAIL("expected an error");
  } catch (const sparsesync::error& e) {
    CHECK(e.code() == errc::malformed);
  }
  // A huge announced header length must be refused before anything that size is allocated.
  auto image = craft("{}", 0);
  sparsesync::detail::store_le<std::uint64_t>(image.data(), std::uint64_t(1) << 40);
  write_bytes(dir.path / "liar", image);
  CHECK_THROWS_AS((void)tools::safetensors_file::read(dir.path / "liar"), sparsesync::error);
}

TEST_CASE("the writer validates before writing and leaves nothing on failure") {
  owned src(mixed_layout());
  test_dir dir;
  const auto target = dir.path / "out.safetensors";
  const auto header = tools::make_safetensors_header(src.layout);
  auto wrong = src.views;
  wrong.pop_back();
  CHECK_THROWS_AS(tools::write_safetensors_atomic(target, std::span<const unsigned char>(header), wrong), sparsesync::error);
  wrong = src.views;
  wrong[1].numel += 1;
  CHECK_THROWS_AS(tools::write_safetensors_atomic(target, std::span<const unsigned char>(header), wrong), sparsesync::error);
  const std::vector<unsigned char> short_data(src.layout.bytes() - 1);
  CHECK_THROWS_AS(tools::write_safetensors_atomic(target, std::span<const unsigned char>(header), std::span<const unsigned char>(short_data)),
                  sparsesync::error);
  CHECK(dir.entries().empty());

  CHECK_THROWS_AS(tools::write_safetensors_atomic(dir.path / "no" / "dir.safetensors", src.layout, src.views), sparsesync::error);
  CHECK(dir.entries().empty());
}

TEST_CASE("the builder refuses names safetensors cannot carry") {
  CHECK_THROWS_AS(tools::make_safetensors_header(model_layout({{"x", dtype::bf16, {1}}, {"x", dtype::bf16, {1}}})), sparsesync::error);
  CHECK_THROWS_AS(tools::make_safetensors_header(model_layout({{"__metadata__", dtype::bf16, {1}}})), sparsesync::error);
  CHECK_THROWS_AS(tools::make_safetensors_header(model_layout({{"bad\xff", dtype::bf16, {1}}})), sparsesync::error);
  CHECK_THROWS_AS(tools::make_safetensors_header(model_layout({{"a", dtype::f8_e4m3, {3}}, {"b", dtype::f16, {1}}})), sparsesync::error);
}
