// `sparsesync pull HOST:PORT -o OUT`: brings OUT to the newest version a `sparsesync serve` publishes
// (docs/CLI.md, "Network mode"), and with --follow keeps it there.
//
// State between runs: OUT itself, and a sidecar OUT.sparsesync.json naming the version OUT holds. The sidecar
// only supplies the version number: OUT's content checksum, recomputed at every start, is what the server
// matches against its history, so an edited OUT, a stale sidecar or one from another server costs a full
// transfer, never a wrong file.
#include <sparsesync/cli/cmd_pull.hpp>

#include <sparsesync/cli/exit_codes.hpp>
#include <sparsesync/cli/net_common.hpp>
#include <sparsesync/cli/pull_sink.hpp>
#include <sparsesync/cli/read_ahead.hpp>
#include <sparsesync/cli/safetensors.hpp>
#include <sparsesync/cli/target_header.hpp>

#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace sparsesync::cli {

namespace detail_pull {

// Unmaps a weights_image's data area.
struct unmap {
  std::size_t bytes = 0;
  void operator()(unsigned char* p) const noexcept { ::munmap(p, bytes); }
};

// A checkpoint in memory: its header bytes as in the file and its data area (64-byte aligned, mutable: the
// receiver applies versions into it in place).
class weights_image {
 public:
  // Tensors under `header` (which must describe `layout` with a packed data area) for a full transfer to fill:
  // not zeroed, nor touched at all here (a full transfer writes every element, or goes to OUT's file through
  // a few borrowed pages: pull_sink.hpp).
  // The data area sits at the same offset within a page as in the file (where that keeps tensors 8-byte
  // aligned), so that sequential_writer can write its blocks with O_DIRECT.
  weights_image(std::vector<unsigned char> header, model_layout layout) : header_(std::move(header)), layout_(std::move(layout)) {
    allocate(layout_.bytes(), /*huge_pages=*/false, header_.size() % 8 == 0 ? header_.size() % 4096 : 0);
  }

  // Reads `path`; nullopt when it does not exist. Throws sparsesync::error for a file that is not a
  // readable safetensors checkpoint.
  static std::optional<weights_image> read(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return std::nullopt;
      throw error(errc::io, path.string() + ": cannot open: " + std::strerror(errno));
    }
    struct closer {
      int fd;
      ~closer() { ::close(fd); }
    } guard{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw error(errc::io, path.string() + ": not a regular file");
    const auto size = static_cast<std::uint64_t>(st.st_size);
    unsigned char len[8];
    if (size < 8 || !read_exact(fd, len, 8)) throw error(errc::malformed, path.string() + ": shorter than a safetensors header");
    const std::uint64_t n = sparsesync::detail::load_le<std::uint64_t>(len);
    if (n > tools::safetensors_max_header_size || n > size - 8) throw error(errc::malformed, path.string() + ": bad header length");
    std::vector<unsigned char> header(8 + n);
    std::memcpy(header.data(), len, 8);
    if (!read_exact(fd, header.data() + 8, n)) throw error(errc::io, path.string() + ": file shrank while being read");
    const auto parsed = tools::parse_safetensors_header(header, size, path.string());
    weights_image img(std::move(header), parsed.layout, no_alloc{});
    img.allocate(parsed.data_size(), /*huge_pages=*/true);
    if (!read_exact(fd, img.data_, parsed.data_size())) throw error(errc::io, path.string() + ": file shrank while being read");
    return img;
  }

  // Reads the data area back from the checkpoint at `path`, which must have this image's header.
  void reload(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw error(errc::io, path.string() + ": cannot open: " + std::strerror(errno));
    struct closer {
      int fd;
      ~closer() { ::close(fd); }
    } guard{fd};
    if (::lseek(fd, static_cast<off_t>(header_.size()), SEEK_SET) < 0 || !read_exact(fd, data_, bytes_))
      throw error(errc::io, path.string() + ": cannot read it back");
  }

  [[nodiscard]] const model_layout& layout() const { return layout_; }
  [[nodiscard]] std::span<const unsigned char> header() const { return header_; }
  void set_header(std::vector<unsigned char> h) { header_ = std::move(h); }
  [[nodiscard]] std::span<const unsigned char> data() const { return {data_, bytes_}; }
  [[nodiscard]] unsigned char* mutable_data() { return data_; }

