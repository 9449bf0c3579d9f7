// The one sync engine over NCCL on one host: a trainer on GPU 0 (sync::sender + device_source, frames kept on the
// GPU) and W workers on GPUs 1..W (sync::receiver + device_sink), each on an nccl_link (control messages on an
// in-process link, frames GPU to GPU on a pair communicator). What a version costs end to end, the trainer's
// snapshot advance included, in atomic or streamed commit, with every worker verified bit-identical after every
// version; and, in the same run on the same GPUs, the baseline: a dense ncclBroadcast of the model from GPU 0 to
// the workers' GPUs (one communicator of all of them). Also: the first version (a full transfer through host
// memory, paid once per worker), and the GPU memory the engine holds beside the weights on the trainer. The GPU
// backends come compiled from sparsesync::cuda_engine (this file compiles only the model generator's kernels).
//
//   engine_nccl_bench [--layers N (28)] [--density D (0.01)] [--versions V (5)] [--workers W (all other GPUs)]
//                     [--commit atomic|streamed|both] [--bucket-mb M (512: sync::device_bucket_bytes)] [--encode-lanes E (4)] [--verify-lanes L (4)]
//                     [--configs MB:E:L[:F[:T:TB]],... (runs each configuration in turn, same process, same GPUs; F:
//                      the snapshot advance, 1 (default) fused into detect, 2 a pass deferred past the last bucket, 0 a
//                      pass after each bucket; T:TB: the model's last T MiB in buckets of TB MiB, fixed_bytes's tail)]
//                     [--json FILE] [--trace FILE (a CUPTI timeline, kernel_trace.hpp)] [--link-ctas N]
//                     [--ack-poll-us U (sender_options::ack_poll: publish() polls for the acks U us before it sleeps)]
//                     [--encoders rice,varint,raw,bitmap,entropy (rice; each configuration runs with each, in turn)]
// The rows name the configuration; per-bucket cost = version time / buckets. Worker 0's host time is split into
// waiting for control messages (between versions too), device receives, sink calls that enqueue the verify
// (add), finish (waits for the GPU's verdict: the verify backlog) and commit.
#include <sparsesync/cuda/sync/device_engine_compiled.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/inproc.hpp>
#include <sparsesync/transport/nccl_link.hpp>

#include "bench_support.cuh"
#include "version_timeline.hpp"
#include "kernel_trace.hpp"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

using namespace sparsesync;
namespace sc = sparsesync::cuda;

