// sharded_receiver<Transport, Sink>: a worker fed by N trainer ranks, each sending only its own shard of the
// model (core/shard.hpp) through its own sync::sender, so that no rank gathers a full tensor. The worker holds one
// receiver per rank over that shard's sub-layout (views into the worker's own weights) and assembles one version
// from all of them: every shard is received and verified first, then all are committed under one exclusive
// lock, or none is. One version number (every shard must carry the same) and one whole-model checksum per
// version: the sum of the shards' content checksums, each over its shard layout (whose hash pins where every
// piece sits in the full model). The trainer side gets the same number by summing its ranks' reported target
// checksums (one all-reduce); it differs from the checksum a single sender of the full layout would report,
// because an element's hash includes its index, and a shard numbers its elements from its own start. A shard that fails, or disagrees on the
// version, makes the whole version refused: every shard is nacked and each sender heals its shard with a full
// transfer. Protocol: docs/PROTOCOL.md, "Sharded senders".
#pragma once

#include <sparsesync/core/shard.hpp>
#include <sparsesync/sync/receiver.hpp>

#include <exception>
#include <memory>
#include <shared_mutex>
#include <thread>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace sync {

struct sharded_version {
  std::uint64_t version = 0;
  std::uint64_t checksum = 0;       // whole-model checksum: the sum of the shards' (see the top of this file)
  std::uint64_t changed = 0;
  std::uint64_t payload_bytes = 0;
  bool full = false;                // at least one shard came as a full transfer
  double seconds = 0;               // from the first shard's first byte to the commit of all
  std::vector<applied_version> shards;
};

template <class Transport, class Sink = host_sink>
class sharded_receiver {
  static_assert(check_transport<Transport>);
  static_assert(check_version_sink<Sink>);
  using clock = std::chrono::steady_clock;
  using shard_receiver = receiver<Transport, Sink>;

 public:
  struct shard_link {
    std::vector<shard_piece> pieces;  // what this rank sends (the sender publishes shard_layout(full, pieces))
    Sink sink;                        // over shard_views(full, weights, pieces)
    Transport link;
  };

  // Host weights: `buffers` in full-layout order; one (pieces, link) per trainer rank.
  sharded_receiver(const model_layout& full, std::span<const tensor_view> buffers, std::vector<std::pair<std::vector<shard_piece>, Transport>> shards,
                   receiver_options opt = {})
    requires std::same_as<Sink, host_sink>
      : sharded_receiver(full, host_links(full, buffers, std::move(shards)), opt) {}

  // Any sink, one per shard.
  sharded_receiver(const model_layout& full, std::vector<shard_link> shards, receiver_options opt = {}) : full_(full) {
    std::vector<std::vector<shard_piece>> pieces;
    for (const auto& s : shards) pieces.push_back(s.pieces);
    throw_if_error(check_shards(full_, pieces));
    for (auto& s : shards)
      rx_.push_back(std::make_unique<shard_receiver>(shard_layout(full_, s.pieces), std::move(s.sink), std::move(s.link), opt));
  }

