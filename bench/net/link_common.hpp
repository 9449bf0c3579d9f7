// What the two shaped-link benchmarks share (link_bench: host weights and the host codec; gpu_link_bench:
// device weights and the GPU codec): command-line reading, the link's options, the trainer's control frame
// at the start of each connection, the benchmark model and medians.
#pragma once

#include <sparsesync/core/little_endian.hpp>
#include <sparsesync/gen/adam_bf16.hpp>
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/gen/tensor_set.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace link_bench_common {

namespace ss = sparsesync;
using clock_type = std::chrono::steady_clock;
using json = nlohmann::json;

inline std::string arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 2; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  if (!fallback) throw std::runtime_error(std::string("missing ") + name);
  return fallback;
}
inline std::uint64_t num(int argc, char** argv, const char* name, const char* fallback) { return std::stoull(arg(argc, argv, name, fallback)); }

inline double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

inline std::pair<std::string, std::uint16_t> split_endpoint(const std::string& s) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("expected ADDR:PORT, got " + s);
  return {s.substr(0, colon), static_cast<std::uint16_t>(std::stoul(s.substr(colon + 1)))};
}

inline ss::asio_tcp_options link_options(const std::string& key_file) {
  using namespace std::chrono_literals;
  ss::asio_tcp_options o;
  o.key = ss::load_key_file(key_file);
  // Let the kernel size the socket buffers (the namespaces' tcp_rmem/tcp_wmem allow 64 MiB): a fixed 4 MiB
  // window would cap a 10 ms RTT path near 3 Gbit/s.
  o.socket_buffer_bytes = 0;
  o.receive_timeout = 300s;
  return o;
}

// What the trainer tells the worker at the start of each connection.
enum class mode : std::uint8_t { prime = 1, sync = 2, dense = 3, quit = 4 };
struct control {
  mode m = mode::quit;
  std::uint64_t hidden = 0, layers = 0, vocab = 0, versions = 0;
  std::uint64_t round = 0;  // which of the trainer's rounds, for the worker's log
};
inline constexpr char control_magic[8] = {'L', 'B', 'C', 'T', 'R', 'L', '0', '1'};

inline std::vector<std::byte> encode(const control& c) {
  std::vector<std::byte> out(8 + 1 + 5 * 8);
  std::memcpy(out.data(), control_magic, 8);
  out[8] = static_cast<std::byte>(c.m);
  const std::uint64_t f[5] = {c.hidden, c.layers, c.vocab, c.versions, c.round};
  for (int i = 0; i < 5; ++i) ss::detail::store_le<std::uint64_t>(reinterpret_cast<unsigned char*>(out.data()) + 9 + 8 * i, f[i]);
  return out;
}
inline control decode_control(const std::vector<std::byte>& in) {
  if (in.size() != 49 || std::memcmp(in.data(), control_magic, 8) != 0) throw std::runtime_error("not a link_bench control frame");
  control c;
  c.m = static_cast<mode>(in[8]);
  std::uint64_t f[5];
  for (int i = 0; i < 5; ++i) f[i] = ss::detail::load_le<std::uint64_t>(reinterpret_cast<const unsigned char*>(in.data()) + 9 + 8 * i);
  c.hidden = f[0];
  c.layers = f[1];
  c.vocab = f[2];
  c.versions = f[3];
  c.round = f[4];
  return c;
}

inline ss::model_layout bench_layout(std::uint64_t hidden, std::uint64_t layers, std::uint64_t vocab) {
  return ss::gen::make_gpt_like_layout(hidden, layers, vocab);
}

