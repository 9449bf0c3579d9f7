// Helpers for the CLI tests: run the built `sparsesync` binary, make safetensors checkpoints, read files.
#pragma once

#include "temp_dir.hpp"

#include <sparsesync/sparsesync.hpp>

#include <sparsesync/cli/safetensors.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace cli_test {

namespace fs = std::filesystem;

using temp_dir = sparsesync::test::temp_dir;

inline std::vector<unsigned char> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const fs::path& p, std::span<const unsigned char> b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

inline std::string read_text(const fs::path& p) {
  const auto b = read_bytes(p);
  return {b.begin(), b.end()};
}

struct run_result {
  int rc = -1;
  std::string out, err;
};

// Runs the CLI with `args` (no shell), stdin from /dev/null, stdout and stderr captured through files in `dir`.
inline run_result run_cli(const std::vector<std::string>& args, const fs::path& dir) {
  const fs::path out_path = dir.parent_path() / (dir.filename().string() + ".stdout");
  const fs::path err_path = dir.parent_path() / (dir.filename().string() + ".stderr");
  std::vector<std::string> argv_s{SPARSESYNC_CLI_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    const int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || o < 0 || e < 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error("waitpid failed");
  run_result r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(out_path);
  r.err = read_text(err_path);
  fs::remove(out_path);
  fs::remove(err_path);
  return r;
}

// Writes a canonical safetensors file for `layout` with `tensors` (layout order).
inline void write_checkpoint(const fs::path& p, const sparsesync::model_layout& layout, std::span<const sparsesync::const_tensor_view> tensors,
                             const sparsesync::tools::safetensors_metadata& meta = {}) {
  sparsesync::tools::write_safetensors_atomic(p, layout, tensors, meta);
}

// Elements whose bit patterns differ between two files of the same layout.
inline std::uint64_t count_changes(const fs::path& a, const fs::path& b) {
  const auto fa = sparsesync::tools::safetensors_file::read(a);
  const auto fb = sparsesync::tools::safetensors_file::read(b);
  std::uint64_t n = 0;
  for (std::size_t t = 0; t < fa.size(); ++t) {
    const auto va = fa.tensor(t), vb = fb.tensor(t);
    const unsigned w = sparsesync::size_of(va.dtype);
    const auto* pa = static_cast<const unsigned char*>(va.data);
    const auto* pb = static_cast<const unsigned char*>(vb.data);
    for (std::uint64_t i = 0; i < va.numel; ++i) n += std::memcmp(pa + i * w, pb + i * w, w) != 0;
  }
  return n;
}

}  // namespace cli_test
