// Soak test of the sync engine (sync/sender.hpp, sync/receiver.hpp) over asio_tcp on 127.0.0.1: a sender
// publishes version after version to several receivers, each behind its own fault-injecting proxy
// (fault_proxy.hpp), while faults are injected at random: connection cuts, bit flips on the wire, stalls,
// receiver kills (restarted from their last verified version, as from disk, or from nothing) and sender
// restarts (a new process: new port, no history; each incarnation alternates between a pre-shared key and
// insecure_no_auth, so flips also hit frames that no MAC protects).
// Pass: zero mismatches (after every version a receiver reports, and whenever it stops, the weights it claims
// are bit-identical to that published version; never torn), every receiver delivered versions, at least half of
// the versions published while a receiver was connected reached one, and any --require-* target is met. Latency is reported, not judged: with one receiver stalled, publish() waits up
// to the ack timeout for everyone (issue 14, item 4), which shows as the "during a stall" figures.
//   sparsesync_soak [--seconds 75] [--long] [--receivers 4] [--seed 1] [--json FILE]
//                   [--require-versions N] [--require-faults N] [--max-versions N]
//                   [--baseline-seconds 8] [--stall-seconds 8]
// --long (or SPARSESYNC_SOAK_LONG=1): up to 900 s, stops at 5000 versions, requires 1000 versions and 100 faults.
// Three phases: fault-free (the reference latency), receiver 0 stalled throughout (what one stalled subscriber
// costs the others), then random faults until the end.
#include "fault_proxy.hpp"

#include <sparsesync/core/model_checksum.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

namespace {
using namespace sparsesync;
using soak::steady;
using tx_type = sync::sender<auto_encoder, fixed_bytes, asio_tcp_transport>;
using rx_type = sync::receiver<asio_tcp_transport>;

struct options {
  double seconds = 75;
  std::uint64_t max_versions = 0;  // 0: no limit
  std::uint64_t require_versions = 0, require_faults = 0;
  int receivers = 4;
  std::uint64_t seed = 1;
  std::string json;
  double baseline_seconds = 8;  // phase 1: no faults (the fault-free reference)
  double stall_seconds = 8;     // phase 2: receiver 0's link stalled throughout, nothing else
  std::chrono::milliseconds fault_interval{250};
  std::chrono::milliseconds ack_timeout{1500};
};

options parse(int argc, char** argv) {
  options o;
  auto set_long = [&] {
    o.seconds = 900;
    o.max_versions = 5000;
    o.require_versions = 1000;
    o.require_faults = 100;
  };
  if (const char* e = std::getenv("SPARSESYNC_SOAK_LONG"); e && std::string(e) == "1") set_long();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--long") set_long();
    else if (a == "--seconds") o.seconds = std::stod(next());
    else if (a == "--max-versions") o.max_versions = std::stoull(next());
    else if (a == "--require-versions") o.require_versions = std::stoull(next());
    else if (a == "--require-faults") o.require_faults = std::stoull(next());
    else if (a == "--receivers") o.receivers = std::stoi(next());
    else if (a == "--baseline-seconds") o.baseline_seconds = std::stod(next());
    else if (a == "--stall-seconds") o.stall_seconds = std::stod(next());
    else if (a == "--seed") o.seed = std::stoull(next());
    else if (a == "--json") o.json = next();
    else throw std::runtime_error("unknown argument " + a + " (see the comment at the top of tests/soak/soak.cpp)");
  }
  return o;
}

double since(steady::time_point t0, steady::time_point t) { return std::chrono::duration<double>(t - t0).count(); }

// The model: 2^18 BF16 weights in four tensors, one buffer.
model_layout soak_layout() {
  return model_layout({{"embed", dtype::bf16, {256, 256}}, {"attn", dtype::bf16, {256, 256}}, {"mlp", dtype::bf16, {512, 128}},
                       {"head", dtype::bf16, {65536}}});
}

std::vector<tensor_view> views_of(const model_layout& l, std::vector<std::uint16_t>& buf) {
  std::vector<tensor_view> v;
  std::uint64_t at = 0;
  for (const auto& t : l.tensors()) {
    v.push_back({buf.data() + at, t.numel(), t.dtype});
    at += t.numel();
  }
  return v;
}
std::vector<const_tensor_view> const_views(const std::vector<tensor_view>& v) { return {v.begin(), v.end()}; }

