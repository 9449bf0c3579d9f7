// Command-line helpers shared by the examples: `--name value` pairs with defaults.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace example {

inline std::string arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

inline std::uint64_t num(int argc, char** argv, const char* name, const char* fallback) {
  return std::stoull(arg(argc, argv, name, fallback));
}

inline double real(int argc, char** argv, const char* name, const char* fallback) { return std::stod(arg(argc, argv, name, fallback)); }

}  // namespace example