namespace {

using namespace bench_gpu;
using nccl_t = nccl_link<inproc_transport>;

version_timeline g_timeline;  // this version's host-side events, trainer and worker 0

// An nccl_link that adds up where its owner's thread waited: for the next control message, in the device calls.
class timed_link {
 public:
  using transport_concept = transport_tag;
  using device_link_concept = device_link_tag;
  explicit timed_link(nccl_t inner, std::shared_ptr<double> send_device_ms = nullptr)
      : inner_(std::move(inner)), send_device_ms_(std::move(send_device_ms)) {}
  // Host messages on the timeline too (the trainer's session 0 and worker 0): where a version's ack spends the time
  // between the worker's commit and the trainer's settle.
  void send(std::span<const std::byte> m) {
    inner_.send(m);
    if (timeline_) g_timeline.mark("worker0_message_sent");
    if (send_device_ms_) g_timeline.mark("trainer_message_sent");
  }
  bool receive(std::vector<std::byte>& m) {
    const auto t = std::chrono::steady_clock::now();
    const bool r = inner_.receive(m);
    control_ms += ms_since(t);
    if (timeline_) g_timeline.mark("worker0_message_received");
    if (send_device_ms_) g_timeline.mark("trainer_message_received");
    return r;
  }
  void close() noexcept { inner_.close(); }
  [[nodiscard]] std::size_t max_frame_size() const noexcept { return inner_.max_frame_size(); }
  void send_device(const device_frame& f) {
    const auto t = std::chrono::steady_clock::now();
    if (send_device_ms_) g_timeline.mark("trainer_send_device_begin");
    inner_.send_device(f);
    if (send_device_ms_) {
      *send_device_ms_ += ms_since(t);
      g_timeline.mark("trainer_send_device_end");
    }
  }
  void receive_device(void* dst, std::size_t bytes, void* after, std::span<unsigned char> head) {
    post_receive_device(dst, bytes, after);
    complete_receive_device(head);
  }
  void post_receive_device(void* dst, std::size_t bytes, void* after) {
    const auto t = std::chrono::steady_clock::now();
    inner_.post_receive_device(dst, bytes, after);
    device_ms += ms_since(t);
    if (timeline_) g_timeline.mark("worker0_receive_posted");
  }
  void complete_receive_device(std::span<unsigned char> head) {
    const auto t = std::chrono::steady_clock::now();
    inner_.complete_receive_device(head);
    device_ms += ms_since(t);
    if (timeline_) g_timeline.mark("worker0_frame_received");
    ++frames;
  }
  [[nodiscard]] bool received_device() { return inner_.received_device(); }
  void abort() noexcept { inner_.abort(); }
  [[nodiscard]] nccl_link_stats stats() const { return inner_.stats(); }
  void mark_timeline(bool on) { timeline_ = on; }  // worker 0's link: its receives go on the timeline
  // Read between versions (the owner's thread is then idle in receive(); a torn double is harmless here).
  double control_ms = 0, device_ms = 0;
  std::uint64_t frames = 0;

 private:
  nccl_t inner_;
  std::shared_ptr<double> send_device_ms_;  // the trainer's session thread, in send_device (read between versions)
  bool timeline_ = false;
};
using link_t = timed_link;
static_assert(polled_device_link<link_t>, "the bench's link must keep nccl_link's eager hand-off (device_link requirement 8)");

// Calls f, adding its duration in ms to `into` (also when it throws).
template <class F>
decltype(auto) timed(double& into, F&& f) {
  struct add_on_exit {
    double& into;
    std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now();
    ~add_on_exit() { into += ms_since(t); }
  } guard{into};
  return f();
}

// A device_sink that adds up where the worker's thread spent its time in the sink (read between versions).
class timed_sink {
 public:
  explicit timed_sink(sync::device_sink inner) : inner_(std::move(inner)) {}
  void prepare(const model_layout& l) { inner_.prepare(l); }
  std::uint64_t checksum() { return inner_.checksum(); }
  void begin(bool full, std::optional<std::uint64_t> known) { timed(add_ms, [&] { inner_.begin(full, known); }); }
  status add_bucket(std::span<const unsigned char> f) { return timed(add_ms, [&] { return inner_.add_bucket(f); }); }
  sync::device_slot device_frame_slot(std::size_t bytes) { return timed(add_ms, [&] { return inner_.device_frame_slot(bytes); }); }
  status add_device_bucket(std::span<const unsigned char> head) {
    auto r = timed(add_ms, [&] { return inner_.add_device_bucket(head); });
    if (timeline_) g_timeline.mark("worker0_added");
    return r;
  }
  status finish(const patch_header& h) {
    if (timeline_) g_timeline.mark("worker0_finish_begin");
    auto r = timed(finish_ms, [&] { return inner_.finish(h); });
    if (timeline_) g_timeline.mark("worker0_finish_end");
    return r;
  }
  void commit() {
    if (timeline_) g_timeline.mark("worker0_commit_begin");
    timed(commit_ms, [&] { inner_.commit(); });
    if (timeline_) g_timeline.mark("worker0_commit_end");
  }
  void mark_timeline(bool on) { timeline_ = on; }
  void abort() { inner_.abort(); }
  [[nodiscard]] std::uint64_t changed() const { return inner_.changed(); }
  [[nodiscard]] std::uint64_t target_checksum() const { return inner_.target_checksum(); }
  double add_ms = 0, finish_ms = 0, commit_ms = 0;