inline double median_of(const json& rows, const char* key) {
  std::vector<double> v;
  for (const auto& r : rows) v.push_back(r.at(key).get<double>());
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

// What both trainers read from their command line (the options at the top of each benchmark's file).
struct trainer_options {
  std::string host;
  std::uint16_t port = 0;
  ss::asio_tcp_options link;
  std::string out, label;
  double rate_bits = 0, rtt_ms = 0;
  control c;  // the model's shape
  std::uint64_t warmup = 0, versions = 0, bucket_bytes = 0, frame_bytes = 0;
  ss::gen::adam_bf16_options gen;
};

inline trainer_options read_trainer_options(int argc, char** argv) {
  trainer_options o;
  std::tie(o.host, o.port) = split_endpoint(arg(argc, argv, "--connect", nullptr));
  o.link = link_options(arg(argc, argv, "--key-file", nullptr));
  o.out = arg(argc, argv, "--out", nullptr);
  o.label = arg(argc, argv, "--label", "link");
  o.rate_bits = std::stod(arg(argc, argv, "--rate-gbit", "1")) * 1e9;
  o.rtt_ms = std::stod(arg(argc, argv, "--rtt-ms", "0"));
  o.c.hidden = num(argc, argv, "--hidden", "768");
  o.c.layers = num(argc, argv, "--layers", "12");
  o.c.vocab = num(argc, argv, "--vocab", "50257");
  o.warmup = num(argc, argv, "--warmup", "20");
  o.versions = num(argc, argv, "--versions", "5");
  o.bucket_bytes = num(argc, argv, "--bucket-bytes", "16777216");
  o.frame_bytes = num(argc, argv, "--dense-frame-bytes", "16777216");
  o.gen.seed = 1;
  o.gen.lr = std::stod(arg(argc, argv, "--lr", "1e-6"));
  return o;
}

// The RL update stream the trainer sends: element i is version i + 1 (version 1 after the warm-up steps).
inline std::vector<ss::gen::tensor_set> generate_stream(const ss::model_layout& layout, const trainer_options& o) {
  const auto t0 = clock_type::now();
  std::vector<ss::gen::tensor_set> versions;
  ss::gen::adam_bf16_model model(layout, o.gen);
  model.step(o.warmup);  // Adam's first steps move far more elements than the steady state
  versions.push_back(model.snapshot());
  for (std::uint64_t v = 0; v < o.versions; ++v) {
    model.step();
    versions.push_back(model.snapshot());
  }
  std::printf("trainer[%s]: update stream generated in %.1f s\n", o.label.c_str(), since(t0));
  return versions;
}

// The result file's description of the run: link, model, update stream, bucket and frame sizes.
inline json describe_run(const trainer_options& o, const ss::model_layout& layout) {
  json r;
  r["label"] = o.label;
  r["rate_bits_per_second"] = o.rate_bits;
  r["rtt_ms_nominal"] = o.rtt_ms;
  r["model"] = {{"layout", "gpt2-like"}, {"hidden", o.c.hidden}, {"layers", o.c.layers}, {"vocab", o.c.vocab}, {"tensors", layout.size()},
                {"numel", layout.numel()}, {"dense_bytes", layout.bytes()}};
  r["update"] = {{"generator", "gen::adam_bf16_model"}, {"lr", o.gen.lr}, {"warmup_steps", o.warmup}, {"versions", o.versions}};
  r["bucket_bytes"] = o.bucket_bytes;
  r["dense_frame_bytes"] = o.frame_bytes;
  return r;
}

// The worker's side of a run: accepts connections until the trainer's quit or `end`. Each opens with the
// trainer's control frame; `prime(link, c)` handles the prime connection (version 1, before any other) in line,
// `serve(link, c)` each measuring connection on its own thread. Returns the exit code (1 if any connection failed).
template <class Prime, class Serve>
int worker_accept_loop(ss::asio_tcp_listener& listener, clock_type::time_point end, Prime&& prime, Serve&& serve) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(64);
  bool primed = false;
  while (clock_type::now() < end && threads.size() < errors.size()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - clock_type::now());
    auto link = listener.accept(std::max(left, std::chrono::milliseconds(1)));
    std::vector<std::byte> in;
    if (!link.receive(in)) continue;
    const control c = decode_control(in);
    if (c.m == mode::quit) {
      link.close();
      break;
    }
    if (c.m == mode::prime) {
      prime(std::move(link), c);
      primed = true;
      continue;
    }
    if (!primed) throw std::runtime_error("a measuring connection before the prime connection");
    const std::size_t slot = threads.size();
    threads.emplace_back([&, slot, c, link = std::move(link)]() mutable {
      try {
        serve(std::move(link), c);
      } catch (const std::exception& e) {
        errors[slot] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  int rc = 0;
  for (const auto& e : errors)
    if (!e.empty()) {
      std::fprintf(stderr, "worker: %s\n", e.c_str());
      rc = 1;
    }
  return rc;
}

}  // namespace link_bench_common