enum fault_kind { fault_cut, fault_flip, fault_stall, fault_kill, fault_server_restart, fault_kinds };
constexpr const char* fault_names[] = {"cut", "bit_flip", "stall", "receiver_kill", "server_restart"};

struct fault_event {
  steady::time_point at, until;  // until: end of a stall (= at for the others)
  fault_kind kind;
  int receiver;  // -1: every receiver (server restart)
};

// Everything the threads report, under one mutex (contention is negligible at these rates).
struct ledger {
  std::mutex m;
  std::map<std::uint64_t, std::uint64_t> checksum;                  // every published version
  std::map<std::uint64_t, std::vector<std::uint16_t>> recent;       // the last few, byte for byte
  std::map<std::uint64_t, steady::time_point> published_at;
  std::map<std::uint64_t, double> publish_seconds;
  std::map<std::uint64_t, std::map<int, steady::time_point>> committed;  // version -> receiver -> when
  std::vector<fault_event> faults;
  std::uint64_t mismatches = 0, checks = 0, receiver_errors = 0, full_transfers = 0, stuck = 0;
  std::vector<std::string> mismatch_notes;
  std::map<std::string, std::uint64_t> error_kinds;

  // The weights `buf` claim to be `version`: are they, exactly?
  void verify(const model_layout& l, std::vector<std::uint16_t>& buf, std::uint64_t version, int r, const char* when) {
    const auto sum = model_checksum(l, const_views(views_of(l, buf)));
    std::lock_guard lock(m);
    ++checks;
    std::string problem;
    const auto it = checksum.find(version);
    if (it == checksum.end()) problem = "claims unpublished version";
    else if (it->second != sum) problem = "checksum differs from the published version's";
    else if (const auto b = recent.find(version); b != recent.end() && b->second != buf) problem = "bytes differ from the published version's";
    if (problem.empty()) return;
    ++mismatches;
    if (mismatch_notes.size() < 20)
      mismatch_notes.push_back("receiver " + std::to_string(r) + " " + when + ", version " + std::to_string(version) + ": " + problem);
  }
};

// The sender side as one process: listener, accept thread, sender. Restarting it makes a new one.
class server {
 public:
  server(const model_layout& layout, asio_tcp_options o, std::chrono::milliseconds ack_timeout) : listener_("127.0.0.1", 0, o) {
    sync::sender_options so;
    so.ack_timeout = ack_timeout;
    tx_ = std::make_unique<tx_type>(layout, so, fixed_bytes{64 << 10});
    acceptor_ = std::thread([this] {
      while (!stop_) {
        try {
          tx_->add_receiver(listener_.accept(std::chrono::milliseconds(200)));
        } catch (const std::exception&) {
          // a timeout, or a peer that failed the handshake (a flipped bit): keep listening
        }
      }
    });
  }
  ~server() { stop(); }
  void stop() {
    if (stop_.exchange(true)) return;
    listener_.close();
    acceptor_.join();
  }
  tx_type& tx() { return *tx_; }
  [[nodiscard]] std::uint16_t port() const { return listener_.port(); }
  // Ends the sessions; their connections must already be cut (the process died) or close in order.
  void close_sessions() { tx_.reset(); }

 private:
  asio_tcp_listener listener_;
  std::unique_ptr<tx_type> tx_;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
};

asio_tcp_options link_options(bool keyed, const pre_shared_key& key) {
  asio_tcp_options o;
  if (keyed) o.key = key;
  else o.insecure_no_auth = true;
  o.connect_timeout = std::chrono::milliseconds(2000);
  o.handshake_timeout = std::chrono::milliseconds(2000);
  o.stall_timeout = std::chrono::milliseconds(3000);
  o.max_frame_size = 16 << 20;  // a flipped length bit asks for at most this much
  o.socket_buffer_bytes = 0;
  return o;
}

struct percentiles {
  std::size_t n = 0;
  double p50 = 0, p99 = 0, max = 0;
};
percentiles summarize(std::vector<double> v) {
  percentiles p;
  p.n = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  p.p50 = v[v.size() / 2];
  p.p99 = v[std::min(v.size() - 1, v.size() * 99 / 100)];
  p.max = v.back();
  return p;
}
std::string json_of(const percentiles& p) {
  std::ostringstream s;
  s << "{\"versions\": " << p.n << ", \"p50_ms\": " << p.p50 * 1e3 << ", \"p99_ms\": " << p.p99 * 1e3 << ", \"max_ms\": " << p.max * 1e3 << "}";
  return s.str();
}
}  // namespace