 private:
  sync::device_sink inner_;
  bool timeline_ = false;
};

// The trainer's GPU backend, its calls and each frame it hands on put on the timeline.
class timed_encoder final : public sync::device_encoder_backend {
 public:
  explicit timed_encoder(std::unique_ptr<sync::device_encoder_backend> inner) : inner_(std::move(inner)) {}
  void prepare(const model_layout& layout, std::vector<bucket_plan> plans, encoder_id encoder, const encode_options& enc) override {
    inner_->prepare(layout, std::move(plans), encoder, enc);
  }
  [[nodiscard]] bool has_version() const override { return inner_->has_version(); }
  sync::source_totals encode_version(std::span<const const_tensor_view> weights, const sync::frame_emitter& emit) override {
    g_timeline.mark("trainer_encode_begin");
    sync::frame_emitter timed_emit;
    timed_emit.host = [&](std::span<const unsigned char> f) {
      g_timeline.mark("trainer_frame_emitted");
      emit.host(f);
    };
    timed_emit.device = [&](std::span<const unsigned char> head, device_frame f) {
      g_timeline.mark("trainer_frame_emitted");
      emit.device(head, std::move(f));
    };
    auto r = inner_->encode_version(weights, timed_emit);
    g_timeline.mark("trainer_encode_end");
    return r;
  }
  void encode_full(const sync::frame_emitter& emit) override { inner_->encode_full(emit); }
  void invalidate() override { inner_->invalidate(); }
  [[nodiscard]] sync::device_memory_report memory() const override { return inner_->memory(); }
  double version_written() override { return inner_->version_written(); }
  double settle() override {
    g_timeline.mark("trainer_settle_begin");
    const double s = inner_->settle();
    g_timeline.mark("trainer_settle_end");
    return s;
  }

 private:
  std::unique_ptr<sync::device_encoder_backend> inner_;
};
static_assert(sync::device_frame_sink<timed_sink>);

struct options {
  std::uint64_t layers = 28;
  double density = 0.01;
  int versions = 5;
  int workers = 0;
  std::string commit = "both";
  std::uint64_t bucket_mb = sync::device_bucket_bytes >> 20;
  unsigned encode_lanes = 4, verify_lanes = 4;
  std::string trace;  // --trace FILE: a CUPTI timeline of every GPU (kernel_trace.hpp), versions marked
  std::string json;
  std::vector<std::string> encoders{"rice"};
  int link_ctas = 0;  // --link-ctas N: each nccl_link's communicator's CTA limit (0: nccl_link_options' default)
  unsigned ack_poll_us = 0;  // --ack-poll-us U: sender_options::ack_poll (0: publish() sleeps while it waits)
};

// One engine configuration of a --configs list.
struct engine_config {
  std::uint64_t bucket_mb;
  unsigned encode_lanes, verify_lanes;
  unsigned fused_advance = 1;  // the snapshot advance: 1 fused into detect, 2 a pass deferred past the last bucket, 0 a pass after each bucket
  unsigned tail_mb = 0, tail_bucket_mb = 0;  // fixed_bytes's tail: the last tail_mb MiB in buckets of tail_bucket_mb MiB
};

// The dense baseline: the model broadcast from GPU 0 into each worker GPU's weights, on one communicator.
void dense_broadcast(const gpu_model& trainer, std::vector<std::unique_ptr<gpu_model>>& workers) {
  const int n = static_cast<int>(workers.size()) + 1;
  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  std::vector<ncclComm_t> comms(n);
  if (ncclCommInitAll(comms.data(), n, devs.data()) != ncclSuccess) throw std::runtime_error("ncclCommInitAll failed");
  std::vector<cudaStream_t> streams(n);
  for (int i = 0; i < n; ++i) {
    CK(cudaSetDevice(i));
    CK(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
  }
  const std::size_t bytes = trainer.n * 2;
  std::vector<double> ms;
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < n; ++i) {
      CK(cudaSetDevice(i));
      CK(cudaDeviceSynchronize());
    }
    const auto t = std::chrono::steady_clock::now();
    ncclGroupStart();
    for (int i = 0; i < n; ++i) {
      void* buf = i == 0 ? static_cast<void*>(trainer.data) : static_cast<void*>(workers[i - 1]->data);
      if (ncclBroadcast(buf, buf, bytes, ncclUint8, 0, comms[i], streams[i]) != ncclSuccess) throw std::runtime_error("ncclBroadcast failed");
    }
    ncclGroupEnd();
    for (int i = 0; i < n; ++i) {
      CK(cudaSetDevice(i));
      CK(cudaStreamSynchronize(streams[i]));
    }
    if (r) ms.push_back(ms_since(t));
  }
  for (int i = 0; i < n; ++i) {
    ncclCommDestroy(comms[i]);
    cudaSetDevice(i);
    cudaStreamDestroy(streams[i]);
  }
  CK(cudaSetDevice(0));
  char line[512];
  std::snprintf(line, sizeof line, "\"row\":\"dense_nccl_broadcast\",\"gpus\":%d,\"model_bytes\":%llu,\"median_ms\":%.3f,\"algo_gb_per_s\":%.1f", n,
                static_cast<unsigned long long>(bytes), median(ms), static_cast<double>(bytes) / median(ms) / 1e6);
  emit(line);
}

