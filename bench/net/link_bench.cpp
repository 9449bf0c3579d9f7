// The shaped-link benchmark's two sides (bench/net/run_shaped.sh runs them in two network namespaces).
//
// The trainer generates a GPT-shaped model's RL update stream (AdamW, lr 1e-6, after warm-up steps) once,
// then sends each version over the same link in four ways, one after the other, each on its own connection
// (all four open for the whole run, so every way meets the same moments of a shared machine's noise):
//   sparse_pipelined   sync::sender, buckets of --bucket-bytes: bucket i is on the wire while i+1 is encoded;
//   sparse_one_bucket  sync::sender, one bucket: the whole patch is encoded before its first byte is sent;
//   sparse_preencoded  the same patch encoded beforehand (timed apart), then sent with the session protocol
//                      to the same sync::receiver: the link and apply cost a trainer with a GPU encoder sees;
//   dense              the BF16 weights in frames of --dense-frame-bytes, acknowledged after the last one.
// Every time runs from the first byte handed to the transport (publish() call, or first send) until the
// worker's acknowledgement has arrived: verified and applied, or, for dense, received and copied.
//
//   link_bench worker  --listen ADDR:PORT --key-file K [--log worker.jsonl] [--max-seconds 1800]
//   link_bench trainer --connect ADDR:PORT --key-file K --out result.json [--label 1gbit] [--rate-gbit 1]
//                      [--rtt-ms 10] [--hidden 768] [--layers 12] [--vocab 50257] [--warmup 20] [--versions 5]
//                      [--lr 1e-6] [--bucket-bytes 16777216] [--dense-frame-bytes 16777216]
#include <sparsesync/gen/adam_bf16.hpp>
#include <sparsesync/gen/layouts.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "link_common.hpp"

namespace ss = sparsesync;
using namespace std::chrono_literals;
using namespace link_bench_common;

