// relay: a receiver that republishes every version it applied to its own receivers, so a tree of relays
// keeps the trainer's uplink at one copy per relay instead of one per worker. A relay re-encodes from its
// own verified copy (its own sender keeps a snapshot), so a version reaches a leaf only after every relay on
// the way verified it, and a late leaf is caught up by its relay without involving the trainer.
#pragma once

#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>

SPARSESYNC_NS_BEGIN
namespace sync {

template <class Sel, class Policy, class Upstream, class Downstream>
class relay {
  static_assert(check_encoder_selection<Sel>);
  static_assert(check_bucketing_policy<Policy>);
  static_assert(check_transport<Upstream>);
  static_assert(check_transport<Downstream>);

 public:
  // `buffers` are the relay's own copy of the weights (it may also serve them, like any receiver).
  relay(model_layout layout, std::span<const tensor_view> buffers, Upstream upstream, sender_options opt = {}, Policy policy = {})
      : buffers_(buffers.begin(), buffers.end()),
        rx_(layout, buffers, std::move(upstream)),
        tx_(std::move(layout), opt, std::move(policy)) {}

  void add_receiver(Downstream t) { tx_.add_receiver(std::move(t)); }

  // Applies the next upstream version and republishes it downstream; nullopt once upstream closed.
  std::optional<applied_version> forward_next() {
    auto v = rx_.next();
    if (!v) return v;
    std::vector<const_tensor_view> views(buffers_.begin(), buffers_.end());
    std::shared_lock lock(rx_.weights_mutex());
    last_ = tx_.publish(v->version, views);
    return v;
  }

  // Forwards until upstream closes, then closes downstream.
  void run() {
    while (forward_next()) {
    }
    tx_.close();
  }

  [[nodiscard]] const publish_report& last_publish() const { return last_; }
  [[nodiscard]] receiver<Upstream>& upstream() { return rx_; }
  [[nodiscard]] sender<Sel, Policy, Downstream>& downstream() { return tx_; }

 private:
  std::vector<tensor_view> buffers_;
  receiver<Upstream> rx_;
  sender<Sel, Policy, Downstream> tx_;
  publish_report last_;
};

}  // namespace sync
SPARSESYNC_NS_END