// Copies worker `w` (on its GPU) to `scratch` on GPU 0 and counts elements that differ from the trainer's.
std::uint64_t differences(const gpu_model& trainer, const gpu_model& w, int w_dev, gpu_model& scratch) {
  CK(cudaMemcpyPeer(scratch.data, 0, w.data, w_dev, w.n * 2));
  CK(cudaSetDevice(0));
  return count_differences(trainer, scratch);
}

kernel_trace* g_trace = nullptr;  // --trace

template <class Enc>
void run_engine(const model_layout& layout, const options& o, const engine_config& c, sc::frame_commit_mode mode, gpu_model& trainer,
                std::vector<std::unique_ptr<gpu_model>>& workers, gpu_model& scratch) {
  using sender_t = sync::sender<Enc, fixed_bytes, link_t, sync::device_source>;
  const std::string enc_name(Enc::name);
  using receiver_t = sync::receiver<link_t, timed_sink>;
  const char* mode_name = mode == sc::frame_commit_mode::atomic ? "atomic" : "streamed";
  const int nw = static_cast<int>(workers.size());
  CK(cudaSetDevice(0));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  fill_kernel<<<4096, 256, 0, stream>>>(trainer.data, trainer.n, 1);
  CK(cudaStreamSynchronize(stream));
  std::vector<cudaStream_t> wstreams(nw);
  for (int i = 0; i < nw; ++i) {
    CK(cudaSetDevice(i + 1));
    CK(cudaStreamCreateWithFlags(&wstreams[i], cudaStreamNonBlocking));
    CK(cudaMemset(workers[i]->data, 0, workers[i]->n * 2));
  }
  CK(cudaSetDevice(0));
  std::size_t free0 = 0, total = 0;
  CK(cudaMemGetInfo(&free0, &total));
  {
    sync::sender_options so;
    so.encode.mode = value_mode::ulp;
    so.history = 2;  // kept patches hold their frames in GPU memory
    so.ack_poll = std::chrono::microseconds(o.ack_poll_us);
    sc::device_source_options dso;
    dso.stream = stream;
    dso.expected_density = o.density * 1.5;
    dso.frames_on_device = true;
    dso.encode_lanes = c.encode_lanes;
    dso.fused_advance = c.fused_advance == 1;
    dso.deferred_advance = c.fused_advance == 2;
    const fixed_bytes policy{c.bucket_mb << 20, std::uint64_t{c.tail_mb} << 20, std::uint64_t{c.tail_bucket_mb} << 20};
    const std::size_t buckets = policy.plan(layout, default_log2_chunk).size();
    sender_t tx(layout, so, policy, sync::device_source<Enc>(std::make_unique<timed_encoder>(sc::compiled_device_encoder_backend(dso))));
    std::vector<std::unique_ptr<receiver_t>> rx(nw);
    auto send_ms = std::make_shared<double>(0.0);  // worker 0's session
    for (int i = 0; i < nw; ++i) {
      auto [a, b] = make_inproc_pair();
      nccl_link_options wo;
      wo.device = i + 1;
      wo.timeout = std::chrono::seconds(60);
      if (o.link_ctas) wo.comm.max_ctas = o.link_ctas;
      auto worker_end = std::async(std::launch::async, [b = std::move(b), wo]() mutable { return link_t(nccl_t::connect_receiver(std::move(b), wo)); });
      nccl_link_options to;
      to.device = 0;
      to.timeout = std::chrono::seconds(60);
      if (o.link_ctas) to.comm.max_ctas = o.link_ctas;
      tx.add_receiver(link_t(nccl_t::connect_sender(std::move(a), to), i == 0 ? send_ms : nullptr));
      CK(cudaSetDevice(i + 1));
      sc::device_sink_options sink_opt;
      sink_opt.stream = wstreams[i];
      sink_opt.commit = mode;
      sink_opt.verify_lanes = c.verify_lanes;
      rx[i] = std::make_unique<receiver_t>(layout, timed_sink(sync::device_sink(sc::compiled_device_applier_backend(layout, workers[i]->views, sink_opt))),
                                           worker_end.get());
      rx[i]->link().mark_timeline(i == 0);
      rx[i]->sink().mark_timeline(i == 0);
    }
    CK(cudaSetDevice(0));
    std::vector<std::vector<sync::applied_version>> applied(nw);
    std::mutex applied_mutex;
    std::vector<std::thread> threads;
    for (int i = 0; i < nw; ++i)
      threads.emplace_back([&, i] {
        cudaSetDevice(i + 1);
        try {
          while (auto v = rx[i]->next()) {
            std::lock_guard g(applied_mutex);
            applied[i].push_back(*v);
          }
        } catch (const std::exception& e) {  // the trainer's side reports its own error; this one says what the worker saw
          std::fprintf(stderr, "engine_nccl_bench: worker %d: %s\n", i, e.what());
        }
      });
    // On an error the trainer closes its links (the workers' threads then end) before the threads are destroyed.
    struct closer {
      sender_t& tx;
      std::vector<std::thread>& threads;
      ~closer() {
        try {
          tx.close();
        } catch (...) {
        }
        for (auto& t : threads)
          if (t.joinable()) t.join();
      }
    } close_on_exit{tx, threads};
    const auto slowest_worker = [&](int v) {
      double worst = 0;
      for (int i = 0; i < nw; ++i)
        for (;;) {
          {
            std::lock_guard g(applied_mutex);
            if (applied[i].size() >= static_cast<std::size_t>(v)) {
              worst = std::max(worst, applied[i][static_cast<std::size_t>(v) - 1].seconds);
              break;
            }
          }
          std::this_thread::yield();
        }
      return worst;
    };
    const auto views = trainer.const_views();
    const auto threshold = static_cast<std::uint64_t>(o.density * static_cast<double>(1ull << 53));
    std::vector<double> version_ms, encode_ms, snapshot_ms, apply_ms;
    double bits = 0;
    for (int v = 1; v <= o.versions + 1; ++v) {
      if (v > 1) {
        step_kernel<<<4096, 256, 0, stream>>>(trainer.data, trainer.n, static_cast<std::uint64_t>(v), threshold);
        CK(cudaStreamSynchronize(stream));
      }
      const std::string tag = enc_name + " " + mode_name + " " + std::to_string(c.bucket_mb) + ":" + std::to_string(c.encode_lanes) + ":" +
                              std::to_string(c.verify_lanes) + ":" + std::to_string(c.fused_advance) + ":" + std::to_string(c.tail_mb) + ":" +
                              std::to_string(c.tail_bucket_mb) + " v" + std::to_string(v);
      if (g_trace) g_trace->mark(tag + " publish");
      g_timeline.start();
      const auto t = std::chrono::steady_clock::now();
      const auto r = tx.publish(static_cast<std::uint64_t>(v), views);
      const double ms = ms_since(t);
      g_timeline.mark("trainer_publish_returned");
      if (g_trace) g_trace->mark(tag + " acknowledged");
      if (r.acknowledged != static_cast<std::size_t>(nw)) throw std::runtime_error("not every worker acknowledged version " + std::to_string(v));
      const double worker_s = slowest_worker(v);
      double control_ms = 0, device_ms = 0;  // worker 0's waits during this version
      std::uint64_t frames = 0;
      {
        auto& l = rx[0]->link();
        control_ms = l.control_ms;
        device_ms = l.device_ms;
        frames = l.frames;
        l.control_ms = l.device_ms = 0;
        l.frames = 0;
      }
      auto& sink0 = rx[0]->sink();
      const double add_ms = std::exchange(sink0.add_ms, 0.0), finish_ms = std::exchange(sink0.finish_ms, 0.0),
                   commit_ms = std::exchange(sink0.commit_ms, 0.0);
      const double session_send_ms = std::exchange(*send_ms, 0.0);
      const auto link_stats = rx[0]->link().stats();
      for (int i = 0; i < nw; ++i)
        if (const auto d = differences(trainer, *workers[i], i + 1, scratch); d != 0)
          throw std::runtime_error("worker " + std::to_string(i) + " differs from the trainer in " + std::to_string(d) + " elements");
      char line[1400];
      std::snprintf(line, sizeof line,
                    "\"row\":\"engine_nccl_version\",\"encoder\":\"%s\",\"bucket_mb\":%llu,\"buckets\":%zu,\"encode_lanes\":%u,\"verify_lanes\":%u,\"fused_advance\":%u,"
                    "\"worker0_sink_add_ms\":%.3f,\"worker0_sink_finish_ms\":%.3f,\"worker0_sink_commit_ms\":%.3f,"
                    "\"commit\":\"%s\",\"workers\":%d,\"version\":%d,\"full\":%s,\"changed\":%llu,"
                    "\"payload_bytes\":%llu,\"version_ms\":%.3f,\"encode_ms\":%.3f,\"snapshot_ms\":%.3f,\"gpu_wait_ms\":%.3f,"
                    "\"frame_copy_ms\":%.3f,\"hand_off_ms\":%.3f,\"launch_ms\":%.3f,\"slowest_worker_ms\":%.3f,\"worker0_frames\":%llu,"
                    "\"worker0_control_wait_ms\":%.3f,\"worker0_device_receive_ms\":%.3f,\"session0_send_device_ms\":%.3f,"
                    "\"worker0_deferred_nccl_calls\":%llu,\"bit_identical\":true",
                    enc_name.c_str(), static_cast<unsigned long long>(c.bucket_mb), buckets, c.encode_lanes, c.verify_lanes, c.fused_advance, add_ms, finish_ms, commit_ms,
                    mode_name, nw, v, v == 1 ? "true" : "false", static_cast<unsigned long long>(r.changed),
                    static_cast<unsigned long long>(r.payload_bytes), ms, r.encode_seconds * 1e3, r.snapshot_seconds * 1e3,
                    r.source.gpu_wait_seconds * 1e3, r.source.download_seconds * 1e3, r.source.hand_off_seconds * 1e3,
                    r.source.launch_seconds * 1e3, worker_s * 1e3, static_cast<unsigned long long>(frames), control_ms, device_ms, session_send_ms,
                    static_cast<unsigned long long>(link_stats.deferred_calls));
      emit((std::string(line) + ",\"timeline_ms\":" + g_timeline.json()).c_str());
      if (v > 1) {
        version_ms.push_back(ms);
        encode_ms.push_back(r.encode_seconds * 1e3);
        snapshot_ms.push_back(r.snapshot_seconds * 1e3);
        apply_ms.push_back(worker_s * 1e3);
        bits = 8.0 * static_cast<double>(r.payload_bytes) / static_cast<double>(std::max<std::uint64_t>(1, r.changed));
      }
    }
    CK(cudaSetDevice(0));
    std::size_t free1 = 0;
    CK(cudaMemGetInfo(&free1, &total));
    const auto tm = tx.source().memory();
    char line[1400];
    std::snprintf(line, sizeof line,
                  "\"row\":\"engine_nccl_summary\",\"encoder\":\"%s\",\"bucket_mb\":%llu,\"buckets\":%zu,\"encode_lanes\":%u,\"verify_lanes\":%u,\"fused_advance\":%u,"
                  "\"tail_mb\":%u,\"tail_bucket_mb\":%u,\"link_ctas\":%d,\"ack_poll_us\":%u,\"median_ms_per_bucket\":%.4f,\"commit\":\"%s\",\"workers\":%d,\"density\":%.4f,\"versions\":%d,\"median_version_ms\":%.3f,"
                  "\"median_encode_ms\":%.3f,\"median_snapshot_advance_ms\":%.3f,\"median_slowest_worker_ms\":%.3f,\"bits_per_change\":%.3f,"
                  "\"trainer_snapshot_gpu_bytes\":%llu,\"trainer_scratch_gpu_bytes\":%llu,\"trainer_gpu_bytes_held_by_engine\":%llu",
                  enc_name.c_str(), static_cast<unsigned long long>(c.bucket_mb), buckets, c.encode_lanes, c.verify_lanes, c.fused_advance,
                  c.tail_mb, c.tail_bucket_mb, o.link_ctas ? o.link_ctas : nccl_link_options{}.comm.max_ctas, o.ack_poll_us, median(version_ms) / static_cast<double>(std::max<std::size_t>(1, buckets)), mode_name, nw, o.density, o.versions,
                  median(version_ms), median(encode_ms), median(snapshot_ms), median(apply_ms), bits,
                  static_cast<unsigned long long>(tm.snapshot_device), static_cast<unsigned long long>(tm.scratch_device),
                  static_cast<unsigned long long>(free0 - free1));
    emit(line);
  }
  for (int i = 0; i < nw; ++i) {
    cudaSetDevice(i + 1);
    cudaStreamDestroy(wstreams[i]);
  }
  CK(cudaSetDevice(0));
  CK(cudaStreamDestroy(stream));
}

}  // namespace