namespace {

// ---------------------------------------------------------------- worker

// One connection of the worker: the dense baseline, or a sync::receiver starting from version 1.
void serve_connection(ss::asio_tcp_transport link, const control c, const ss::model_layout& layout, const ss::gen::tensor_set& initial,
                      std::ofstream& log, std::mutex& log_mutex) {
  auto write_log = [&](const json& j) {
    std::lock_guard lock(log_mutex);
    if (log) log << j.dump() << "\n" << std::flush;
  };
  std::vector<std::byte> in;
  if (c.m == mode::dense) {
    // Frames straight into one flat copy of the weights, acknowledged after the last byte of each version.
    std::vector<unsigned char> flat(layout.bytes());
    for (std::uint64_t v = 0; v < c.versions; ++v) {
      std::uint64_t got = 0;
      const auto t0 = clock_type::now();
      while (got < flat.size()) {
        if (!link.receive(in)) throw std::runtime_error("dense: the trainer closed inside a version");
        if (in.size() > flat.size() - got) throw std::runtime_error("dense: more bytes than the model");
        std::memcpy(flat.data() + got, in.data(), in.size());
        got += in.size();
      }
      const std::byte ack[1] = {std::byte{1}};
      link.send(ack);
      write_log({{"round", c.round}, {"mode", "dense"}, {"index", v}, {"bytes", got}, {"seconds", since(t0)}});
    }
    while (link.receive(in)) {
    }
    link.close();
    return;
  }
  ss::gen::tensor_set weights = initial;  // every sync connection starts from version 1
  auto views = weights.mutable_views();
  ss::sync::receiver_options ro;
  ro.has_version = true;
  ro.version = 1;
  ss::sync::receiver<ss::asio_tcp_transport> rx(layout, views, std::move(link), ro);
  while (auto v = rx.next())
    write_log({{"round", c.round}, {"mode", "sync"}, {"version", v->version}, {"full", v->full}, {"changed", v->changed},
               {"payload_bytes", v->payload_bytes}, {"seconds", v->seconds}});
  rx.close();
}

int run_worker(int argc, char** argv) {
  const auto [addr, port] = split_endpoint(arg(argc, argv, "--listen", nullptr));
  const auto opts = link_options(arg(argc, argv, "--key-file", nullptr));
  const std::string log_path = arg(argc, argv, "--log", "");
  const auto end = clock_type::now() + std::chrono::seconds(num(argc, argv, "--max-seconds", "1800"));
  std::ofstream log;
  std::mutex log_mutex;
  if (!log_path.empty()) log.open(log_path);
  ss::asio_tcp_listener listener(addr, port, opts);
  std::printf("worker: listening on %s:%u\n", addr.c_str(), listener.port());
  std::fflush(stdout);

  std::optional<ss::model_layout> layout;
  std::optional<ss::gen::tensor_set> initial;
  const auto prime = [&](ss::asio_tcp_transport link, const control& c) {  // version 1 in full, every later connection's start
    layout = bench_layout(c.hidden, c.layers, c.vocab);
    ss::gen::tensor_set w(*layout);
    auto views = w.mutable_views();
    ss::sync::receiver<ss::asio_tcp_transport> rx(*layout, views, std::move(link));
    while (auto v = rx.next()) std::printf("worker: version %llu received in full\n", static_cast<unsigned long long>(v->version));
    rx.close();
    initial = std::move(w);
  };
  return worker_accept_loop(listener, end, prime, [&](ss::asio_tcp_transport link, const control& c) {
    serve_connection(std::move(link), c, *layout, *initial, log, log_mutex);
  });
}

// ---------------------------------------------------------------- trainer

struct stream {
  std::vector<ss::gen::tensor_set> versions;  // versions[i] is version i + 1
};

using ss::connect_retrying;

using tcp_sender = ss::sync::sender<ss::auto_encoder, ss::fixed_bytes, ss::asio_tcp_transport>;

// A sync::sender on its own connection; version 1 is what the worker already holds (nothing crosses the
// link for it), every later version is timed from publish() to the worker's acknowledgement.
class sender_mode {
 public:
  sender_mode(const std::string& host, std::uint16_t port, const ss::asio_tcp_options& opts, control c, const stream& s,
              std::uint64_t bucket_bytes)
      : tx_(s.versions.front().layout(), options(), ss::fixed_bytes{bucket_bytes}) {
    auto link = connect_retrying(host, port, opts);
    link.send(encode(c));
    tx_.add_receiver(std::move(link));
    if (!tx_.wait_for_receivers(1, 60s)) throw std::runtime_error("the worker did not complete the handshake");
    const auto first = s.versions.front().views();
    if (tx_.publish(1, first).acknowledged != 1) throw std::runtime_error("the worker does not hold version 1");
  }

  json send(const stream& s, std::size_t i, double rate_bits) {
    const auto views = s.versions[i].views();
    const auto r = tx_.publish(i + 1, views);
    if (r.acknowledged != 1) throw std::runtime_error("version " + std::to_string(i + 1) + " was not acknowledged");
    return {{"version", r.version},
            {"changed", r.changed},
            {"density", static_cast<double>(r.changed) / static_cast<double>(r.numel)},
            {"payload_bytes", r.payload_bytes},
            {"seconds", r.seconds},
            {"encode_seconds", r.encode_seconds},
            {"after_encode_seconds", r.seconds - r.encode_seconds},
            {"floor_seconds", 8.0 * static_cast<double>(r.payload_bytes) / rate_bits}};
  }

  void close() { tx_.close(); }