  [[nodiscard]] std::vector<tensor_view> views() {
    std::vector<tensor_view> v;
    v.reserve(layout_.size());
    std::uint64_t at = 0;
    for (const auto& t : layout_.tensors()) {
      v.push_back({data_ + at, t.numel(), t.dtype});
      at += t.bytes();
    }
    return v;
  }
  [[nodiscard]] std::uint64_t checksum() {
    const auto v = views();
    const std::vector<const_tensor_view> c(v.begin(), v.end());
    return model_checksum(layout_, c);
  }

  // Replaces `path` atomically with the header followed by the data area.
  void write(const std::filesystem::path& path) const { tools::write_safetensors_atomic(path, header_, data()); }

 private:
  struct no_alloc {};
  weights_image(std::vector<unsigned char> header, model_layout layout, no_alloc) : header_(std::move(header)), layout_(std::move(layout)) {}

  void allocate(std::uint64_t bytes, bool huge_pages, std::size_t offset = 0) {
    // Fresh anonymous memory (zero pages, nothing touched), for a file read into it asking for huge pages: in
    // a VM each 4 KiB first touch costs a fault, and a model has a quarter of a million of them per GiB.
    const std::size_t len = static_cast<std::size_t>(bytes) + offset + 64;
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw error(errc::io, "cannot allocate " + std::to_string(bytes) + " bytes for the model: " + std::strerror(errno));
#ifdef MADV_HUGEPAGE
    if (huge_pages) (void)::madvise(p, len, MADV_HUGEPAGE);
#endif
    storage_ = std::unique_ptr<unsigned char, unmap>(static_cast<unsigned char*>(p), unmap{len});
    data_ = storage_.get() + offset;
    bytes_ = bytes;
  }

  static bool read_exact(int fd, unsigned char* p, std::uint64_t n) {
    while (n > 0) {
      const ssize_t r = ::read(fd, p, std::min<std::uint64_t>(n, std::uint64_t(1) << 30));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      p += r;
      n -= static_cast<std::uint64_t>(r);
    }
    return true;
  }

  std::vector<unsigned char> header_;
  model_layout layout_;
  std::unique_ptr<unsigned char, unmap> storage_;
  unsigned char* data_ = nullptr;
  std::uint64_t bytes_ = 0;
};

// OUT.sparsesync.json: which version OUT holds, and enough to notice that OUT changed since.
struct sidecar {
  std::uint64_t version = 0;
  std::uint64_t checksum = 0;
  std::uint64_t layout_hash = 0;
  std::uint64_t header_xxh64 = 0;
  std::uint64_t file_bytes = 0;
};

inline std::filesystem::path sidecar_path(const std::filesystem::path& out) { return out.string() + ".sparsesync.json"; }

inline std::optional<sidecar> read_sidecar(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  try {
    const auto j = nlohmann::json::parse(in);
    auto hex = [&](const char* k) { return std::stoull(j.at(k).get<std::string>(), nullptr, 16); };
    if (j.at("format").get<int>() != 1) return std::nullopt;
    return sidecar{j.at("version").get<std::uint64_t>(), hex("checksum"), hex("layout_hash"), hex("header_xxh64"),
                   j.at("file_bytes").get<std::uint64_t>()};
  } catch (const std::exception&) {
    return std::nullopt;  // unreadable: OUT then counts as holding no known version
  }
}

inline void write_sidecar(const std::filesystem::path& p, const sidecar& s, const std::string& server) {
  nlohmann::json j;
  j["format"] = 1;
  j["version"] = s.version;
  j["checksum"] = hex_u64(s.checksum);
  j["layout_hash"] = hex_u64(s.layout_hash);
  j["header_xxh64"] = hex_u64(s.header_xxh64);
  j["file_bytes"] = s.file_bytes;
  j["server"] = server;
  const std::string text = j.dump() + "\n";
  tools::write_file_atomic(p, [&](tools::file_sink& sink) { sink.write(text.data(), text.size()); });
}

// The metadata of the version being received, read off the frames as they pass to the receiver: the
// receiver checks everything, this only keeps the safetensors header the server stored in it.
struct version_header_tap {
  bool valid = false;
  std::uint64_t version = 0;
  std::vector<unsigned char> metadata;
};

class tapped_tcp_transport {
 public:
  using transport_concept = transport_tag;