  // Blocks until every shard of the next version arrived, verifies all, commits all or none. Returns nullopt
  // once every sender closed in order; throws sparsesync::error when the version is refused (the weights keep
  // the last good version: patches are written only at the commit) or a link fails.
  std::optional<sharded_version> next() {
    const auto start = clock::now();
    std::vector<std::optional<typename shard_receiver::pending_version>> pending(rx_.size());
    // Each shard on a thread of its own: the ranks send at once, and a worker that took them one after the other
    // would make every rank wait for the ranks before it (its frames wait for their receive).
    std::vector<std::exception_ptr> failed(rx_.size());
    const auto take = [&](std::size_t i) {
      try {
        pending[i] = rx_[i]->receive();
      } catch (...) {
        failed[i] = std::current_exception();
      }
    };
    {
      std::vector<std::jthread> others;
      for (std::size_t i = 1; i < rx_.size(); ++i) others.emplace_back(take, i);
      if (!rx_.empty()) take(0);
    }
    for (const auto& f : failed)
      if (f) {
        refuse_all(pending, {errc::io, "another shard's link failed"});
        std::rethrow_exception(f);
      }
    std::size_t closed = 0;
    for (const auto& p : pending) closed += !p;
    if (closed == rx_.size()) return std::nullopt;
    if (closed) {
      refuse_all(pending, {errc::io, "another shard's sender closed"});
      throw error(errc::io, "sharded_receiver: " + std::to_string(closed) + " of " + std::to_string(rx_.size()) + " shard senders closed, the others sent a version");
    }
    status verdict;
    for (std::size_t i = 0; i < rx_.size() && verdict; ++i) {
      const auto& p = *pending[i];
      if (!p.verdict) verdict = status(p.verdict.code(), "shard " + std::to_string(i) + ": " + p.verdict.message());
      else if (p.info.version != pending[0]->info.version)
        verdict = {errc::base_mismatch, "shard " + std::to_string(i) + " sent version " + std::to_string(p.info.version) + ", shard 0 version " +
                                            std::to_string(pending[0]->info.version)};
    }
    if (!verdict) {
      refuse_all(pending, verdict);
      throw error(verdict);
    }
    sharded_version out;
    {
      std::unique_lock lock(weights_mutex_);
      for (std::size_t i = 0; i < rx_.size(); ++i) out.shards.push_back(rx_[i]->commit_pending(*pending[i]));
    }
    out.version = out.shards.front().version;
    for (const auto& s : out.shards) {
      out.checksum += s.checksum;
      out.changed += s.changed;
      out.payload_bytes += s.payload_bytes;
      out.full = out.full || s.full;
    }
    out.seconds = std::chrono::duration<double>(clock::now() - start).count();
    return out;
  }

  // Readers of the weights hold this shared; a commit of all shards holds it exclusive.
  [[nodiscard]] std::shared_mutex& weights_mutex() const { return weights_mutex_; }
  // Every shard holds the same version (under weights_mutex()).
  [[nodiscard]] bool has_version() const {
    for (const auto& r : rx_)
      if (!r->has_version() || r->version() != rx_.front()->version()) return false;
    return !rx_.empty();
  }
  [[nodiscard]] std::uint64_t version() const { return rx_.front()->version(); }
  [[nodiscard]] std::uint64_t checksum() const {
    std::uint64_t sum = 0;
    for (const auto& r : rx_) sum += r->checksum();
    return sum;
  }
  [[nodiscard]] std::size_t shard_count() const { return rx_.size(); }
  [[nodiscard]] shard_receiver& shard(std::size_t i) { return *rx_.at(i); }
  void close() {
    for (auto& r : rx_) r->close();
  }

 private:
  static std::vector<shard_link> host_links(const model_layout& full, std::span<const tensor_view> buffers,
                                            std::vector<std::pair<std::vector<shard_piece>, Transport>> shards) {
    std::vector<shard_link> out;
    for (auto& [pieces, link] : shards) {
      auto views = shard_views<tensor_view>(full, buffers, pieces);
      out.push_back({pieces, host_sink(views), std::move(link)});
    }
    return out;
  }

  // Gives up every pending shard: its sender hears why (its own reason, or its peers') and heals it.
  void refuse_all(std::vector<std::optional<typename shard_receiver::pending_version>>& pending, const status& why) {
    for (std::size_t i = 0; i < pending.size(); ++i) {
      if (!pending[i]) continue;
      try {
        rx_[i]->refuse_pending(*pending[i], pending[i]->verdict ? why : pending[i]->verdict);
      } catch (const std::exception&) {
        // A link that fails now is reported by its next receive; the others must still hear their nack.
      }
    }
  }

  model_layout full_;
  std::vector<std::unique_ptr<shard_receiver>> rx_;
  mutable std::shared_mutex weights_mutex_;
};

}  // namespace sync
SPARSESYNC_NS_END