 private:
  static ss::sync::sender_options options() {
    ss::sync::sender_options so;
    so.history = 2;
    so.ack_timeout = 300s;
    return so;
  }
  tcp_sender tx_;
};

// The patch of each version encoded first (timed apart), then sent with the session protocol
// (docs/PROTOCOL.md) to the worker's sync::receiver, which verifies, applies and acknowledges it as usual.
class preencoded_mode {
 public:
  preencoded_mode(const std::string& host, std::uint16_t port, const ss::asio_tcp_options& opts, control c, const stream& s,
                  std::uint64_t bucket_bytes)
      : link_(connect_retrying(host, port, opts)), bucket_bytes_(bucket_bytes) {
    namespace sy = ss::sync;
    link_.send(encode(c));
    const auto& layout = s.versions.front().layout();
    std::vector<std::byte> in;
    sy::hello h;
    if (!link_.receive(in) || !sy::decode(in, h).ok() || h.layout_hash != layout.hash() || !h.has_version || h.version != 1)
      throw std::runtime_error("preencoded: unexpected hello");
    link_.send(sy::encode(sy::welcome{layout.hash(), true, 1}));
  }

  json send(const stream& s, std::size_t i, double rate_bits) {
    namespace sy = ss::sync;
    const auto& layout = s.versions.front().layout();
    const auto base = s.versions[i - 1].views();
    const auto target = s.versions[i].views();
    const std::vector<ss::const_tensor_view> b(base.begin(), base.end()), t(target.begin(), target.end());
    ss::patch_options po;
    po.encode = {ss::value_mode::ulp, ss::default_log2_chunk};
    po.base_version = i;
    po.target_version = i + 1;
    po.include_layout = false;
    auto t0 = clock_type::now();
    ss::patch_encoder<ss::auto_encoder, ss::fixed_bytes> enc(layout, b, t, po, ss::fixed_bytes{bucket_bytes_});
    // As sync::sender does: the previous version's bucket targets are this one's bucket bases (same plan).
    if (last_targets_.size() == enc.bucket_count()) enc.use_known_base_checksums(last_targets_);
    std::vector<std::vector<std::byte>> messages;
    std::vector<unsigned char> bytes;
    enc.prologue(bytes);
    std::uint64_t payload = bytes.size(), changed = 0;
    messages.push_back(sy::wrap(sy::message_type::version_begin, bytes));
    while (enc.next_bucket() < enc.bucket_count()) {
      bytes.clear();
      enc.encode_next(bytes);
      ss::bucket_header bh;
      (void)ss::detail::read_bucket_header(bytes, bh);
      changed += bh.changed;
      payload += bytes.size();
      messages.push_back(sy::wrap(sy::message_type::bucket, bytes));
    }
    unsigned char end[ss::patch_header_bytes];
    enc.final_header(end);
    messages.push_back(sy::wrap(sy::message_type::version_end, end));
    last_targets_ = enc.bucket_target_checksums();
    const double encode_s = since(t0);
    t0 = clock_type::now();
    for (const auto& m : messages) link_.send(m);
    std::vector<std::byte> in;
    if (!link_.receive(in)) throw std::runtime_error("preencoded: the worker closed the connection");
    const double seconds = since(t0);
    sy::ack a;
    if (!sy::decode(in, a).ok() || a.version != i + 1 || a.checksum != enc.header().target_checksum)
      throw std::runtime_error("preencoded: the worker did not acknowledge version " + std::to_string(i + 1));
    return {{"version", i + 1},
            {"changed", changed},
            {"density", static_cast<double>(changed) / static_cast<double>(layout.numel())},
            {"payload_bytes", payload},
            {"seconds", seconds},
            {"encode_only_seconds", encode_s},
            {"floor_seconds", 8.0 * static_cast<double>(payload) / rate_bits}};
  }

  void close() { link_.close(); }

 private:
  ss::asio_tcp_transport link_;
  std::uint64_t bucket_bytes_;
  std::vector<std::uint64_t> last_targets_;
};

// The dense baseline: every tensor's bytes in place, in frames of at most frame_bytes, one ack per version.
class dense_mode {
 public:
  dense_mode(const std::string& host, std::uint16_t port, const ss::asio_tcp_options& opts, control c, std::uint64_t frame_bytes)
      : link_(connect_retrying(host, port, opts)), frame_bytes_(frame_bytes) {
    c.m = mode::dense;
    link_.send(encode(c));
  }

