// The project's shared data (../shared/data beside the checkout), and how a test program that needs it
// says it did not run: ctest reports exit code 77 as skipped (SKIP_RETURN_CODE in tests/CMakeLists.txt).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace sparsesync::test {

// The directory named by the environment variable SPARSESYNC_SHARED_DIR when set (to check the skip path,
// or to use the data elsewhere), else the one beside the checkout the build was configured from.
inline std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("SPARSESYNC_SHARED_DIR"); env && *env) return env;
  return SPARSESYNC_SHARED_DIR;
}

// Ends the whole test program as skipped, with the reason on stdout. Only for programs whose every test
// needs what is missing (a program with other tests would hide them).
[[noreturn]] inline void skip_program(const std::string& why) {
  std::printf("SKIPPED: %s\n", why.c_str());
  std::fflush(stdout);
  std::exit(77);
}

// Skips the program unless `file` exists.
inline void require_shared_file(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file))
    skip_program(file.string() + " not found (the shared data is only present beside the project's checkout)");
}

}  // namespace sparsesync::test
