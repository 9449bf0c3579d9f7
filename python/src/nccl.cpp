// sparsesync._core's NCCL Publisher and Subscriber: cuda_place.hpp with frames GPU to GPU. The protocol and the
// NCCL bootstrap travel on the TCP connection (authenticated by the key); each trainer-worker pair gets an NCCL
// communicator of its own (nccl_link), so a dead worker stalls no one else. NCCL itself comes from the process:
// torch's where torch is loaded (nccl_loader.cpp), never a second copy.
#include "nccl.hpp"
#include "cuda_place.hpp"
#include "nccl_loader.hpp"

#include <sparsesync/transport/nccl_link.hpp>

namespace sparsesync::python {
namespace {

struct nccl_frames {
  using wire = tcp_wire;
  using link = nccl_link<asio_tcp_transport>;
  // Over NVLink bytes barely count and delta_varint encodes and verifies fastest: 22.6 ms per 7B version against
  // rice's 29.4 (bench/results/engine-nccl/h100x2-7b.md).
  using encoder = delta_varint;
  static constexpr bool frames_on_device = true;  // frames stay on the trainer's GPU until NCCL sends them
  static nccl_link_options on(int device) {
    nccl_link_options o;
    o.device = device;
    return o;
  }
  static link accept(tcp_wire::listener& l, ms timeout, int device) {
    (void)load_nccl();  // a missing NCCL is reported before a worker is kept waiting
    return link::connect_sender(l.accept(timeout), on(device));
  }
  static link connect(asio_tcp_transport t, int device) {
    (void)load_nccl();
    return link::connect_receiver(std::move(t), on(device));
  }
};

}  // namespace

void bind_nccl(nb::module_& m) {
  m.attr("has_nccl") = true;
  m.def("nccl_library", [] {
    const auto& lib = load_nccl();
    nb::dict d;
    d["version"] = lib.version;
    d["path"] = lib.path;
    return d;
  });
  bind_endpoints<cuda_place<nccl_frames>>(m, "NcclPublisher", "NcclSubscriber");
}

}  // namespace sparsesync::python