  // Frames are read ahead (read_ahead.hpp): up to two wait while one is verified and written.
  tapped_tcp_transport(std::shared_ptr<asio_tcp_transport> link, std::shared_ptr<version_header_tap> tap)
      : link_(link), ahead_(std::make_shared<read_ahead>(std::move(link), 2)), tap_(std::move(tap)) {}

  void send(std::span<const std::byte> frame) { link_->send(frame); }
  bool receive(std::vector<std::byte>& frame) {
    const bool got = ahead_->receive(frame);
    if (got && sync::type_of(frame) == sync::message_type::version_begin) {
      patch_prologue pro;
      tap_->valid = parse_patch_prologue(sync::body_of(frame), pro).ok();
      tap_->version = tap_->valid ? pro.header.target_version : 0;
      tap_->metadata.assign(pro.metadata.begin(), pro.metadata.end());
    }
    return got;
  }
  void close() noexcept { link_->close(); }
  [[nodiscard]] std::size_t max_frame_size() const noexcept { return link_->max_frame_size(); }

 private:
  std::shared_ptr<asio_tcp_transport> link_;
  std::shared_ptr<read_ahead> ahead_;
  std::shared_ptr<version_header_tap> tap_;
};

}  // namespace detail_pull

class puller {
 public:
  puller(const pull_args& a, endpoint server, asio_tcp_options options)
      : args_(a), server_(std::move(server)), options_(std::move(options)), out_(a.out), sidecar_(detail_pull::sidecar_path(out_)) {}

  // From the signal thread: cuts the connection, which ends any wait.
  void stop() {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (link_) link_->abort();
    cv_.notify_all();
  }

  int run(const signal_guard& signals) {
    using namespace std::chrono;
    milliseconds backoff(500);
    for (unsigned attempt = 0;; ++attempt) {
      try {
        const bool done = attempt_once();
        if (done) return exit_ok;
        if (!stopping()) log("the server ended the session; reconnecting");
        backoff = milliseconds(500);
      } catch (const failure& f) {
        if (stopping()) break;
        const bool fatal = f.code() == exit_auth || f.code() == exit_usage || f.code() == exit_io || f.code() == exit_internal;
        if (fatal || (!args_.follow && attempt >= args_.retries)) throw;
        log_error(std::string("error: ") + f.what() + "; reconnecting in " + std::to_string(backoff.count()) + " ms");
      }
      if (!sleep_unless_stopped(backoff)) break;
      backoff = std::min<milliseconds>(backoff * 2, seconds(30));
    }
    // Stopped by a signal: OUT holds a complete version (or is untouched).
    if (args_.follow) return exit_ok;
    return 128 + (signals.signal() ? signals.signal() : SIGTERM);
  }

 private:
  using receiver_type = sync::receiver<detail_pull::tapped_tcp_transport, pull_sink>;

  struct local_state {
    std::optional<detail_pull::weights_image> image;
    std::uint64_t layout_hash = 0;
    bool has_version = false;  // OUT is the version the sidecar names, by its content checksum
    std::uint64_t version = 0;
    std::uint64_t checksum = 0;
  };

  void log(const std::string& line) const {
    if (!args_.quiet) std::fprintf(stderr, "pull: %s\n", line.c_str());
  }
  static void log_error(const std::string& line) { std::fprintf(stderr, "pull: %s\n", line.c_str()); }

  bool stopping() {
    std::lock_guard lock(mutex_);
    return stopping_;
  }
  bool sleep_unless_stopped(std::chrono::milliseconds d) {
    std::unique_lock lock(mutex_);
    return !cv_.wait_for(lock, d, [&] { return stopping_; });
  }

  local_state load_local() {
    local_state s;
    try {
      s.image = detail_pull::weights_image::read(out_);
    } catch (const sparsesync::error& e) {
      log("OUT " + out_.string() + " is not a readable checkpoint (" + e.what() + "); it will be replaced by a full transfer");
      return s;
    }
    if (!s.image) return s;
    s.layout_hash = s.image->layout().hash();
    const auto side = detail_pull::read_sidecar(sidecar_);
    if (!side) return s;
    const std::uint64_t file_bytes = s.image->header().size() + s.image->data().size();
    if (side->layout_hash != s.layout_hash || side->file_bytes != file_bytes || side->header_xxh64 != header_hash(s.image->header())) {
      log("OUT does not match " + sidecar_.string() + " (changed since the last pull); asking for a full transfer");
      return s;
    }
    s.checksum = s.image->checksum();
    if (s.checksum != side->checksum) {
      log("OUT's tensors changed since the last pull; asking for a full transfer");
      return s;
    }
    s.has_version = true;
    s.version = side->version;
    return s;
  }

