// The shaped-link benchmark with the weights on GPUs at both ends (bench/net/run_shaped.sh with
// BENCH=gpu_link_bench runs the two sides in two network namespaces): the trainer's GPU encodes each version
// (cuda::frame_publisher), the frames cross the shaped link over asio_tcp (pre-shared key, HMAC on every frame)
// through cuda::transport_frame_channel, and the worker's GPU verifies and applies them in place
// (cuda::frame_subscriber, atomic commit by default). The trainer generates the same GPT-shaped RL update
// stream as link_bench (gen::adam_bf16_model), uploads each version into its device weights (not timed: it is
// where a trainer's optimizer step leaves them), then sends it in three ways, each on its own connection:
//   sparse_pipelined   buckets of --bucket-bytes: bucket i on the wire while the GPU encodes i+1;
//   sparse_one_bucket  one bucket: the whole patch encoded before its first byte is sent;
//   dense              the BF16 weights, device -> host -> link -> host -> device, in --dense-frame-bytes frames.
// Boost.Asio does not get through nvcc: this file is plain C++ (the transport, its transport_frame_channel, the
// device buffers through the CUDA runtime API); the publisher and subscriber are built in gpu_link_codec.cu and
// used through sparsesync::cuda::any_frame_publisher / any_frame_subscriber.
// Each time runs from the publish() call (or the first dense byte) until the worker's acknowledgement: the
// version verified and written into the worker's device weights. At the end the worker hashes its whole
// device model on the host and the trainer checks it against its own last version, bit for bit.
//
//   gpu_link_bench worker  --listen ADDR:PORT --key-file K [--log worker.jsonl] [--max-seconds 1800]
//                          [--commit atomic|streamed]
//   gpu_link_bench trainer --connect ADDR:PORT --key-file K --out result.json [--label 1gbit] [--rate-gbit 1]
//                          [--rtt-ms 10] [--hidden 768] [--layers 12] [--vocab 50257] [--warmup 20] [--versions 5]
//                          [--lr 1e-6] [--bucket-bytes 16777216] [--dense-frame-bytes 16777216] [--encoder delta_varint]
#include <sparsesync/codec/registry.hpp>
#include <sparsesync/core/model_checksum.hpp>
#include <sparsesync/cuda/cuda_error.hpp>
#include <sparsesync/cuda/sync/transport_frame_channel.hpp>
#include <sparsesync/gen/adam_bf16.hpp>
#include <sparsesync/gen/tensor_set.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpu_link_codec.hpp"
#include "link_common.hpp"

namespace ss = sparsesync;
namespace sc = sparsesync::cuda;
using namespace std::chrono_literals;
using namespace link_bench_common;

namespace {

using channel = sc::transport_frame_channel<ss::asio_tcp_transport>;

// A CUDA stream that outlives the plans declared after it (they free their memory on it).
struct stream_holder {
  stream_holder() { sc::throw_on_cuda_error(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); }
  stream_holder(const stream_holder&) = delete;
  stream_holder& operator=(const stream_holder&) = delete;
  ~stream_holder() {
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  }
  cudaStream_t s{};
};

// One model in device memory: the tensors back to back in layout order, and the device array of their
// pointers that the GPU codec takes.
class device_model {
 public:
  explicit device_model(const ss::model_layout& layout) : layout_(layout) {
    sc::throw_on_cuda_error(cudaMalloc(reinterpret_cast<void**>(&data_), layout.bytes()), "cudaMalloc weights");
    std::vector<void*> ptrs;
    std::uint64_t at = 0;
    for (std::size_t t = 0; t < layout.size(); ++t) {
      ptrs.push_back(data_ + at);
      at += layout[t].bytes();
    }
    sc::throw_on_cuda_error(cudaMalloc(reinterpret_cast<void**>(&ptrs_), ptrs.size() * sizeof(void*)), "cudaMalloc pointers");
    sc::throw_on_cuda_error(cudaMemcpy(ptrs_, ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice), "upload pointers");
  }
  device_model(const device_model&) = delete;
  device_model& operator=(const device_model&) = delete;
  ~device_model() {
    cudaFree(data_);
    cudaFree(ptrs_);
  }
  void upload(const ss::gen::tensor_set& w) {
    std::uint64_t at = 0;
    for (std::size_t t = 0; t < layout_.size(); ++t) {
      sc::throw_on_cuda_error(cudaMemcpy(data_ + at, w.tensor(t).data, layout_[t].bytes(), cudaMemcpyHostToDevice), "upload weights");
      at += layout_[t].bytes();
    }
  }
  void upload_flat(const std::vector<unsigned char>& flat) {
    sc::throw_on_cuda_error(cudaMemcpy(data_, flat.data(), flat.size(), cudaMemcpyHostToDevice), "upload weights");
  }
  [[nodiscard]] ss::gen::tensor_set download() const {
    ss::gen::tensor_set w(layout_);
    auto views = w.mutable_views();
    std::uint64_t at = 0;
    for (std::size_t t = 0; t < layout_.size(); ++t) {
      sc::throw_on_cuda_error(cudaMemcpy(views[t].data, data_ + at, layout_[t].bytes(), cudaMemcpyDeviceToHost), "download weights");
      at += layout_[t].bytes();
    }
    return w;
  }
  [[nodiscard]] unsigned char* data() const { return data_; }
  [[nodiscard]] void* const* pointers() const { return ptrs_; }

