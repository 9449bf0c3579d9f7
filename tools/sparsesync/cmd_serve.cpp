// `sparsesync serve --listen HOST:PORT --watch DIR`: publishes every new checkpoint that appears in DIR as the
// next version to every subscriber (docs/CLI.md, "Network mode").
//
// Threads: the main thread watches DIR and publishes; one thread accepts connections and does nothing else;
// each accepted connection gets a short-lived handler thread for the transport handshake (bounded by its
// timeout, so a silent peer holds only its own thread), the pull request and the catalog, then belongs to
// the sync::sender, which runs its session on a thread of its own. At most max_handshakes connections may be
// unauthenticated at once; one more is closed at once. A file whose layout differs from the current one starts a new sender:
// the old one ends its sessions in order and pullers reconnect to the new layout.
#include <sparsesync/cli/cmd_serve.hpp>

#include <sparsesync/cli/checkpoint.hpp>
#include <sparsesync/cli/exit_codes.hpp>
#include <sparsesync/cli/net_common.hpp>
#include <sparsesync/cli/safetensors.hpp>
#include <sparsesync/cli/selection.hpp>

#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <sys/stat.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace sparsesync::cli {

// "step-9" before "step-10": runs of digits compare as numbers, everything else byte by byte.
inline bool natural_less(const std::string& a, const std::string& b) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      std::size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      std::size_t is = i, js = j;  // skip leading zeros, keeping one digit
      while (is + 1 < ie && a[is] == '0') ++is;
      while (js + 1 < je && b[js] == '0') ++js;
      if (ie - is != je - js) return ie - is < je - js;
      if (const int c = a.compare(is, ie - is, b, js, je - js); c != 0) return c < 0;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;  // "1" and "01": any fixed order
}

// The checkpoints of DIR not yet published. A checkpoint is a regular file (or a link to one) named
// *.safetensors and not starting with '.'; writers create it under another name (".x.tmp", "x.tmp", ...)
// and rename it into place, so a name that appears is complete. A name counts again when another file is
// renamed over it (another inode).
class checkpoint_dir {
 public:
  explicit checkpoint_dir(std::filesystem::path dir) : dir_(std::move(dir)) {}

  struct file_id {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    std::int64_t mtime_ns = 0;
    bool operator==(const file_id&) const = default;
  };
  struct candidate {
    std::string name;
    file_id id;
  };

  // New checkpoints in name order (natural_less). Throws failure(exit_io) when DIR cannot be read.
  std::vector<candidate> scan() const {
    std::vector<candidate> out;
    std::error_code ec;
    std::filesystem::directory_iterator it(dir_, ec), end;
    if (ec) throw failure(exit_io, "cannot read --watch directory " + dir_.string() + ": " + ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) throw failure(exit_io, "cannot read --watch directory " + dir_.string() + ": " + ec.message());
      const std::string name = it->path().filename().string();
      if (name.empty() || name.front() == '.' || name.size() <= 12 || name.compare(name.size() - 12, 12, ".safetensors") != 0) continue;
      struct stat st {};
      if (::stat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      const file_id id{st.st_dev, st.st_ino, st.st_size, std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
      if (auto s = seen_.find(name); s != seen_.end() && s->second.ino == id.ino && s->second.dev == id.dev) continue;
      if (auto f = failed_.find(name); f != failed_.end() && f->second == id) continue;  // still the same unreadable file
      out.push_back({name, id});
    }
    std::sort(out.begin(), out.end(), [](const candidate& x, const candidate& y) { return natural_less(x.name, y.name); });
    return out;
  }

  void published(const candidate& c) {
    seen_[c.name] = c.id;
    failed_.erase(c.name);
  }
  // Not a valid checkpoint: tried again only once the file changes (size, time or identity).
  void failed(const candidate& c) { failed_[c.name] = c.id; }

  [[nodiscard]] const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::map<std::string, file_id> seen_;
  std::map<std::string, file_id> failed_;
};

template <class Sel>
class checkpoint_server {
 public:
  using sender_type = sync::sender<Sel, fixed_bytes, asio_tcp_transport>;

  checkpoint_server(const serve_args& a, const endpoint& at, asio_tcp_options options, value_mode mode)
      : args_(a), at_(at), options_(std::move(options)), mode_(mode), dir_(a.watch), listener_(make_listener(at, options_)) {}

  checkpoint_server(const checkpoint_server&) = delete;
  checkpoint_server& operator=(const checkpoint_server&) = delete;
  ~checkpoint_server() { shutdown(); }

  [[nodiscard]] std::uint16_t port() const { return listener_->port(); }

  // Called from the signal thread: the main loop and every wait notice it within a poll interval.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    listener_->close();
  }

