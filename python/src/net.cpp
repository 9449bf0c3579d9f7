// sparsesync._core's host Publisher and Subscriber (endpoints.hpp over host memory) and the key files they load.
// Built where the TCP transport is (Boost.Asio and OpenSSL).
#include "net.hpp"
#include "endpoints.hpp"

namespace sparsesync::python {
namespace {

// Weights in host memory: the engine's host source and sink; no CUDA stream to order against.
class host_place {
 public:
  static constexpr placement where = placement::host;
  using sender_type = sync::sender<auto_encoder, fixed_bytes, asio_tcp_transport>;
  using receiver_type = sync::receiver<asio_tcp_transport>;

  host_place(const place_options& o, bool trainer) {
    if (o.device >= 0) throw error(errc::invalid_argument, "a host endpoint takes no CUDA device");
    if (trainer && o.snapshot != "device")
      throw error(errc::invalid_argument, "snapshot='" + o.snapshot + "' is for GPU publishers (a host publisher's snapshot is in host memory)");
    if (o.commit != "atomic") throw error(errc::invalid_argument, "commit='" + o.commit + "' is for GPU subscribers (host ones commit atomically)");
  }
  int device() const { return -1; }

  void emplace_sender(std::optional<sender_type>& tx, const model_layout& layout, const sync::sender_options& o, fixed_bytes policy) {
    tx.emplace(layout, o, policy);
  }
  void emplace_receiver(std::optional<receiver_type>& rx, const model_layout& layout, std::span<const tensor_view> weights, asio_tcp_transport t,
                        const sync::receiver_options& o) {
    rx.emplace(layout, weights, std::move(t), o);
  }
  asio_tcp_transport accept(asio_tcp_listener& l, ms timeout) { return l.accept(timeout); }
  asio_tcp_transport connect(asio_tcp_transport t) { return t; }
  void order_after(std::uintptr_t) {}
  void order_before(std::uintptr_t) {}
  void report_memory(const sender_type&, nb::dict&) {}
};

}  // namespace

void bind_net(nb::module_& m) {
  m.attr("has_tcp") = true;
  m.def("generate_key_file", [](const std::string& path) { write_key_file(path, pre_shared_key::generate()); }, nb::arg("path"));
  bind_endpoints<host_place>(m, "Publisher", "Subscriber");
}

}  // namespace sparsesync::python