 private:
  const ss::model_layout& layout_;
  unsigned char* data_ = nullptr;
  void** ptrs_ = nullptr;
};

std::uint64_t checksum_of(const ss::gen::tensor_set& w) {
  const auto v = w.views();
  return ss::model_checksum(w.layout(), std::span<const ss::const_tensor_view>(v.data(), v.size()));
}

std::vector<std::byte> encode_u64s(std::initializer_list<std::uint64_t> values) {
  std::vector<std::byte> out(8 * values.size());
  std::size_t i = 0;
  for (const auto v : values) ss::detail::store_le<std::uint64_t>(reinterpret_cast<unsigned char*>(out.data()) + 8 * i++, v);
  return out;
}
std::uint64_t u64_at(const std::vector<std::byte>& in, std::size_t i) {
  if (in.size() < 8 * (i + 1)) throw std::runtime_error("short acknowledgement");
  return ss::detail::load_le<std::uint64_t>(reinterpret_cast<const unsigned char*>(in.data()) + 8 * i);
}

// Dense frames into `flat` until the model is complete.
bool receive_dense(ss::asio_tcp_transport& link, std::vector<unsigned char>& flat, std::vector<std::byte>& in) {
  std::uint64_t got = 0;
  while (got < flat.size()) {
    if (!link.receive(in)) {
      if (got == 0) return false;
      throw std::runtime_error("dense: the trainer closed inside a version");
    }
    if (in.size() > flat.size() - got) throw std::runtime_error("dense: more bytes than the model");
    std::memcpy(flat.data() + got, in.data(), in.size());
    got += in.size();
  }
  return true;
}

// ---------------------------------------------------------------- worker

// The worker's channel, which notes when the first frame of each version has arrived (for the worker's own
// busy time: from there to its commit).
class timed_channel {
 public:
  explicit timed_channel(channel& inner) : inner_(inner) {}
  [[nodiscard]] bool is_root() const { return inner_.is_root(); }
  void send(const void* p, std::size_t n) { inner_.send(p, n); }
  void close() { inner_.close(); }
  std::optional<std::size_t> receive_size() {
    auto n = inner_.receive_size();
    if (n && !first_) first_ = clock_type::now();
    return n;
  }
  void receive_payload(void* p) { inner_.receive_payload(p); }
  // Seconds since the first frame of the version just received; starts the next version.
  double busy_seconds() {
    const double s = first_ ? since(*first_) : 0.0;
    first_.reset();
    return s;
  }

