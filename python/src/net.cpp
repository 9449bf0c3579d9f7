// sparsesync._core's host Publisher and Subscriber: sync::sender / sync::receiver over the authenticated TCP
// transport (asio_tcp), for arrays in host memory. Built where the transport is (Boost.Asio and OpenSSL).
#include "net.hpp"
#include "views.hpp"

#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <chrono>
#include <optional>

namespace sparsesync::python {
namespace {

using ms = std::chrono::milliseconds;

ms to_ms(std::optional<double> seconds) { return seconds ? ms(static_cast<std::int64_t>(*seconds * 1000.0)) : no_timeout; }

asio_tcp_options tcp_options(const std::string& key_file, std::optional<double> receive_timeout) {
  asio_tcp_options o;
  o.key = load_key_file(key_file);
  o.receive_timeout = to_ms(receive_timeout);
  return o;
}

class publisher {
 public:
  publisher(const model_layout& layout, const std::string& host, std::uint16_t port, const std::string& key_file, const std::string& values,
            std::uint64_t bucket_bytes, double ack_timeout)
      : layout_(layout), listener_(host, port, tcp_options(key_file, std::nullopt)), tx_(layout, options(values, ack_timeout), fixed_bytes{bucket_bytes}) {}

  std::uint16_t port() const { return listener_.port(); }

  std::size_t accept(std::optional<double> timeout) {
    nb::gil_scoped_release unlocked;
    return tx_.add_receiver(listener_.accept(to_ms(timeout)));
  }

  bool wait_for_receivers(std::size_t n, double timeout) {
    nb::gil_scoped_release unlocked;
    return tx_.wait_for_receivers(n, to_ms(timeout));
  }

  nb::dict publish(std::uint64_t version, nb::handle tensors) {
    const auto weights = views_of<false>(layout_, tensors, "tensors");
    sync::publish_report r;
    {
      nb::gil_scoped_release unlocked;
      r = tx_.publish(version, weights.views);
    }
    nb::dict d;
    d["version"] = r.version;
    d["numel"] = r.numel;
    d["changed"] = r.changed;
    d["payload_bytes"] = r.payload_bytes;
    d["bits_per_changed"] = r.changed ? nb::cast(8.0 * static_cast<double>(r.payload_bytes) / static_cast<double>(r.changed)) : nb::none();
    d["target_checksum"] = r.target_checksum;
    d["encode_ms"] = r.encode_seconds * 1e3;
    d["ms"] = r.seconds * 1e3;
    d["acknowledged"] = r.acknowledged;
    d["lagging"] = r.lagging;
    d["receivers"] = receivers();
    return d;
  }

  nb::list receivers() const {
    nb::list out;
    for (const auto& s : tx_.receivers()) {
      nb::dict d;
      d["id"] = s.id;
      d["connected"] = s.connected;
      d["version"] = s.has_version ? nb::cast(s.version) : nb::none();
      d["bytes_sent"] = s.bytes_sent;
      d["full_transfers"] = s.full_transfers;
      d["last_error"] = s.last_error;
      out.append(d);
    }
    return out;
  }

  void close() {
    nb::gil_scoped_release unlocked;
    tx_.close();
  }

 private:
  static sync::sender_options options(const std::string& values, double ack_timeout) {
    sync::sender_options o;
    const auto mode = parse_value_mode(values);
    if (!mode) throw error(errc::invalid_argument, "values must be 'ulp' or 'absolute', not '" + values + "'");
    o.encode.mode = *mode;
    o.ack_timeout = to_ms(ack_timeout);
    return o;
  }

  model_layout layout_;
  asio_tcp_listener listener_;
  sync::sender<auto_encoder, fixed_bytes, asio_tcp_transport> tx_;
};

class subscriber {
 public:
  subscriber(const model_layout& layout, nb::handle tensors, const std::string& host, std::uint16_t port, const std::string& key_file,
             std::optional<double> receive_timeout, double connect_timeout)
      : weights_(views_of<true>(layout, tensors, "tensors")) {
    const auto opt = tcp_options(key_file, receive_timeout);
    nb::gil_scoped_release unlocked;
    // The publisher may still be starting: retry a refused connection every 100 ms until connect_timeout.
    const int attempts = static_cast<int>(connect_timeout * 10.0);
    rx_.emplace(layout, weights_.views, connect_retrying(host, port, opt, attempts < 1 ? 1 : attempts));
  }

  std::optional<nb::dict> next() {
    std::optional<sync::applied_version> v;
    {
      nb::gil_scoped_release unlocked;
      v = rx_->next();
    }
    if (!v) return std::nullopt;
    nb::dict d;
    d["version"] = v->version;
    d["base_version"] = v->base_version;
    d["full"] = v->full;
    d["changed"] = v->changed;
    d["payload_bytes"] = v->payload_bytes;
    d["bits_per_changed"] = v->changed ? nb::cast(8.0 * static_cast<double>(v->payload_bytes) / static_cast<double>(v->changed)) : nb::none();
    d["checksum"] = v->checksum;
    d["ms"] = v->seconds * 1e3;
    return d;
  }

  std::uint64_t version() const { return rx_->version(); }
  std::uint64_t sender_version() const { return rx_->sender_version(); }
  void close() { rx_->close(); }

 private:
  held_views<true> weights_;  // the worker's own arrays, referenced for as long as the receiver writes them
  std::optional<sync::receiver<asio_tcp_transport>> rx_;
};

}  // namespace

void bind_net(nb::module_& m) {
  m.attr("has_tcp") = true;
  m.def("generate_key_file", [](const std::string& path) { write_key_file(path, pre_shared_key::generate()); }, nb::arg("path"));
  nb::class_<publisher>(m, "Publisher")
      .def(nb::init<const model_layout&, const std::string&, std::uint16_t, const std::string&, const std::string&, std::uint64_t, double>(),
           nb::arg("layout"), nb::arg("host"), nb::arg("port"), nb::arg("key_file"), nb::arg("values"), nb::arg("bucket_bytes"),
           nb::arg("ack_timeout"))
      .def_prop_ro("port", &publisher::port)
      .def("accept", &publisher::accept, nb::arg("timeout").none())
      .def("wait_for_receivers", &publisher::wait_for_receivers, nb::arg("n"), nb::arg("timeout"))
      .def("publish", &publisher::publish, nb::arg("version"), nb::arg("tensors"))
      .def("receivers", &publisher::receivers)
      .def("close", &publisher::close);
  nb::class_<subscriber>(m, "Subscriber")
      .def(nb::init<const model_layout&, nb::handle, const std::string&, std::uint16_t, const std::string&, std::optional<double>, double>(),
           nb::arg("layout"), nb::arg("tensors"), nb::arg("host"), nb::arg("port"), nb::arg("key_file"), nb::arg("receive_timeout").none(),
           nb::arg("connect_timeout"))
      .def("next", &subscriber::next)
      .def_prop_ro("version", &subscriber::version)
      .def_prop_ro("sender_version", &subscriber::sender_version)
      .def("close", &subscriber::close);
}

}  // namespace sparsesync::python