int main(int argc, char** argv) try {
  const options opt = parse(argc, argv);
  const auto layout = soak_layout();
  const auto key = pre_shared_key::generate();
  ledger led;
  std::atomic<bool> stop{false};
  std::atomic<std::uint16_t> server_port{0};
  std::atomic<int> incarnation{0};  // even: pre-shared key; odd: insecure_no_auth
  const auto start = steady::now();
  std::mt19937_64 rng(opt.seed);

  std::vector<std::unique_ptr<soak::fault_proxy>> proxies;
  for (int r = 0; r < opt.receivers; ++r)
    proxies.push_back(std::make_unique<soak::fault_proxy>([&] { return server_port.load(); }, rng()));
  std::vector<std::atomic<bool>> kill_flags(opt.receivers);
  std::vector<std::atomic<steady::rep>> last_progress(opt.receivers);

  auto make_server = [&] {
    auto s = std::make_unique<server>(layout, link_options(incarnation % 2 == 0, key), opt.ack_timeout);
    server_port = s->port();
    return s;
  };
  auto srv = make_server();

  // Receivers: connect, follow versions, and on any failure check what they hold and reconnect.
  std::vector<std::thread> receivers;
  for (int r = 0; r < opt.receivers; ++r) {
    receivers.emplace_back([&, r] {
      std::mt19937_64 rrng(opt.seed * 1000 + r);
      std::vector<std::uint16_t> buf(layout.numel());
      const auto views = views_of(layout, buf);
      sync::receiver_options state;
      while (!stop) {
        last_progress[r] = steady::now().time_since_epoch().count();
        std::optional<rx_type> rx;
        try {
          auto link = asio_tcp_transport::connect("127.0.0.1", proxies[r]->port(), link_options(incarnation % 2 == 0, key));
          rx.emplace(layout, views, std::move(link), state);
          while (auto v = rx->next()) {
            led.verify(layout, buf, v->version, r, "after a version");
            std::lock_guard lock(led.m);
            led.committed[v->version][r] = steady::now();
            if (v->full) ++led.full_transfers;
            last_progress[r] = steady::now().time_since_epoch().count();
          }
        } catch (const std::exception& e) {
          std::lock_guard lock(led.m);
          ++led.receiver_errors;
          std::string kind = e.what();
          kind = kind.substr(0, std::min(kind.find(':', kind.find(':') + 1), std::size_t{60}));
          ++led.error_kinds[kind];
        }
        if (rx) {
          state.has_version = rx->has_version();
          state.version = rx->version();
        }
        if (state.has_version) led.verify(layout, buf, state.version, r, "after its session ended");
        if (kill_flags[r].exchange(false) && (rrng() & 1)) {
          // Killed and restarted without its weights: garbage in the buffers, no version claimed.
          state = {};
          for (auto& w : buf) w = static_cast<std::uint16_t>(rrng());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20 + rrng() % 50));
      }
    });
  }

  // Faults at random times on random receivers' links; a watchdog counts receivers that make no progress.
  const auto stall_phase = start + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(opt.baseline_seconds));
  const auto fault_phase = stall_phase + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(opt.stall_seconds));
  std::thread faults([&] {
    std::mt19937_64 frng(opt.seed * 7 + 3);
    while (!stop) {
      if (steady::now() < fault_phase) {
        // Phases 1 and 2: nothing, or receiver 0 stalled (renewed so that it never ends inside the phase).
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const auto now = steady::now();
        if (now >= stall_phase) {
          proxies[0]->stall(std::chrono::duration_cast<std::chrono::milliseconds>(fault_phase - now) + std::chrono::milliseconds(1));
          std::lock_guard lock(led.m);
          if (led.faults.empty() || led.faults.back().kind != fault_stall) led.faults.push_back({now, fault_phase, fault_stall, 0});
          last_progress[0] = now.time_since_epoch().count();
        }
        continue;
      }
      std::this_thread::sleep_for(opt.fault_interval / 2 + std::chrono::milliseconds(frng() % opt.fault_interval.count()));
      const int r = static_cast<int>(frng() % opt.receivers);
      const auto roll = frng() % 100;
      const auto now = steady::now();
      fault_event ev{now, now, fault_cut, r};
      bool hit = false;
      if (roll < 30) {
        hit = proxies[r]->cut();
      } else if (roll < 62) {
        ev.kind = fault_flip;
        hit = proxies[r]->flip(frng() & 1);
      } else if (roll < 70) {
        ev.kind = fault_stall;
        const std::chrono::milliseconds d(500 + frng() % 1500);
        ev.until = now + d;
        hit = proxies[r]->stall(d);
      } else {
        ev.kind = fault_kill;
        kill_flags[r] = true;
        hit = proxies[r]->cut();
      }
      std::lock_guard lock(led.m);
      if (hit) led.faults.push_back(ev);
      for (int i = 0; i < opt.receivers; ++i) {
        if (since(steady::time_point(steady::duration(last_progress[i].load())), now) > 15) {
          ++led.stuck;  // no version and no reconnection for 15 s: unblock it, and count it
          proxies[i]->cut();
          last_progress[i] = now.time_since_epoch().count();
        }
      }
    }
  });

  // The trainer: a new version whenever the last publish() returned; sometimes the server restarts.
  std::vector<std::uint16_t> weights(layout.numel());
  for (auto& w : weights) w = static_cast<std::uint16_t>(rng());
  const auto wviews = views_of(layout, weights);
  std::uint64_t version = 0;
  // Versions published while some receiver was connected: after a server restart, or with every receiver cut
  // or killed, publish() returns at once and the loop publishes versions nobody can receive (catch-up brings a
  // receiver to the newest only), as many as the machine's load lets it spin through.
  std::uint64_t attended = 0;
  std::vector<double> publish_all;
  while (since(start, steady::now()) < opt.seconds && (opt.max_versions == 0 || version < opt.max_versions)) {
    if (steady::now() >= fault_phase && rng() % 150 == 0) {
      // The server process dies (its connections drop) and a new one starts on another port.
      srv->stop();
      for (auto& p : proxies) p->cut();
      srv->close_sessions();
      srv.reset();
      ++incarnation;
      srv = make_server();
      std::lock_guard lock(led.m);
      led.faults.push_back({steady::now(), steady::now(), fault_server_restart, -1});
    }
    ++version;
    for (int i = 0; i < 2600; ++i) weights[rng() % weights.size()] ^= static_cast<std::uint16_t>(1u << (rng() % 3));  // ~1 %
    const auto sum = model_checksum(layout, const_views(wviews));
    const auto t0 = steady::now();
    {
      std::lock_guard lock(led.m);
      led.checksum[version] = sum;
      led.recent[version] = weights;
      while (led.recent.size() > 32) led.recent.erase(led.recent.begin());
      led.published_at[version] = t0;
    }
    const auto report = srv->tx().publish(version, const_views(wviews));
    if (report.target_checksum != sum) {
      std::lock_guard lock(led.m);
      ++led.mismatches;
      led.mismatch_notes.push_back("sender published checksum differs for version " + std::to_string(version));
    }
    if (report.acknowledged + report.lagging > 0) ++attended;
    std::lock_guard lock(led.m);
    led.publish_seconds[version] = report.seconds;
  }
  const double elapsed = since(start, steady::now());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let the last acks land
  stop = true;
  faults.join();
  srv->stop();
  for (auto& p : proxies) p->cut();
  srv->close_sessions();
  for (auto& t : receivers) t.join();
  std::uint64_t wire_bytes = 0;
  for (auto& p : proxies) wire_bytes += p->bytes();
  proxies.clear();

  // Per version, over the receivers healthy for it: delivery = publish() start to the slowest one's commit;
  // interval = the longest wait of one of them since the version before (what a worker sees as its update
  // rate; a stalled peer shows here, since publish() waits for it). Phase 1: every receiver is healthy;
  // phase 2: all but the stalled receiver 0; phase 3: those whose link no fault touched from 2 s before the
  // publish to their commit, and no server restart.
  std::lock_guard lock(led.m);
  std::array<std::uint64_t, fault_kinds> fault_count{};
  for (const auto& f : led.faults) ++fault_count[f.kind];
  struct phase_stats {
    std::vector<double> delivery, interval, publish;
  };
  std::array<phase_stats, 3> phases;
  std::uint64_t commits = 0;
  std::map<int, std::pair<std::uint64_t, steady::time_point>> previous;  // receiver -> last version, when
  for (const auto& [v, t0] : led.published_at) {
    const int phase = t0 < stall_phase ? 0 : t0 < fault_phase ? 1 : 2;
    auto& ph = phases[phase];
    if (led.publish_seconds.count(v)) ph.publish.push_back(led.publish_seconds[v]);
    const auto it = led.committed.find(v);
    if (it == led.committed.end()) continue;
    commits += it->second.size();
    double delivery = -1, interval = -1;
    for (const auto& [r, when] : it->second) {
      bool healthy = phase == 0 || (phase == 1 && r != 0);
      if (phase == 2) {
        healthy = true;
        for (const auto& f : led.faults)
          if ((f.receiver == r || f.receiver == -1) && since(t0, f.until) >= -2 && f.at <= when) healthy = false;
      }
      const auto prev = previous.find(r);
      if (healthy) {
        delivery = std::max(delivery, since(t0, when));
        if (prev != previous.end() && prev->second.first + 1 == v) interval = std::max(interval, since(prev->second.second, when));
      }
      previous[r] = {v, when};
    }
    if (delivery >= 0) ph.delivery.push_back(delivery);
    if (interval >= 0) ph.interval.push_back(interval);
  }
  std::uint64_t faults_total = 0;
  for (auto c : fault_count) faults_total += c;
  std::set<int> delivering;
  for (const auto& [v, by] : led.committed)
    for (const auto& [r, when] : by) delivering.insert(r);

  std::ostringstream js;
  js << "{\n  \"seconds\": " << elapsed << ",\n  \"receivers\": " << opt.receivers << ",\n  \"seed\": " << opt.seed
     << ",\n  \"versions_published\": " << version << ",\n  \"versions_attended\": " << attended << ",\n  \"versions_delivered\": " << led.committed.size()
     << ",\n  \"commits\": " << commits << ",\n  \"full_transfers\": " << led.full_transfers << ",\n  \"faults\": {";
  for (int k = 0; k < fault_kinds; ++k) js << (k ? ", " : "") << "\"" << fault_names[k] << "\": " << fault_count[k];
  js << "},\n  \"faults_total\": " << faults_total << ",\n  \"wire_bytes\": " << wire_bytes << ",\n  \"receiver_errors\": " << led.receiver_errors
     << ",\n  \"stuck_receivers_unblocked\": " << led.stuck << ",\n  \"checks\": " << led.checks << ",\n  \"mismatches\": " << led.mismatches
     << ",\n  \"phases\": {";
  const char* phase_names[] = {"fault_free", "one_receiver_stalled", "random_faults"};
  for (int p = 0; p < 3; ++p)
    js << (p ? "," : "") << "\n    \"" << phase_names[p] << "\": {\"publish\": " << json_of(summarize(phases[p].publish))
       << ", \"delivery\": " << json_of(summarize(phases[p].delivery)) << ", \"interval\": " << json_of(summarize(phases[p].interval)) << "}";
  const double base = summarize(phases[0].interval).p50, stalled = summarize(phases[1].interval).p50;
  js << "\n  },\n  \"stalled_vs_fault_free_interval_p50\": " << (base > 0 ? stalled / base : 0) << "\n}\n";
  std::printf("%s", js.str().c_str());
  std::fprintf(stderr, "receiver errors by kind:\n");
  for (const auto& [k, n] : led.error_kinds) std::fprintf(stderr, "  %6llu  %s\n", static_cast<unsigned long long>(n), k.c_str());
  for (const auto& n : led.mismatch_notes) std::fprintf(stderr, "MISMATCH: %s\n", n.c_str());
  if (!opt.json.empty()) std::ofstream(opt.json) << js.str();

  // Delivery keeps up: at least half of the versions published to a connected receiver reached one.
  bool pass = led.mismatches == 0 && static_cast<int>(delivering.size()) == opt.receivers && led.committed.size() * 2 >= attended;
  if (version < opt.require_versions) pass = false, std::fprintf(stderr, "FAIL: %llu versions < %llu required\n", (unsigned long long)version, (unsigned long long)opt.require_versions);
  if (faults_total < opt.require_faults) pass = false, std::fprintf(stderr, "FAIL: %llu faults < %llu required\n", (unsigned long long)faults_total, (unsigned long long)opt.require_faults);
  std::fprintf(stderr, "%s: %llu mismatches in %llu checks\n", pass ? "PASS" : "FAIL", (unsigned long long)led.mismatches, (unsigned long long)led.checks);
  return pass ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "soak: %s\n", e.what());
  return 2;
}