 private:
  channel& inner_;
  std::optional<clock_type::time_point> first_;
};

void serve_connection(ss::asio_tcp_transport link, const control c, const ss::model_layout& layout, const std::vector<unsigned char>& initial,
                      std::uint64_t initial_checksum, sc::frame_commit_mode commit, std::ofstream& log,
                      std::mutex& log_mutex) {
  auto write_log = [&](const json& j) {
    std::lock_guard lock(log_mutex);
    if (log) log << j.dump() << "\n" << std::flush;
  };
  const stream_holder s, cs;
  device_model weights(layout);  // this connection's copy of the worker's weights, from version 1
  weights.upload_flat(initial);
  std::vector<std::byte> in;
  if (c.m == mode::dense) {
    std::vector<unsigned char> flat(layout.bytes());
    for (std::uint64_t v = 0; v < c.versions; ++v) {
      if (!receive_dense(link, flat, in)) throw std::runtime_error("dense: the trainer closed early");
      const auto t0 = clock_type::now();  // (the copy into device memory, after the last frame)
      weights.upload_flat(flat);
      link.send(encode_u64s({v + 2}));
      write_log({{"round", c.round}, {"mode", "dense"}, {"version", v + 2}, {"seconds", since(t0)}});
    }
  } else {
    channel ch(link, cs.s);
    timed_channel timed(ch);
    const auto sub = gpu_link::make_subscriber(layout, sc::device_frame_channel_ref(timed), s.s, cs.s, commit, initial_checksum);
    for (;;) {
      const auto got = sub->next(weights.pointers());
      if (!got) break;
      const double busy = timed.busy_seconds();  // first frame's arrival -> verified and written
      link.send(encode_u64s({got->version, got->checksum}));
      write_log({{"round", c.round}, {"mode", "sync"}, {"version", got->version}, {"changed", got->changed},
                 {"payload_bytes", got->payload_bytes}, {"seconds", busy}});
    }
  }
  // The whole model, hashed on the host from the device copy: the trainer compares it with its last version.
  link.send(encode_u64s({checksum_of(weights.download())}));
  while (link.receive(in)) {
  }
  link.close();
}

int run_worker(int argc, char** argv) {
  const auto [addr, port] = split_endpoint(arg(argc, argv, "--listen", nullptr));
  const auto opts = link_options(arg(argc, argv, "--key-file", nullptr));
  const std::string log_path = arg(argc, argv, "--log", "");
  const std::string commit_name = arg(argc, argv, "--commit", "atomic");
  if (commit_name != "atomic" && commit_name != "streamed") throw std::runtime_error("--commit atomic|streamed");
  const auto commit = commit_name == "atomic" ? sc::frame_commit_mode::atomic : sc::frame_commit_mode::streamed;
  const auto end = clock_type::now() + std::chrono::seconds(num(argc, argv, "--max-seconds", "1800"));
  std::ofstream log;
  std::mutex log_mutex;
  if (!log_path.empty()) log.open(log_path);
  ss::asio_tcp_listener listener(addr, port, opts);
  cudaDeviceProp prop{};
  sc::throw_on_cuda_error(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("worker: %s, listening on %s:%u, %s commit\n", prop.name, addr.c_str(), listener.port(), commit_name.c_str());
  std::fflush(stdout);

  std::optional<ss::model_layout> layout;
  std::vector<unsigned char> initial;
  std::uint64_t initial_checksum = 0;
  const auto prime = [&](ss::asio_tcp_transport link, const control& c) {  // version 1, dense: every later connection's start
    layout = bench_layout(c.hidden, c.layers, c.vocab);
    initial.assign(layout->bytes(), 0);
    std::vector<std::byte> in;
    if (!receive_dense(link, initial, in)) throw std::runtime_error("prime: the trainer closed early");
    ss::gen::tensor_set w(*layout);
    auto views = w.mutable_views();
    std::uint64_t at = 0;
    for (std::size_t t = 0; t < layout->size(); ++t) {
      std::memcpy(views[t].data, initial.data() + at, (*layout)[t].bytes());
      at += (*layout)[t].bytes();
    }
    initial_checksum = checksum_of(w);
    link.send(encode_u64s({1, initial_checksum}));
    std::printf("worker: version 1 received in full\n");
    std::fflush(stdout);
    while (link.receive(in)) {
    }
  };
  return worker_accept_loop(listener, end, prime, [&](ss::asio_tcp_transport link, const control& c) {
    serve_connection(std::move(link), c, *layout, initial, initial_checksum, commit, log, log_mutex);
  });
}

// ---------------------------------------------------------------- trainer

// A frame_publisher on its own connection, with its own snapshot of what the worker holds (version 1 at the
// start). Every version is timed from publish() to the worker's acknowledgement.
class sparse_mode {
 public:
  sparse_mode(const std::string& host, std::uint16_t port, const ss::asio_tcp_options& opts, control c, const ss::model_layout& layout,
              const ss::gen::tensor_set& version1, std::uint64_t bucket_bytes, ss::encoder_id encoder, double expected_density)
      : link_(ss::connect_retrying(host, port, opts)), snapshot_(layout), channel_(std::vector<ss::asio_tcp_transport*>{&link_}, cs_.s) {
    link_.send(encode(c));
    snapshot_.upload(version1);
    publisher_ = gpu_link::make_publisher(layout, bucket_bytes, encoder, sc::device_frame_channel_ref(channel_), s_.s, cs_.s, expected_density);
  }

  // `weights` holds version `version`; the worker holds the snapshot's version.
  json send(std::uint64_t version, const device_model& weights, double rate_bits) {
    const auto t0 = clock_type::now();
    const auto st = publisher_->publish(version, snapshot_.pointers(), weights.pointers());
    std::vector<std::byte> in;
    if (!link_.receive(in)) throw std::runtime_error("the worker closed the connection");
    const double seconds = since(t0);
    if (u64_at(in, 0) != version || u64_at(in, 1) != st.target_checksum)
      throw std::runtime_error("the worker did not acknowledge version " + std::to_string(version) + " with its checksum");
    const auto ts = clock_type::now();
    publisher_->update_snapshot(snapshot_.pointers());  // off the worker's path, before the next version
    sc::throw_on_cuda_error(cudaStreamSynchronize(s_.s), "update snapshot");
    const double snapshot_s = since(ts);
    return {{"version", version},
            {"changed", st.changed},
            {"payload_bytes", st.payload_bytes},
            {"seconds", seconds},
            {"encode_seconds", st.encode_ms / 1e3},
            {"after_encode_seconds", seconds - st.encode_ms / 1e3},
            {"snapshot_update_seconds", snapshot_s},
            {"floor_seconds", 8.0 * static_cast<double>(st.payload_bytes) / rate_bits}};
  }

  // Ends the stream; returns the checksum of the worker's whole model.
  std::uint64_t close() {
    publisher_->close();
    std::vector<std::byte> in;
    if (!link_.receive(in)) throw std::runtime_error("the worker closed before its final checksum");
    link_.close();
    return u64_at(in, 0);
  }

 private:
  ss::asio_tcp_transport link_;
  stream_holder s_, cs_;
  device_model snapshot_;
  channel channel_;
  std::unique_ptr<sc::any_frame_publisher> publisher_;
};

// Dense BF16 from the trainer's device weights: device -> pinned host, frame by frame, then the link.
class dense_sender {
 public:
  dense_sender(ss::asio_tcp_transport& link, std::uint64_t frame_bytes) : link_(link), frame_bytes_(frame_bytes) {
    sc::throw_on_cuda_error(cudaMallocHost(&pinned_, frame_bytes), "cudaMallocHost");
  }
  dense_sender(const dense_sender&) = delete;
  dense_sender& operator=(const dense_sender&) = delete;
  ~dense_sender() { cudaFreeHost(pinned_); }

  std::uint64_t send(const device_model& weights, std::uint64_t bytes) {
    for (std::uint64_t at = 0; at < bytes; at += frame_bytes_) {
      const std::uint64_t len = std::min(frame_bytes_, bytes - at);
      sc::throw_on_cuda_error(cudaMemcpy(pinned_, weights.data() + at, len, cudaMemcpyDeviceToHost), "copy weights to host");
      link_.send({static_cast<const std::byte*>(pinned_), len});
    }
    return bytes;
  }

 private:
  ss::asio_tcp_transport& link_;
  std::uint64_t frame_bytes_;
  void* pinned_ = nullptr;
};

class dense_mode {
 public:
  dense_mode(const std::string& host, std::uint16_t port, const ss::asio_tcp_options& opts, control c, std::uint64_t frame_bytes)
      : link_(ss::connect_retrying(host, port, opts)), sender_(link_, frame_bytes) {
    c.m = mode::dense;
    link_.send(encode(c));
  }

  json send(std::uint64_t version, const device_model& weights, std::uint64_t bytes, double rate_bits) {
    const auto t0 = clock_type::now();
    sender_.send(weights, bytes);
    std::vector<std::byte> in;
    if (!link_.receive(in)) throw std::runtime_error("dense: the worker closed the connection");
    const double seconds = since(t0);
    if (u64_at(in, 0) != version) throw std::runtime_error("dense: unexpected acknowledgement");
    return {{"version", version}, {"bytes", bytes}, {"seconds", seconds}, {"floor_seconds", 8.0 * static_cast<double>(bytes) / rate_bits}};
  }

  // Returns the checksum of the worker's whole model (sent after its last version), then ends the connection.
  std::uint64_t close() {
    std::vector<std::byte> in;
    if (!link_.receive(in)) throw std::runtime_error("dense: the worker closed before its final checksum");
    const std::uint64_t sum = u64_at(in, 0);
    link_.close();
    while (link_.receive(in)) {
    }
    return sum;
  }

 private:
  ss::asio_tcp_transport link_;
  dense_sender sender_;
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
  const auto encoder = ss::parse_encoder_name(arg(argc, argv, "--encoder", "delta_varint"));
  if (!encoder) throw std::runtime_error("--encoder: delta_varint, raw_index32, bitmap or rice");

  const auto layout = bench_layout(c.hidden, c.layers, c.vocab);
  cudaDeviceProp prop{};
  sc::throw_on_cuda_error(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("trainer[%s]: %s; %.1f M BF16 parameters (%.1f MB), %llu warm-up steps, %llu versions, encoder %s\n", label.c_str(), prop.name,
              static_cast<double>(layout.numel()) / 1e6, static_cast<double>(layout.bytes()) / 1e6, static_cast<unsigned long long>(warmup),
              static_cast<unsigned long long>(versions), std::string(ss::encoder_name(*encoder)).c_str());
  std::fflush(stdout);
  const std::vector<ss::gen::tensor_set> stream = generate_stream(layout, o);  // stream[i] is version i + 1

  json result = describe_run(o, layout);
  result["device"] = prop.name;
  result["encoder"] = std::string(ss::encoder_name(*encoder));
  result["bucket_bytes"] = bucket_bytes;
  result["dense_frame_bytes"] = frame_bytes;

  device_model weights(layout);
  weights.upload(stream.front());
  {  // the worker's starting point: version 1, dense
    c.m = mode::prime;
    auto link = ss::connect_retrying(host, port, opts);
    link.send(encode(c));
    dense_sender dense(link, frame_bytes);
    const auto t0 = clock_type::now();
    dense.send(weights, layout.bytes());
    std::vector<std::byte> in;
    if (!link.receive(in) || u64_at(in, 0) != 1 || u64_at(in, 1) != checksum_of(stream.front()))
      throw std::runtime_error("the worker did not acknowledge version 1 with its checksum");
    result["initial_dense_transfer_seconds"] = since(t0);
    link.close();
  }
  c.m = mode::sync;
  c.versions = versions;
  c.round = 1;
  const double expected_density = 0.05;  // scratch sizing only: a denser bucket is still encoded (grown)
  sparse_mode pipelined(host, port, opts, c, layout, stream.front(), bucket_bytes, *encoder, expected_density);
  c.round = 2;
  sparse_mode one_bucket(host, port, opts, c, layout, stream.front(), std::uint64_t(1) << 40, *encoder, expected_density);
  c.round = 3;
  dense_mode dense(host, port, opts, c, frame_bytes);
  json rows_p = json::array(), rows_o = json::array(), rows_d = json::array();
  for (std::size_t i = 1; i < stream.size(); ++i) {
    weights.upload(stream[i]);  // the optimizer step's output, on the trainer's GPU
    sc::throw_on_cuda_error(cudaDeviceSynchronize(), "upload");
    auto p = pipelined.send(i + 1, weights, rate_bits);
    const auto o = one_bucket.send(i + 1, weights, rate_bits);
    const auto d = dense.send(i + 1, weights, layout.bytes(), rate_bits);
    p["density"] = static_cast<double>(p["changed"].get<std::uint64_t>()) / static_cast<double>(layout.numel());
    std::printf("trainer[%s]: v%zu: %.3f%% changed, %llu bytes, floor %.1f ms | pipelined %.1f ms (encode %.2f) | one bucket %.1f ms | "
                "dense %.1f ms\n",
                label.c_str(), i + 1, 100.0 * p["density"].get<double>(), static_cast<unsigned long long>(p["payload_bytes"].get<std::uint64_t>()),
                p["floor_seconds"].get<double>() * 1e3, p["seconds"].get<double>() * 1e3, p["encode_seconds"].get<double>() * 1e3,
                o["seconds"].get<double>() * 1e3, d["seconds"].get<double>() * 1e3);
    std::fflush(stdout);
    rows_p.push_back(p);
    rows_o.push_back(o);
    rows_d.push_back(d);
  }
  const std::uint64_t expect = checksum_of(stream.back());
  const std::uint64_t got_p = pipelined.close(), got_o = one_bucket.close(), got_d = dense.close();
  result["final_model_checksum"] = {{"trainer", expect}, {"worker_pipelined", got_p}, {"worker_one_bucket", got_o}, {"worker_dense", got_d}};
  const bool identical = got_p == expect && got_o == expect && got_d == expect;
  result["bit_identical"] = identical;
  {
    auto link = ss::connect_retrying(host, port, opts);
    link.send(encode(control{}));
    link.close();
  }
  result["sparse_pipelined"] = rows_p;
  result["sparse_one_bucket"] = rows_o;
  result["dense"] = rows_d;
  const double dense_s = median_of(rows_d, "seconds");
  const double pipelined_s = median_of(rows_p, "seconds");
  const double floor_s = median_of(rows_p, "floor_seconds");
  result["summary"] = {
      {"median_density", median_of(rows_p, "density")},
      {"median_payload_bytes", median_of(rows_p, "payload_bytes")},
      {"median_floor_seconds", floor_s},
      {"target_seconds", 1.15 * floor_s + 0.050},
      {"median_seconds_sparse_pipelined", pipelined_s},
      {"median_encode_seconds_sparse_pipelined", median_of(rows_p, "encode_seconds")},
      {"median_after_encode_seconds_sparse_pipelined", median_of(rows_p, "after_encode_seconds")},
      {"max_seconds_sparse_pipelined", [&] {
         double m = 0;
         for (const auto& r : rows_p) m = std::max(m, r.at("seconds").get<double>());
         return m;
       }()},
      {"median_seconds_sparse_one_bucket", median_of(rows_o, "seconds")},
      {"median_seconds_dense", dense_s},
      {"dense_goodput_gbit", 8.0 * static_cast<double>(layout.bytes()) / dense_s / 1e9},
      {"speedup_vs_dense_pipelined", dense_s / pipelined_s},
      {"meets_target_pipelined", pipelined_s <= 1.15 * floor_s + 0.050},
      {"bit_identical", identical},
  };
  std::ofstream(o.out) << result.dump(2) << "\n";
  std::printf("trainer[%s]: summary %s\n", label.c_str(), result["summary"].dump().c_str());
  if (!identical) {
    std::fprintf(stderr, "trainer[%s]: a worker's final model differs from the trainer's\n", label.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string role = argc > 1 ? argv[1] : "";
  // Load every kernel when the CUDA context is created rather than at its first launch (CUDA's lazy default),
  // so that the first measured version does not pay for it; SPARSESYNC_LAZY_MODULES=1 keeps the default.
  if (!std::getenv("SPARSESYNC_LAZY_MODULES")) setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (role == "worker") return run_worker(argc, argv);
  if (role == "trainer") return run_trainer(argc, argv);
  std::fprintf(stderr, "usage: gpu_link_bench worker|trainer ... (see the top of bench/net/gpu_link_bench.cu)\n");
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gpu_link_bench: %s\n", e.what());
  return 1;
}