  int run() {
    std::string key_note = options_.key ? "key id " + options_.key->id() : std::string("no key");
    if (options_.tls) key_note += ", mutual TLS";
    if (options_.insecure_no_auth) key_note = "WITHOUT AUTHENTICATION (--insecure-no-auth)";
    log("listening on " + endpoint{at_.host, port()}.text() + " (" + key_note + "), watching " + dir_.path().string());
    if (!args_.port_file.empty()) {
      const std::string text = std::to_string(port()) + "\n";
      tools::write_file_atomic(args_.port_file, [&](tools::file_sink& s) { s.write(text.data(), text.size()); });
    }
    // Existing checkpoints: the newest is the state to serve; older ones are history nobody asked for.
    auto existing = dir_.scan();
    for (std::size_t i = 0; i + 1 < existing.size(); ++i) dir_.published(existing[i]);
    accept_thread_ = std::thread([this] { accept_loop(); });

    bool dir_error_logged = false;
    while (!stopping()) {
      std::vector<checkpoint_dir::candidate> fresh;
      try {
        fresh = dir_.scan();
        dir_error_logged = false;
      } catch (const failure& f) {
        if (!dir_error_logged) log(std::string("error: ") + f.what() + " (retrying)");
        dir_error_logged = true;
      }
      for (const auto& c : fresh) {
        if (stopping()) break;
        publish_file(c);
      }
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, std::chrono::milliseconds(args_.poll_ms), [&] { return stopping_; });
    }
    log("stopping");
    shutdown();
    return exit_ok;
  }

 private:
  struct handler {
    std::thread thread;
    std::atomic<bool> done{false};
    std::mutex link_mutex;                    // guards `pending` and `link` against abort() from shutdown
    std::optional<asio_tcp_pending> pending;  // until its handshake ends
    std::optional<asio_tcp_transport> link;   // after it, until the sender takes it
  };

  struct newest_version {
    std::uint64_t version = 0;
    std::uint64_t checksum = 0;
    std::uint64_t layout_hash = 0;
    std::uint64_t data_bytes = 0;
    std::vector<unsigned char> header;
  };

  static std::unique_ptr<asio_tcp_listener> make_listener(const endpoint& at, asio_tcp_options o) {
    try {
      return std::make_unique<asio_tcp_listener>(at.host, at.port, std::move(o));
    } catch (const transport_error& e) {
      throw as_failure(e, "cannot listen on " + at.text());
    }
  }

  bool stopping() {
    std::lock_guard lock(mutex_);
    return stopping_;
  }

  void log(const std::string& line) const {
    if (!args_.quiet) std::fprintf(stderr, "serve: %s\n", line.c_str());
  }
  static void log_error(const std::string& line) { std::fprintf(stderr, "serve: %s\n", line.c_str()); }

  void publish_file(const checkpoint_dir::candidate& c) {
    const auto path = dir_.path() / c.name;
    std::optional<checkpoint> ckpt;
    try {
      ckpt.emplace(checkpoint::open(path.string(), "checkpoint"));
    } catch (const failure& f) {
      log_error("skipping " + c.name + ": " + f.what());
      dir_.failed(c);
      return;
    }
    const model_layout& layout = ckpt->layout();
    const std::uint64_t layout_hash = layout.hash();
    const std::uint64_t version = next_version_;
    std::shared_ptr<sender_type> tx;
    {
      std::lock_guard lock(mutex_);
      tx = tx_;
    }
    const bool new_layout = !tx || layout_hash != newest_.layout_hash;
    if (new_layout) {
      sync::sender_options so;
      so.encode = {mode_, args_.chunk_log2, link_};
      so.history = args_.history;
      so.ack_timeout = std::chrono::milliseconds(0);  // acknowledgements are awaited below, where a stop can cut in
      tx = std::make_shared<sender_type>(layout, so, fixed_bytes{args_.bucket_bytes});
    }
    const auto views = ckpt->views();
    const auto header = ckpt->header_bytes();
    sync::publish_report report;
    try {
      // The metadata is the file's header as stored (target_header.hpp, "stored" form): a puller writes
      // it followed by the tensors and gets this file byte for byte.
      report = tx->publish(version, views, header);
    } catch (const std::exception& e) {
      log_error("cannot publish " + c.name + ": " + e.what());
      dir_.failed(c);
      return;
    }
    ++next_version_;
    dir_.published(c);
    std::shared_ptr<sender_type> replaced;
    {
      std::lock_guard lock(mutex_);
      if (new_layout) {
        replaced = std::move(tx_);
        tx_ = tx;
      }
      newest_ = {version, report.target_checksum, layout_hash, layout.bytes(), std::vector<unsigned char>(header.begin(), header.end())};
    }
    cv_.notify_all();
    if (replaced) {
      log("version " + std::to_string(version) + " has another layout: ending the sessions of the previous one (pullers reconnect)");
      replaced->close();
    }
    // Wait (bounded) for the subscribers, so that the log says who has it and a burst of new files does not
    // run further ahead of them than the kept history. A subscriber much slower than the others is marked
    // lagging and not waited for (sync::sender_options::lag_grace): it catches up on its own.
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::milliseconds(args_.ack_timeout_ms);
    while (!tx->wait_for_acks(std::chrono::milliseconds(100)) && std::chrono::steady_clock::now() < deadline && !stopping()) {
    }
    std::size_t connected = 0, at_version = 0, lagging = 0;
    for (const auto& r : tx->receivers()) {
      if (!r.connected) continue;
      ++connected;
      if (r.has_version && r.version == version) ++at_version;
      else if (r.lagging) ++lagging;
    }
    // Lagging subscribers are not waited for, but named in the log: they catch up, never silently skipped.
    const std::string lag_note = lagging ? " (" + std::to_string(lagging) + " lagging: catching up by kept patches or a full transfer)" : "";
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!args_.quiet) {
      const double numel = static_cast<double>(report.numel);
      const double changed = static_cast<double>(report.changed);
      char line[640];
      std::snprintf(line, sizeof line,
                    "version %" PRIu64 " <- %s: %s%" PRIu64 " of %" PRIu64 " elements changed (%.3f%%), patch %s (%.1fx smaller than dense), "
                    "encoded in %.3f s; %zu of %zu subscribers at it after %.3f s%s",
                    version, c.name.c_str(), new_layout ? "new layout, " : "", report.changed, report.numel,
                    numel > 0 ? 100.0 * changed / numel : 0.0, human_bytes(static_cast<double>(report.payload_bytes)).c_str(),
                    report.payload_bytes ? static_cast<double>(layout.bytes()) / static_cast<double>(report.payload_bytes) : 0.0,
                    report.encode_seconds, at_version, connected, report.seconds + waited, lag_note.c_str());
      log(line);
    }
  }

  void accept_loop() {
    while (!stopping()) {
      try {
        auto pending = listener_->accept_pending();
        reap_handlers(false);
        if (unauthenticated_.load() >= args_.max_handshakes) {
          log_error("refused " + pending.peer() + ": " + std::to_string(args_.max_handshakes) + " connections are already unauthenticated");
          continue;  // its destructor closes it
        }
        ++unauthenticated_;
        auto& h = handlers_.emplace_back(std::make_unique<handler>());
        h->pending.emplace(std::move(pending));
        h->thread = std::thread([this, raw = h.get()] { handle(*raw); });
      } catch (const transport_error& e) {
        if (stopping()) break;
        log_error(std::string("refused a connection: ") + e.what());
      } catch (const std::exception& e) {
        if (stopping()) break;
        log_error(std::string("accept: ") + e.what());
      }
    }
  }

  void reap_handlers(bool all) {
    for (auto it = handlers_.begin(); it != handlers_.end();) {
      if (all || (*it)->done.load()) {
        if ((*it)->thread.joinable()) (*it)->thread.join();
        it = handlers_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // The pull request, the catalog, then hand the connection to the sender.
  void handle(handler& h) {
    std::string peer = h.pending->peer();
    try {
      std::optional<asio_tcp_transport> established;
      try {
        established.emplace(h.pending->establish());
      } catch (const std::exception& e) {
        --unauthenticated_;
        if (!stopping()) log_error(std::string("refused a connection: ") + e.what());
        std::lock_guard lock(h.link_mutex);
        h.pending.reset();
        h.done = true;
        return;
      }
      --unauthenticated_;
      {
        std::lock_guard lock(h.link_mutex);
        h.pending.reset();
        h.link.emplace(std::move(*established));
      }
      peer = h.link->peer();
      std::vector<std::byte> in;
      if (!h.link->receive(in)) throw error(errc::truncated, "closed before sending a pull request");
      pull_request req;
      if (auto st = decode(in, req); !st.ok()) throw error(st);
      std::shared_ptr<sender_type> tx;
      catalog cat;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || tx_ != nullptr; });  // nothing to describe before the first version
        if (stopping_) throw error(errc::io, "the server is stopping");
        tx = tx_;
        cat.version = newest_.version;
        cat.checksum = newest_.checksum;
        cat.layout_hash = newest_.layout_hash;
        cat.data_bytes = newest_.data_bytes;
        cat.header = newest_.header;
      }
      const bool up_to_date =
          req.has_version && req.layout_hash == cat.layout_hash && req.version == cat.version && req.checksum == cat.checksum;
      cat.mode = up_to_date && !req.follow ? catalog_mode::up_to_date : catalog_mode::session;
      h.link->send(encode(cat));
      const std::string holds = req.has_version ? "holds version " + std::to_string(req.version) : std::string("holds nothing");
      if (cat.mode == catalog_mode::up_to_date) {
        h.link->close();
        log(peer + " is up to date at version " + std::to_string(cat.version));
      } else {
        asio_tcp_transport link = [&] {
          std::lock_guard lock(h.link_mutex);
          asio_tcp_transport t = std::move(*h.link);
          h.link.reset();
          return t;
        }();
        tx->add_receiver(std::move(link));  // throws once the sender is closed (stopping, or a new layout): the puller retries
        log(peer + " subscribed (" + holds + (req.follow ? ", following" : "") + "); newest version " + std::to_string(cat.version));
      }
    } catch (const std::exception& e) {
      if (!stopping()) log_error("connection " + peer + " dropped: " + e.what());
    }
    {
      std::lock_guard lock(h.link_mutex);
      h.pending.reset();
      h.link.reset();
    }
    h.done = true;
  }

  void shutdown() {
    if (shut_down_) return;
    shut_down_ = true;
    stop();
    if (accept_thread_.joinable()) accept_thread_.join();
    for (auto& h : handlers_) {
      std::lock_guard lock(h->link_mutex);
      if (h->pending) h->pending->abort();
      if (h->link) h->link->abort();
    }
    reap_handlers(true);
    std::shared_ptr<sender_type> tx;
    {
      std::lock_guard lock(mutex_);
      tx = std::move(tx_);
    }
    if (tx) tx->close();  // each session ends in order after what it was sent
  }

  serve_args args_;
  endpoint at_;
  asio_tcp_options options_;
  value_mode mode_;
  link_cost link_ = to_link_cost(args_.link);
  checkpoint_dir dir_;
  std::unique_ptr<asio_tcp_listener> listener_;
  std::thread accept_thread_;
  std::list<std::unique_ptr<handler>> handlers_;  // accept thread only (and shutdown, after joining it)
  std::atomic<std::size_t> unauthenticated_{0};   // handlers still in their handshake
  std::uint64_t next_version_ = 1;
  bool shut_down_ = false;

  std::mutex mutex_;  // guards what follows
  std::condition_variable cv_;
  bool stopping_ = false;
  std::shared_ptr<sender_type> tx_;
  newest_version newest_;
};

