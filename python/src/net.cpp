// sparsesync._core's host Publisher and Subscriber (endpoints.hpp over host memory) and the key files they load.
// Built where the TCP transport is (Boost.Asio and OpenSSL).
#include "net.hpp"
#include "host_place.hpp"

namespace sparsesync::python {

void bind_net(nb::module_& m) {
  m.attr("has_tcp") = true;
  m.def("generate_key_file", [](const std::string& path) { write_key_file(path, pre_shared_key::generate()); }, nb::arg("path"));
  bind_endpoints<host_place<tcp_wire>>(m, "Publisher", "Subscriber");
}

}  // namespace sparsesync::python
