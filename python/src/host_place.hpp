// Weights in host memory for the Python endpoints (endpoints.hpp): the engine's host source and sink over a
// wire (tcp_wire, ucx_wire); no CUDA stream to order against.
#pragma once

#include "endpoints.hpp"

namespace sparsesync::python {

template <class Wire>
class host_place {
 public:
  static constexpr placement where = placement::host;
  using wire = Wire;
  using link_type = typename Wire::transport;
  using sender_type = sync::sender<auto_encoder, fixed_bytes, link_type>;
  using receiver_type = sync::receiver<link_type>;

  host_place(const place_options& o, bool trainer) {
    if (o.device >= 0) throw error(errc::invalid_argument, "a host endpoint takes no CUDA device");
    if (trainer && o.snapshot != "device")
      throw error(errc::invalid_argument, "snapshot='" + o.snapshot + "' is for GPU publishers (a host publisher's snapshot is in host memory)");
    if (o.commit != "atomic") throw error(errc::invalid_argument, "commit='" + o.commit + "' is for GPU subscribers (host ones commit atomically)");
  }
  int device() const { return -1; }

  // `name`: "auto" (per bucket the smallest; entropy among them where link_gbps is stated) or any built-in
  // encoder, chosen at run time for every bucket (a stated link speed weighs only auto's choice).
  void emplace_sender(std::optional<sender_type>& tx, const model_layout& layout, const sync::sender_options& o, fixed_bytes policy,
                      const std::string& name) {
    const auto id = named_encoder(name);
    if (id && o.encode.link.stated())
      throw error(errc::invalid_argument, "link_gbps: it weighs entropy into auto's choice; encoder='" + name +
                                              "' encodes every bucket with one encoder (leave link_gbps out, or use encoder='auto')");
    tx.emplace(layout, o, policy, typename sender_type::source_type(id));
  }
  void emplace_receiver(std::optional<receiver_type>& rx, const model_layout& layout, std::span<const tensor_view> weights, link_type t,
                        const sync::receiver_options& o) {
    rx.emplace(layout, weights, std::move(t), o);
  }
  link_type accept(typename Wire::listener& l, ms timeout) { return Wire::accept(l, timeout); }
  link_type connect(link_type t) { return t; }
  void order_after(std::uintptr_t) {}
  void order_before(std::uintptr_t) {}
  void report_source(const sender_type& tx, nb::dict& d) {
    const auto id = tx.source().encoder();
    d["encoder"] = id ? std::string(encoder_name(*id)) : std::string("auto");
  }
};

}  // namespace sparsesync::python
