// --link-gbps and --receivers: what `--encoder auto` weighs entropy's fewer bytes against (format/link_cost.hpp).
#pragma once

#include "exit_codes.hpp"

#include <sparsesync/format/link_cost.hpp>

#include <string>

namespace sparsesync::cli {

struct link_args {
  double gbps = 0;                  // 0: not stated (auto then leaves entropy out)
  std::string receivers = "gpu";    // where the receivers decode: gpu or cpu
};

inline link_cost to_link_cost(const link_args& a) {
  if (!(a.gbps >= 0)) throw failure(exit_usage, "--link-gbps must be 0 (not stated) or positive");
  const auto walk = link_cost::receivers_named(a.receivers);
  if (!walk) throw failure(exit_usage, "--receivers must be gpu or cpu, not '" + a.receivers + "'");
  return link_cost::gigabits(a.gbps, *walk);
}

}  // namespace sparsesync::cli