// Full transfers are sent as bucket-sized frames (16 MiB by default), a few alive at a time. glibc would hand
// each new one fresh pages (its heap top is trimmed, or the block mmapped, once one is freed): on the VMs
// measured, every fresh page costs a fault and clearing, ~0.15 s of the sending thread per GiB sent
// (bench/results/full-transfer.md). Freed frames stay in the heap for the next; blocks above 64 MiB (the
// snapshot) are still mapped and returned whole.
inline void keep_frame_memory() {
#if defined(__GLIBC__)
  (void)::mallopt(M_MMAP_THRESHOLD, 64 << 20);
  (void)::mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
}

int run_serve(const serve_args& a) {
  const auto mode = parse_value_mode(a.values);
  if (!mode) throw failure(exit_usage, "--values must be absolute or ulp, not '" + a.values + "'");
  if (a.chunk_log2 < min_log2_chunk || a.chunk_log2 > max_log2_chunk) throw failure(exit_usage, "--chunk-log2 must lie in [8, 24]");
  if (a.bucket_bytes == 0) throw failure(exit_usage, "--bucket-bytes must be positive");
  if (a.history == 0) throw failure(exit_usage, "--history must be at least 1");
  const endpoint at = parse_endpoint(a.listen, "--listen", /*allow_zero=*/true);
  std::error_code ec;
  if (!std::filesystem::is_directory(a.watch, ec)) throw failure(exit_io, "--watch " + a.watch + " is not a directory");
  auto options = make_tcp_options(a.security);
  // The server only ever waits for a peer's hello and acknowledgements, which a live peer sends promptly:
  // this bounds how long a vanished or stuck subscriber can hold a session (and shutdown).
  options.receive_timeout = std::chrono::seconds(a.peer_timeout_s);
  // A burst of pullers (a fleet starting) must queue in the kernel, not be refused: handshakes run in parallel.
  options.listen_backlog = 4096;
  keep_frame_memory();
  signal_guard signals;  // before the first thread (the listener's) starts
  int rc = exit_ok;
  visit_selection(a.encoder, [&]<class Sel>() {
    checkpoint_server<Sel> server(a, at, options, *mode);
    signal_guard::handler_scope on_signal(signals, [&](int) { server.stop(); });
    rc = server.run();
  });
  return rc;
}

}  // namespace sparsesync::cli