  // Writes OUT (header + tensors) and then its sidecar; both atomically. A crash between the two leaves a
  // sidecar that no longer matches OUT, which the next start notices.
  void commit(const detail_pull::weights_image& img, std::uint64_t version, std::uint64_t checksum) {
    try {
      img.write(out_);
      detail_pull::write_sidecar(sidecar_, {version, checksum, img.layout().hash(), header_hash(img.header()),
                                             img.header().size() + img.data().size()},
                                 server_.text());
    } catch (const sparsesync::error& e) {
      throw failure(exit_io, std::string("cannot write OUT: ") + e.what());
    }
  }

  // Commits a version that a full transfer wrote to `file` (its tensors at `data_offset`): the header goes in
  // front of them, where the catalog's header had the same length (nearly always); else the tensors are
  // copied into a new file behind the version's header.
  void commit_file(const detail_pull::weights_image& img, tools::atomic_temp_file& file, std::uint64_t data_offset, std::uint64_t version,
                   std::uint64_t checksum) {
    try {
      const auto header = img.header();
      if (header.size() == data_offset) {
        if (::pwrite(file.fd(), header.data(), header.size(), 0) != static_cast<ssize_t>(header.size()))
          throw error(errc::io, out_.string() + ": cannot write the header: " + std::strerror(errno));
        file.commit();
      } else {
        tools::write_file_atomic(out_, [&](tools::file_sink& sink) {
          sink.write(header);
          std::vector<unsigned char> buf(std::size_t{1} << 20);
          for (std::uint64_t at = 0; at < img.data().size();) {
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), img.data().size() - at));
            const ssize_t r = ::pread(file.fd(), buf.data(), n, static_cast<off_t>(data_offset + at));
            if (r <= 0) throw error(errc::io, out_.string() + ": cannot read back the received tensors");
            sink.write(buf.data(), static_cast<std::size_t>(r));
            at += static_cast<std::uint64_t>(r);
          }
        });
      }
      detail_pull::write_sidecar(sidecar_, {version, checksum, img.layout().hash(), header_hash(header), header.size() + img.data().size()},
                                 server_.text());
    } catch (const sparsesync::error& e) {
      throw failure(exit_io, std::string("cannot write OUT: ") + e.what());
    }
  }

  // A failed key proof or TLS handshake means a wrong key or certificate (exit 8) the first time; after this
  // run once authenticated with the same server and the same key, it is far more likely a handshake damaged
  // on the way (one flipped byte fails a proof), so it is retried like any network error, saying why.
  std::shared_ptr<asio_tcp_transport> connect() {
    try {
      auto link = std::make_shared<asio_tcp_transport>(asio_tcp_transport::connect(server_.host, server_.port, options_));
      std::lock_guard lock(mutex_);
      if (stopping_) link->abort();
      link_ = link;
      authenticated_once_ = true;
      return link;
    } catch (const transport_error& e) {
      failure f = as_failure(e, "cannot connect to " + server_.text());
      if (f.code() != exit_auth || !authenticated_once_ || e.transport_code() == transport_errc::key_file) throw f;
      throw failure(exit_network, std::string(f.what()) +
                                      " (this run authenticated with the server before: taken for a handshake damaged on the way, "
                                      "so retrying; if the keys changed, this repeats)");
    }
  }

  // One connection. True once OUT holds the newest version (without --follow); false when the server ended
  // the session in order (with --follow). Throws failure on errors.
  bool attempt_once() {
    try {
      return session();
    } catch (const failure&) {
      drop_link();
      throw;
    } catch (const transport_error& e) {
      drop_link();
      // After the handshake, a TLS failure ("bad record mac") is a record damaged on the way, not a wrong
      // certificate: the connection is lost, as with any other damage the frames' checks catch.
      if (e.transport_code() == transport_errc::tls) throw failure(exit_network, server_.text() + ": " + e.what() + " (damaged on the way)");
      throw as_failure(e, server_.text());
    } catch (const sparsesync::error& e) {
      drop_link();
      // The server is authenticated: data that fails verification is damage (or a bug) on the way, so retry.
      const bool link_problem = e.code() == errc::io || e.code() == errc::layout_mismatch;  // e.g. the server changed layout
      throw failure(link_problem ? exit_network : int{exit_bad_patch}, std::string("from ") + server_.text() + ": " + e.what());
    }
  }

  void drop_link() {
    std::lock_guard lock(mutex_);
    link_.reset();
  }

  bool session() {
    using clock = std::chrono::steady_clock;
    local_state local = load_local();
    if (ask_full_) {
      local.has_version = false;
      ask_full_ = false;
    }
    auto link = connect();

    pull_request req;
    req.has_version = local.has_version;
    req.follow = args_.follow;
    req.layout_hash = local.layout_hash;
    req.version = local.version;
    req.checksum = local.checksum;
    link->send(encode(req));
    std::vector<std::byte> in;
    if (!link->receive(in)) throw failure(exit_network, server_.text() + " closed the connection without a catalog (not a `sparsesync serve`?)");
    catalog cat;
    if (auto st = decode(in, cat); !st.ok()) throw failure(exit_network, server_.text() + ": " + st.message());
    const parsed_header described = parse_header_bytes(cat.header, cat.data_bytes);
    if (!described.ok || described.layout.hash() != cat.layout_hash || described.layout.bytes() != cat.data_bytes)
      throw failure(exit_bad_patch, server_.text() + " sent a catalog header that does not describe its layout" +
                                        (described.ok ? std::string() : ": " + described.error));

    const bool same_layout = local.image && local.layout_hash == cat.layout_hash;
    if (same_layout && local.has_version && local.version == cat.version && local.checksum == cat.checksum) {
      // OUT holds the newest tensors; make its header the server's too (byte-identical file).
      if (!std::ranges::equal(local.image->header(), cat.header) && !link->authenticated() && !link->encrypted()) {
        // Without authentication nothing vouches for the catalog's header (a flipped byte would be written
        // into OUT): take the version again in full, where the patch's metadata checksum covers the header.
        log("the catalog's header differs from OUT's and the connection is unauthenticated: asking for a full transfer, "
            "whose header is checksummed");
        ask_full_ = true;
        link->close();
        return false;
      }
      if (!std::ranges::equal(local.image->header(), cat.header)) {
        local.image->set_header(cat.header);
        commit(*local.image, cat.version, cat.checksum);
        log("OUT's header rewritten to version " + std::to_string(cat.version) + "'s");
      }
      if (cat.mode == catalog_mode::up_to_date) {
        log("OUT is at the newest version " + std::to_string(cat.version));
        return true;
      }
    } else if (cat.mode == catalog_mode::up_to_date) {
      throw failure(exit_network, server_.text() + " reports OUT up to date, which it is not");
    }

    detail_pull::weights_image image = same_layout ? std::move(*local.image) : detail_pull::weights_image(cat.header, described.layout);
    sync::receiver_options ro;
    ro.has_version = same_layout && local.has_version;
    ro.version = local.version;
    auto tap = std::make_shared<detail_pull::version_header_tap>();
    const auto views = image.views();
    receiver_type rx(described.layout, pull_sink(views), detail_pull::tapped_tcp_transport(link, tap), ro);
    // An image that holds nothing takes a full transfer: written straight to OUT's temporary file.
    std::optional<tools::atomic_temp_file> out_file;
    const std::uint64_t file_data_offset = image.header().size();
    if (!same_layout) {
      try {
        out_file.emplace(out_);
      } catch (const sparsesync::error& e) {
        throw failure(exit_io, std::string("cannot write OUT: ") + e.what());
      }
      rx.sink().to_file(out_file->fd(), out_file->temp_path(), file_data_offset, image.mutable_data());
    }
    const std::uint64_t target = std::max(cat.version, rx.sender_version());
    log("connected to " + server_.text() + " (" + (link->encrypted() ? "TLS" : link->authenticated() ? "authenticated" : "UNAUTHENTICATED") +
        "); newest version " + std::to_string(target) + ", OUT holds " +
        (ro.has_version ? "version " + std::to_string(ro.version) : std::string("nothing")));

    unsigned refused = 0;
    std::uint64_t received = 0;
    for (;;) {
      std::optional<sync::applied_version> v;
      try {
        v = rx.next();
      } catch (const transport_error&) {
        throw;
      } catch (const sparsesync::error& e) {
        if (e.code() == errc::io) throw;  // the connection ended inside a version
        // The receiver refused the version and told the server, which follows with a full transfer on this
        // session; OUT still holds its last good version.
        if (++refused > 2) throw;
        log_error(std::string("refused a version: ") + e.what() + "; waiting for a full transfer");
        continue;
      }
      if (!v) {
        if (args_.follow) return false;
        throw failure(exit_network, server_.text() + " ended the session before version " + std::to_string(target));
      }
      refused = 0;
      const auto written = clock::now();
      if (!tap->valid || tap->version != v->version) throw failure(exit_internal, "lost the header of version " + std::to_string(v->version));
      target_header_ref ref;
      if (auto st = read_target_header_metadata(tap->metadata, ref); !st.ok() || ref.stored.empty())
        throw failure(exit_bad_patch, "version " + std::to_string(v->version) + " carries no safetensors header");
      const parsed_header h = parse_header_bytes(ref.stored, described.layout.bytes());
      if (!h.ok || h.layout.hash() != described.layout.hash())
        throw failure(exit_bad_patch, "version " + std::to_string(v->version) + "'s header does not describe the received tensors");
      image.set_header(std::vector<unsigned char>(ref.stored.begin(), ref.stored.end()));
      const bool filed = rx.sink().wrote_file();
      if (filed) {
        commit_file(image, *out_file, file_data_offset, v->version, v->checksum);
        out_file.reset();
        rx.sink().to_memory();
      } else {
        commit(image, v->version, v->checksum);
      }
      const double write_s = std::chrono::duration<double>(clock::now() - written).count();
      ++received;
      if (!args_.quiet) {
        std::printf("{\"version\":%" PRIu64 ",\"base_version\":%" PRIu64 ",\"full\":%s,\"changed\":%" PRIu64 ",\"payload_bytes\":%" PRIu64
                    ",\"seconds\":%.6f,\"apply_seconds\":%.6f,\"write_seconds\":%.6f,\"checksum\":\"%s\"}\n",
                    v->version, v->base_version, v->full ? "true" : "false", v->changed, v->payload_bytes, v->seconds + write_s, v->seconds,
                    write_s, hex_u64(v->checksum).c_str());
        std::fflush(stdout);
      }
      if (!args_.follow && rx.version() >= target) {
        rx.close();
        return true;
      }
      if (filed) {
        // More versions follow, as patches against the image: it takes the version back from OUT, checked
        // (OUT could have been changed in between: the image must be exactly the version acknowledged).
        try {
          image.reload(out_);
        } catch (const sparsesync::error& e) {
          throw failure(exit_io, std::string("cannot read OUT back: ") + e.what());
        }
        if (image.checksum() != v->checksum)
          throw failure(exit_network, "OUT changed while pull was writing it (its tensors are not the version just received); starting over");
      }
    }
  }

  pull_args args_;
  endpoint server_;
  asio_tcp_options options_;
  std::filesystem::path out_, sidecar_;

  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::shared_ptr<asio_tcp_transport> link_;  // the current connection, for stop()
  bool authenticated_once_ = false;             // a handshake with this server succeeded in this run
  bool ask_full_ = false;                       // the next session asks for a full transfer (see session())
};

int run_pull(const pull_args& a) {
  const endpoint server = parse_endpoint(a.server, "server", /*allow_zero=*/false);
  if (a.out.empty()) throw failure(exit_usage, "-o OUT is required");
  // Left by an earlier run that was killed while writing OUT or its sidecar.
  (void)tools::remove_stale_temps(a.out);
  (void)tools::remove_stale_temps(detail_pull::sidecar_path(a.out));
  auto options = make_tcp_options(a.security);
  // Idle waits between versions are normal when following; otherwise a silent server is a failure.
  if (!a.follow && a.timeout_s > 0) options.receive_timeout = std::chrono::seconds(a.timeout_s);
  signal_guard signals;  // before the first thread (a connection's) starts
  puller p(a, server, options);
  signal_guard::handler_scope on_signal(signals, [&](int) { p.stop(); });
  return p.run(signals);
}

}  // namespace sparsesync::cli
