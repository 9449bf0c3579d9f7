// The fault tests' worker processes take `--name value` pairs: the value after `name`, or `fallback`.
#pragma once

#include <cstring>

namespace sparsesync_test {

inline const char* arg_value(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

}  // namespace sparsesync_test
