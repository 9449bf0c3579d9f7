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

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace ss = sparsesync;

namespace {

// The worker's link: passes frames through, and stalls forever at the first bucket of version `stall_at`.
class stalling_link {
 public:
  using transport_concept = ss::transport_tag;
  stalling_link(ss::asio_tcp_transport inner, std::uint64_t stall_at) : inner_(std::move(inner)), stall_at_(stall_at) {}
  void send(std::span<const std::byte> m) { inner_.send(m); }
  bool receive(std::vector<std::byte>& out) {
    if (!inner_.receive(out)) return false;
    const auto type = ss::sync::type_of(out);
    if (type == ss::sync::message_type::version_begin) {
      ss::patch_prologue pro;
      if (ss::parse_patch_prologue(ss::sync::body_of(out), pro)) version_ = pro.header.target_version;
    } else if (type == ss::sync::message_type::bucket && stall_at_ && version_ == stall_at_) {
      std::printf("stalled %llu\n", static_cast<unsigned long long>(version_));
      std::fflush(stdout);
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    return true;
  }
  void close() { inner_.close(); }
  [[nodiscard]] std::size_t max_frame_size() const { return inner_.max_frame_size(); }

 private:
  ss::asio_tcp_transport inner_;
  std::uint64_t stall_at_;
  std::uint64_t version_ = 0;
};

const char* arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

}  // namespace

int main(int argc, char** argv) try {
  const auto port = static_cast<std::uint16_t>(std::stoul(arg(argc, argv, "--port", "0")));
  const std::uint64_t stall_at = std::stoull(arg(argc, argv, "--stall-at", "0"));
  ss::asio_tcp_options opt;
  opt.key = ss::load_key_file(arg(argc, argv, "--key-file", ""));
  const auto layout = ss::gen::make_gpt_like_layout(128, 4, 4000);
  ss::gen::tensor_set weights(layout);
  auto views = weights.mutable_views();
  ss::sync::receiver<stalling_link> rx(layout, views, stalling_link(ss::connect_retrying("127.0.0.1", port, opt), stall_at));
  while (auto v = rx.next()) {
    std::printf("applied %llu %s %016llx\n", static_cast<unsigned long long>(v->version), v->full ? "full" : "patch",
                static_cast<unsigned long long>(v->checksum));
    std::fflush(stdout);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "sync_test_worker: %s\n", e.what());
  return 1;
}
