// A rollout worker process for the fault tests (killed_worker_test.cpp): receives versions over asio_tcp with
// the key in --key-file and prints one line per version ("applied VERSION full|patch CHECKSUM") to stdout. With
// --stall-at V it stops reading once the first bucket of version V arrived, prints "stalled V" and sleeps: a
// worker that hangs mid-version (the test then kills it or leaves it stalled).
//
//   sync_test_worker --port P --key-file F [--stall-at V]
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/gen/tensor_set.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include "stalling_link.hpp"
#include "worker_support.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace ss = sparsesync;

namespace {

using sparsesync_test::arg_value;

}  // namespace

int main(int argc, char** argv) try {
  const auto port = static_cast<std::uint16_t>(std::stoul(arg_value(argc, argv, "--port", "0")));
  const std::uint64_t stall_at = std::stoull(arg_value(argc, argv, "--stall-at", "0"));
  ss::asio_tcp_options opt;
  opt.key = ss::load_key_file(arg_value(argc, argv, "--key-file", ""));
  const auto layout = ss::gen::make_gpt_like_layout(128, 4, 4000);
  ss::gen::tensor_set weights(layout);
  auto views = weights.mutable_views();
  using link = sparsesync_test::stalling_link<ss::asio_tcp_transport>;
  ss::sync::receiver<link> rx(layout, views, link(ss::connect_retrying("127.0.0.1", port, opt), stall_at, ss::sync::message_type::bucket));
  sparsesync_test::apply_and_report(rx);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "sync_test_worker: %s\n", e.what());
  return 1;
}