  json send(const stream& s, std::size_t i, double rate_bits) {
    const auto& w = s.versions[i];
    const auto t0 = clock_type::now();
    std::uint64_t sent = 0;
    for (std::size_t t = 0; t < w.layout().size(); ++t) {
      const auto* p = static_cast<const std::byte*>(w.tensor(t).data);
      const std::uint64_t n = w.layout()[t].bytes();
      for (std::uint64_t at = 0; at < n; at += frame_bytes_) {
        const std::uint64_t len = std::min(frame_bytes_, n - at);
        link_.send({p + at, len});
        sent += len;
      }
    }
    std::vector<std::byte> in;
    if (!link_.receive(in)) throw std::runtime_error("dense: the worker closed the connection");
    const double seconds = since(t0);
    return {{"version", i + 1}, {"bytes", sent}, {"seconds", seconds}, {"floor_seconds", 8.0 * static_cast<double>(sent) / rate_bits}};
  }

  void close() {
    link_.close();
    std::vector<std::byte> in;
    while (link_.receive(in)) {
    }
  }

 private:
  ss::asio_tcp_transport link_;
  std::uint64_t frame_bytes_;
};

int run_trainer(int argc, char** argv) {
  const auto o = read_trainer_options(argc, argv);
  const std::string& host = o.host;
  const std::uint16_t port = o.port;
  const ss::asio_tcp_options& opts = o.link;
  const std::string& label = o.label;
  const double rate_bits = o.rate_bits;
  control c = o.c;
  const std::uint64_t warmup = o.warmup, versions = o.versions, bucket_bytes = o.bucket_bytes, frame_bytes = o.frame_bytes;

  const auto layout = bench_layout(c.hidden, c.layers, c.vocab);
  std::printf("trainer[%s]: %.1f M BF16 parameters (%.1f MB), %llu warm-up steps, %llu versions\n", label.c_str(),
              static_cast<double>(layout.numel()) / 1e6, static_cast<double>(layout.bytes()) / 1e6, static_cast<unsigned long long>(warmup),
              static_cast<unsigned long long>(versions));
  std::fflush(stdout);
  stream s;
  s.versions = generate_stream(layout, o);
  json result = describe_run(o, layout);

  {  // the worker's starting point: version 1 in full (also a figure worth having)
    c.m = mode::prime;
    auto link = connect_retrying(host, port, opts);
    link.send(encode(c));
    tcp_sender tx(layout, {}, ss::fixed_bytes{bucket_bytes});
    tx.add_receiver(std::move(link));
    if (!tx.wait_for_receivers(1, 60s)) throw std::runtime_error("the worker did not complete the handshake");
    const auto v1 = s.versions[0].views();
    const auto r = tx.publish(1, v1);
    result["initial_full_transfer"] = {{"payload_bytes", r.payload_bytes}, {"seconds", r.seconds}, {"encode_seconds", r.encode_seconds}};
    std::printf("trainer[%s]: full transfer of version 1: %llu bytes in %.2f s\n", label.c_str(),
                static_cast<unsigned long long>(r.payload_bytes), r.seconds);
    tx.close();
  }
  // The four ways, each on its own connection, all open at once; each version goes through them in turn.
  c.m = mode::sync;
  c.versions = versions;
  c.round = 1;
  sender_mode pipelined_link(host, port, opts, c, s, bucket_bytes);
  c.round = 2;
  sender_mode one_bucket_link(host, port, opts, c, s, std::uint64_t(1) << 40);
  c.round = 3;
  preencoded_mode preencoded_link(host, port, opts, c, s, bucket_bytes);
  c.round = 4;
  dense_mode dense_link(host, port, opts, c, frame_bytes);
  json rows_p = json::array(), rows_o = json::array(), rows_e = json::array(), rows_d = json::array();
  for (std::size_t i = 1; i < s.versions.size(); ++i) {
    const auto p = pipelined_link.send(s, i, rate_bits);
    const auto o = one_bucket_link.send(s, i, rate_bits);
    const auto e = preencoded_link.send(s, i, rate_bits);
    const auto d = dense_link.send(s, i, rate_bits);
    std::printf("trainer[%s]: v%zu: %.3f%% changed, %llu bytes, floor %.1f ms | pipelined %.1f ms (encode %.1f) | one bucket %.1f ms | "
                "pre-encoded %.1f ms (+ encode %.1f) | dense %.1f ms\n",
                label.c_str(), i + 1, 100.0 * p["density"].get<double>(), static_cast<unsigned long long>(p["payload_bytes"].get<std::uint64_t>()),
                p["floor_seconds"].get<double>() * 1e3, p["seconds"].get<double>() * 1e3, p["encode_seconds"].get<double>() * 1e3,
                o["seconds"].get<double>() * 1e3, e["seconds"].get<double>() * 1e3, e["encode_only_seconds"].get<double>() * 1e3,
                d["seconds"].get<double>() * 1e3);
    std::fflush(stdout);
    rows_p.push_back(p);
    rows_o.push_back(o);
    rows_e.push_back(e);
    rows_d.push_back(d);
  }
  pipelined_link.close();
  one_bucket_link.close();
  preencoded_link.close();
  dense_link.close();
  result["sparse_pipelined"] = rows_p;
  result["sparse_one_bucket"] = rows_o;
  result["sparse_preencoded"] = rows_e;
  result["dense"] = rows_d;
  {
    auto link = connect_retrying(host, port, opts);
    link.send(encode(control{}));
    link.close();
  }

  const double dense = median_of(result["dense"], "seconds");
  const double pipelined = median_of(result["sparse_pipelined"], "seconds");
  const double one_bucket = median_of(result["sparse_one_bucket"], "seconds");
  const double pre = median_of(result["sparse_preencoded"], "seconds");
  const double floor_s = median_of(result["sparse_pipelined"], "floor_seconds");
  result["summary"] = {
      {"median_density", median_of(result["sparse_pipelined"], "density")},
      {"median_payload_bytes", median_of(result["sparse_pipelined"], "payload_bytes")},
      {"median_floor_seconds", floor_s},
      {"target_seconds", 1.15 * floor_s + 0.050},
      {"median_seconds_sparse_pipelined", pipelined},
      {"median_encode_seconds_sparse_pipelined", median_of(result["sparse_pipelined"], "encode_seconds")},
      {"median_after_encode_seconds_sparse_pipelined", median_of(result["sparse_pipelined"], "after_encode_seconds")},
      {"median_seconds_sparse_one_bucket", one_bucket},
      {"median_seconds_sparse_preencoded", pre},
      {"median_encode_only_seconds", median_of(result["sparse_preencoded"], "encode_only_seconds")},
      {"median_seconds_dense", dense},
      {"dense_goodput_gbit", 8.0 * static_cast<double>(layout.bytes()) / dense / 1e9},
      {"speedup_vs_dense_pipelined", dense / pipelined},
      {"speedup_vs_dense_preencoded", dense / pre},
      {"pipelining_gain_seconds", one_bucket - pipelined},
      {"meets_target_pipelined", pipelined <= 1.15 * floor_s + 0.050},
      {"meets_target_preencoded", pre <= 1.15 * floor_s + 0.050},
  };
  std::ofstream(o.out) << result.dump(2) << "\n";
  std::printf("trainer[%s]: summary %s\n", label.c_str(), result["summary"].dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string role = argc > 1 ? argv[1] : "";
  if (role == "worker") return run_worker(argc, argv);
  if (role == "trainer") return run_trainer(argc, argv);
  std::fprintf(stderr, "usage: link_bench worker|trainer ... (see the top of bench/net/link_bench.cpp)\n");
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "link_bench: %s\n", e.what());
  return 1;
}
