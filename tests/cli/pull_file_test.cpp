// pull's way of writing a full transfer to OUT (pull_sink.hpp): page_window lends warm pages to one range of
// an untouched mapping at a time, and sequential_writer writes a data area piece by piece (whole blocks with
// O_DIRECT where the filesystem takes it, the rest plain). The file must be the bytes, wherever the pieces
// start and end and whatever their order.
#include "cli_support.hpp"

#include <sparsesync/cli/page_window.hpp>
#include <sparsesync/cli/sequential_writer.hpp>

#include <doctest/doctest.h>

#include <sys/mman.h>

#include <atomic>
#include <fstream>
#include <random>

using namespace cli_test;
namespace ss = sparsesync;

namespace {

std::size_t mappings() {
  std::ifstream maps("/proc/self/maps");
  std::size_t n = 0;
  for (std::string line; std::getline(maps, line);) ++n;
  return n;
}

}  // namespace

TEST_CASE("page_window: lent pages hold what was written there, go home with it, and leave the range fresh") {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t bytes = 64 * page;
  auto* region = static_cast<unsigned char*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(region != MAP_FAILED);
  ss::tools::page_window w(5 * page);
  const std::size_t before = mappings();
  for (std::size_t i = 0; i < 40; ++i) {
    unsigned char* p = region + i * page + (i % 3) * 1000;  // ranges that start and end inside pages
    const std::size_t n = 4 * page - 3;
    REQUIRE(w.lend(p, n));
    CHECK_FALSE(w.lend(p, n));  // one range at a time
    std::memset(p, static_cast<int>(i + 1), n);
    w.take_back();
    const unsigned char* home = w.home_of(p);
    CHECK(home[0] == i + 1);
    CHECK(home[n - 1] == i + 1);
    CHECK(p[0] == 0);  // the range reads as fresh memory again
    CHECK(p[n - 1] == 0);
  }
  CHECK_FALSE(w.lend(region, 7 * page));  // more pages than the window has
  CHECK(mappings() <= before + 2);        // moving does not leave mappings behind
  ::munmap(region, bytes);
}

TEST_CASE("sequential_writer: the data area byte for byte, in order or not, whatever the pieces and the header's length") {
  temp_dir t;
  std::mt19937_64 rng(3);
  for (const std::uint64_t data_offset : {std::uint64_t{0}, std::uint64_t{8}, std::uint64_t{4104}, std::uint64_t{13}}) {
    for (const bool in_order : {true, false}) {
      const std::size_t size = 300000 + static_cast<std::size_t>(rng() % 5000);
      std::vector<unsigned char> want(size);
      for (auto& b : want) b = static_cast<unsigned char>(rng());
      const auto path = t / ("area-" + std::to_string(data_offset) + (in_order ? "-a" : "-b"));
      const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      REQUIRE(fd >= 0);
      // Pieces of odd lengths; each is handed over in memory placed as pull_sink places it (the same offset
      // within a block as in the file) that is scribbled over first: the writer must not rely on it.
      std::vector<std::pair<std::size_t, std::size_t>> pieces;
      for (std::size_t at = 0; at < size;) {
        const std::size_t n = std::min<std::size_t>(size - at, 1 + rng() % 20000);
        pieces.push_back({at, n});
        at += n;
      }
      if (!in_order) std::shuffle(pieces.begin() + 1, pieces.end(), rng);
      std::atomic<int> done{0};
      std::vector<std::vector<unsigned char>> buffers;
      {
        ss::cli::sequential_writer w(fd, path.string(), data_offset);
        w.restart();
        for (const auto& [at, n] : pieces) {
          const std::uint64_t file_at = data_offset + at;
          const std::size_t room = (n + 3 * 4096 + 4095) / 4096 * 4096;  // a multiple of the alignment, as aligned_alloc wants
          auto* mem = static_cast<unsigned char*>(std::aligned_alloc(4096, room));
          std::memset(mem, 0xEE, room);
          unsigned char* p = mem + 4096 + file_at % 4096;
          std::memcpy(p, want.data() + at, n);
          w.write(p, n, file_at, [&done, mem] {
            std::free(mem);
            ++done;
          });
        }
        w.finish();
        CHECK(done.load() == static_cast<int>(pieces.size()));
      }
      ::close(fd);
      const auto got = read_bytes(path);
      REQUIRE(got.size() == data_offset + size);
      CHECK(std::equal(want.begin(), want.end(), got.begin() + static_cast<std::ptrdiff_t>(data_offset)));
    }
  }
}
