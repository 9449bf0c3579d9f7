// sparsesync._core's UCX endpoints: the same engine and places as over TCP (host_place, cuda_place with
// host-memory frames), on the UCX transport with the same key handshake. UCX picks the fabric (InfiniBand,
// RoCE, shared memory, TCP; UCX_TLS narrows it). TLS is a TCP feature: UCX endpoints authenticate with the key.
#include "ucx.hpp"
#include "host_place.hpp"
#ifdef SPARSESYNC_PYTHON_CUDA
#include "cuda_place.hpp"
#endif

#include <sparsesync/transport/ucx.hpp>

#include <chrono>
#include <memory>
#include <thread>

namespace sparsesync::python {
namespace {

struct ucx_wire {
  using transport = ucx_transport;
  using listener = ucx_listener;

  // One per process: creating a UCX context scans the devices.
  static std::shared_ptr<ucx_context> context() {
    static const auto c = ucx_context::create();
    return c;
  }
  static ucx_options options(const auth_options& a) {
    if (a.tls) throw error(errc::invalid_argument, "tls is for transport='tcp': UCX endpoints authenticate with the key file");
    if (!a.key_file) throw error(errc::invalid_argument, "transport='ucx' needs key_file (generate_key_file)");
    ucx_options o;
    o.key = load_key_file(*a.key_file);
    o.receive_timeout = to_ms(a.receive_timeout);
    return o;
  }
  static listener listen(const std::string& host, std::uint16_t port, const auth_options& a) { return listener(context(), host, port, options(a)); }
  static transport accept(listener& l, ms timeout) { return l.accept(timeout); }
  // The publisher may still be starting: a refused connection is retried every 100 ms until connect_timeout.
  static transport dial(const std::string& host, std::uint16_t port, const auth_options& a, double connect_timeout) {
    const auto o = options(a);
    const auto deadline = std::chrono::steady_clock::now() + ms(static_cast<std::int64_t>(connect_timeout * 1000.0));
    for (;;) {
      try {
        return ucx_transport::connect(context(), host, port, o);
      } catch (const transport_error& e) {
        if (e.transport_code() != transport_errc::connect_failed || std::chrono::steady_clock::now() >= deadline) throw;
        std::this_thread::sleep_for(ms(100));
      }
    }
  }
};

}  // namespace

void bind_ucx(nb::module_& m) {
  m.attr("has_ucx") = true;
  bind_endpoints<host_place<ucx_wire>>(m, "UcxPublisher", "UcxSubscriber");
#ifdef SPARSESYNC_PYTHON_CUDA
  bind_endpoints<cuda_place<host_frames<ucx_wire>>>(m, "UcxCudaPublisher", "UcxCudaSubscriber");
#endif
}

}  // namespace sparsesync::python
