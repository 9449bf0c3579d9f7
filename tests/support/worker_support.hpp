// What the fault tests' worker processes share: their `--name value` arguments, and the loop that applies versions
// and prints one line per version ("applied VERSION full|patch CHECKSUM"), which the test reads.
#pragma once

#include <cstdio>
#include <cstring>

namespace sparsesync_test {

// The value after `name`, or `fallback`.
inline const char* arg_value(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

// Applies versions until the sender closes (a refused version throws out of it, as next() does).
template <class Receiver>
void apply_and_report(Receiver& rx) {
  while (auto v = rx.next()) {
    std::printf("applied %llu %s %016llx\n", static_cast<unsigned long long>(v->version), v->full ? "full" : "patch",
                static_cast<unsigned long long>(v->checksum));
    std::fflush(stdout);
  }
}

}  // namespace sparsesync_test
