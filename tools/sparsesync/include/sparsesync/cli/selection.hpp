// --encoder NAME as a compile-time encoder selection (diff and serve).
#pragma once

#include "exit_codes.hpp"

#include <sparsesync/codec/registry.hpp>

#include <string>

namespace sparsesync::cli {

// Calls f.template operator()<Sel>() with the encoder selection named on the command line.
template <class F>
void visit_selection(const std::string& name, F&& f) {
  if (name == "auto") return f.template operator()<auto_encoder>();
  const auto id = parse_encoder_name(name);
  if (!id) throw failure(exit_usage, "unknown encoder '" + name + "' (" + encoder_names_list() + " or auto)");
  visit_encoder(*id, [&]<class E>(E) { f.template operator()<E>(); });
}

}  // namespace sparsesync::cli