int main(int argc, char** argv) {
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  options o;
  std::string configs_arg;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--layers") o.layers = std::stoull(next());
    else if (a == "--density") o.density = std::stod(next());
    else if (a == "--versions") o.versions = std::stoi(next());
    else if (a == "--workers") o.workers = std::stoi(next());
    else if (a == "--commit") o.commit = next();
    else if (a == "--bucket-mb") o.bucket_mb = std::stoull(next());
    else if (a == "--encode-lanes") o.encode_lanes = static_cast<unsigned>(std::stoul(next()));
    else if (a == "--verify-lanes") o.verify_lanes = static_cast<unsigned>(std::stoul(next()));
    else if (a == "--configs") configs_arg = next();
    else if (a == "--json") o.json = next();
    else if (a == "--link-ctas") o.link_ctas = std::stoi(next());
    else if (a == "--ack-poll-us") o.ack_poll_us = static_cast<unsigned>(std::stoul(next()));
    else if (a == "--trace") o.trace = next();
    else if (a == "--encoders") {
      o.encoders.clear();
      const std::string list = next();
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t end = std::min(list.find(',', at), list.size());
        o.encoders.push_back(list.substr(at, end - at));
        at = end + 1;
      }
    }
    else {
      std::fprintf(stderr, "usage: engine_nccl_bench [--layers N] [--density D] [--versions V] [--workers W] [--commit atomic|streamed|both] "
                           "[--bucket-mb M] [--encode-lanes E] [--verify-lanes L] [--configs MB:E:L,...] [--encoders rice,varint,raw,bitmap,entropy] [--json FILE] "
                           "[--trace FILE] [--link-ctas N] [--ack-poll-us U]\n");
      return 2;
    }
  }
  std::vector<engine_config> configs;
  for (std::size_t at = 0; at < configs_arg.size();) {
    const std::size_t end = std::min(configs_arg.find(',', at), configs_arg.size());
    engine_config c{};
    unsigned long long mb = 0;
    const int got = std::sscanf(configs_arg.substr(at, end - at).c_str(), "%llu:%u:%u:%u:%u:%u", &mb, &c.encode_lanes, &c.verify_lanes,
                                &c.fused_advance, &c.tail_mb, &c.tail_bucket_mb);
    if (got < 3 || got == 5) {
      std::fprintf(stderr, "engine_nccl_bench: --configs takes MB:E:L[:F[:T:TB]],... (bucket MiB, encode lanes, verify lanes, snapshot advance F: 1 "
                           "fused into detect, 2 a pass deferred past the last bucket, 0 a pass after each bucket; the last T MiB in buckets of TB MiB)\n");
      return 2;
    }
    c.bucket_mb = mb;
    configs.push_back(c);
    at = end + 1;
  }
  if (configs.empty()) configs.push_back({o.bucket_mb, o.encode_lanes, o.verify_lanes});
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
    std::printf("fewer than two CUDA devices: skipped\n");
    return 77;
  }
  if (o.workers <= 0 || o.workers > n - 1) o.workers = n - 1;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_card = prop.name;
  if (!o.json.empty()) g_json = std::fopen(o.json.c_str(), "w");
  std::optional<kernel_trace> trace;
  if (!o.trace.empty()) trace.emplace(o.trace);
  g_trace = trace ? &*trace : nullptr;
  const auto layout = qwen7b_layout(o.layers);
  char line[256];
  std::snprintf(line, sizeof line, "\"row\":\"setup\",\"layers\":%llu,\"tensors\":%zu,\"numel\":%llu,\"gpus\":%d,\"workers\":%d,\"bucket_mb\":%llu",
                static_cast<unsigned long long>(o.layers), layout.size(), static_cast<unsigned long long>(layout.numel()), n, o.workers,
                static_cast<unsigned long long>(o.bucket_mb));
  emit(line);
  try {
    CK(cudaSetDevice(0));
    gpu_model trainer(layout), scratch(layout);
    std::vector<std::unique_ptr<gpu_model>> workers;
    for (int i = 0; i < o.workers; ++i) {
      CK(cudaSetDevice(i + 1));
      workers.push_back(std::make_unique<gpu_model>(layout));
    }
    CK(cudaSetDevice(0));
    for (const auto& c : configs)
      for (const auto& e : o.encoders) {
        const auto run = [&]<class Enc>() {
          if (o.commit == "atomic" || o.commit == "both") run_engine<Enc>(layout, o, c, sc::frame_commit_mode::atomic, trainer, workers, scratch);
          if (o.commit == "streamed" || o.commit == "both") run_engine<Enc>(layout, o, c, sc::frame_commit_mode::streamed, trainer, workers, scratch);
        };
        if (e == "rice") run.operator()<rice>();
        else if (e == "varint" || e == "delta_varint") run.operator()<delta_varint>();
        else if (e == "raw" || e == "raw_index32") run.operator()<raw_index32>();
        else if (e == "bitmap") run.operator()<bitmap>();
        else if (e == "entropy") run.operator()<entropy>();
        else throw std::runtime_error("unknown encoder " + e + " (rice, varint, raw, bitmap, entropy)");
      }
    dense_broadcast(trainer, workers);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_nccl_bench: %s\n", e.what());
    return 1;
  }
  if (g_json) std::fclose(g_json);
  return 0;
}
