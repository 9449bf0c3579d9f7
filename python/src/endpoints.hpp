// Publisher and Subscriber for Python: the one sync engine (sync::sender / sync::receiver) over an authenticated
// wire (TCP here, UCX in ucx.cpp), for arrays in host memory (net.cpp) or on a GPU (gpu.cpp), the GPU's frames
// through host memory or GPU to GPU over NCCL (nccl.cpp). `Place` says where the weights live and how frames
// travel: its `wire`, which sender, receiver and link that takes, how their backends are made, how a connection
// becomes the link (accept, connect), and how the engine's work is ordered against the caller's CUDA stream.
#pragma once

#include "diff_options.hpp"
#include "views.hpp"

#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/asio_tcp.hpp>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

namespace sparsesync::python {

using ms = std::chrono::milliseconds;

inline ms to_ms(std::optional<double> seconds) { return seconds ? ms(static_cast<std::int64_t>(*seconds * 1000.0)) : no_timeout; }

// Mutual TLS as Python passes it: (ca_file, cert_file, key_file, server_name).
using tls_files = std::tuple<std::string, std::string, std::string, std::string>;

// How a Python endpoint authenticates: a key file, mutual TLS, or both (each an independent check).
struct auth_options {
  std::optional<std::string> key_file;
  std::optional<tls_files> tls;
  std::optional<double> receive_timeout;  // None: wait for the next version for ever
};

inline asio_tcp_options tcp_options(const auth_options& a) {
  asio_tcp_options o;
  if (a.key_file) o.key = load_key_file(*a.key_file);
  if (a.tls) {
    const auto& [ca, cert, key, name] = *a.tls;
    o.tls = tls_options{ca, cert, key, name};
  }
  o.receive_timeout = to_ms(a.receive_timeout);
  return o;
}

// A wire: how endpoints reach each other (the connection that carries the protocol, and host-memory frames).
// TCP here; UCX in ucx.cpp.
struct tcp_wire {
  using transport = asio_tcp_transport;
  using listener = asio_tcp_listener;
  static listener listen(const std::string& host, std::uint16_t port, const auth_options& a) { return listener(host, port, tcp_options(a)); }
  static transport accept(listener& l, ms timeout) { return l.accept(timeout); }
  // The publisher may still be starting: a refused connection is retried every 100 ms until connect_timeout.
  static transport dial(const std::string& host, std::uint16_t port, const auth_options& a, double connect_timeout) {
    const int attempts = static_cast<int>(connect_timeout * 10.0);
    return connect_retrying(host, port, tcp_options(a), attempts < 1 ? 1 : attempts);
  }
};

inline nb::object bits_per_changed(std::uint64_t payload_bytes, std::uint64_t changed) {
  return changed ? nb::cast(8.0 * static_cast<double>(payload_bytes) / static_cast<double>(changed)) : nb::none();
}

// Options that only a GPU placement reads; a host one refuses anything but the defaults.
struct place_options {
  int device = -1;                   // CUDA device (-1: the current one)
  std::string snapshot = "device";   // the trainer's snapshot: "device" or "host_pinned"
  std::string commit = "atomic";     // the worker's commit: "atomic" or "streamed"
  std::string encoder = "auto";      // the publisher's encoder: "auto" (the place's choice) or an encoder_table name
};

template <class Place>
class publisher {
 public:
  using sender_type = typename Place::sender_type;

  publisher(const model_layout& layout, const std::string& host, std::uint16_t port, const auth_options& auth, const std::string& values,
            std::uint64_t bucket_bytes, double ack_timeout, const link_cost& link, const place_options& where)
      : layout_(layout), place_(where, /*trainer=*/true), listener_(Place::wire::listen(host, port, auth)) {
    if (bucket_bytes == 0) throw error(errc::invalid_argument, "bucket_bytes must be positive");
    place_.emplace_sender(tx_, layout_, options(values, ack_timeout, link), fixed_bytes{bucket_bytes}, where.encoder);
  }

  std::uint16_t port() const { return listener_.port(); }
  int device() const { return place_.device(); }

  std::size_t accept(std::optional<double> timeout) {
    nb::gil_scoped_release unlocked;
    return tx_->add_receiver(place_.accept(listener_, to_ms(timeout)));
  }

  bool wait_for_receivers(std::size_t n, double timeout) {
    nb::gil_scoped_release unlocked;
    return tx_->wait_for_receivers(n, to_ms(timeout));
  }

  // `stream`: the CUDA stream whose work produced the weights (GPU placement; 0 is the legacy default stream).
  // `tensors` None publishes the arrays imported by the previous call again: importing a 7B model's 339 torch
  // tensors costs about a millisecond, and an RL loop publishes the same parameters every step. The Python layer
  // (_reuse.py) passes None only when every tensor has the data pointer, dtype, shape and strides of the one
  // imported at its place, and keeps the last published tensors alive meanwhile.
  nb::dict publish(std::uint64_t version, nb::handle tensors, std::uintptr_t stream) {
    if (!tensors.is_none())
      last_ = views_of<false, Place::where>(layout_, tensors, "tensors", place_.device());
    else if (!last_)
      throw error(errc::invalid_argument, "tensors: None reuses the previous publish's tensors, and there was none");
    sync::publish_report r;
    {
      nb::gil_scoped_release unlocked;
      place_.order_after(stream);
      r = tx_->publish(version, last_->views);
    }
    nb::dict d;
    d["version"] = r.version;
    d["numel"] = r.numel;
    d["changed"] = r.changed;
    d["payload_bytes"] = r.payload_bytes;
    d["bits_per_changed"] = bits_per_changed(r.payload_bytes, r.changed);
    d["target_checksum"] = r.target_checksum;
    d["encode_ms"] = r.encode_seconds * 1e3;
    d["snapshot_ms"] = r.snapshot_seconds * 1e3;
    d["ms"] = r.seconds * 1e3;
    d["acknowledged"] = r.acknowledged;
    d["lagging"] = r.lagging;
    d["receivers"] = receivers();
    place_.report_source(*tx_, d);
    return d;
  }

  nb::list receivers() const {
    nb::list out;
    for (const auto& s : tx_->receivers()) {
      nb::dict d;
      d["id"] = s.id;
      d["connected"] = s.connected;
      d["version"] = s.has_version ? nb::cast(s.version) : nb::none();
      d["bytes_sent"] = s.bytes_sent;
      d["full_transfers"] = s.full_transfers;
      d["lagging"] = s.lagging;
      d["last_error"] = s.last_error;
      out.append(d);
    }
    return out;
  }

  void close() {
    last_.reset();
    nb::gil_scoped_release unlocked;
    tx_->close();
  }

 private:
  static sync::sender_options options(const std::string& values, double ack_timeout, const link_cost& link) {
    sync::sender_options o;
    o.encode.link = link;
    const auto mode = parse_value_mode(values);
    if (!mode) throw error(errc::invalid_argument, "values must be 'ulp' or 'absolute', not '" + values + "'");
    o.encode.mode = *mode;
    o.ack_timeout = to_ms(ack_timeout);
    return o;
  }

  model_layout layout_;
  Place place_;  // before the sender: its backends and stream outlive it
  typename Place::wire::listener listener_;
  std::optional<sender_type> tx_;
  // The last publish's arrays, referenced until the next publish or close (their memory is not freed meanwhile).
  std::optional<held_views<false, Place::where>> last_;
};

template <class Place>
class subscriber {
 public:
  using receiver_type = typename Place::receiver_type;

  subscriber(const model_layout& layout, nb::handle tensors, const std::string& host, std::uint16_t port, const auth_options& auth,
             double connect_timeout, std::optional<std::uint64_t> held_version, const place_options& where)
      : weights_(views_of<true, Place::where>(layout, tensors, "tensors", where.device)), place_(with_device(where, weights_.device), false) {
    sync::receiver_options ro;
    ro.has_version = held_version.has_value();
    ro.version = held_version.value_or(0);
    nb::gil_scoped_release unlocked;
    place_.emplace_receiver(rx_, layout, weights_.views, place_.connect(Place::wire::dial(host, port, auth, connect_timeout)), ro);
  }

  // `stream`: the CUDA stream that will read the weights next (GPU placement): it is ordered after the apply.
  std::optional<nb::dict> next(std::uintptr_t stream) {
    std::optional<sync::applied_version> v;
    {
      nb::gil_scoped_release unlocked;
      v = rx_->next();
      if (v) place_.order_before(stream);
    }
    if (!v) return std::nullopt;
    nb::dict d;
    d["version"] = v->version;
    d["base_version"] = v->base_version;
    d["full"] = v->full;
    d["changed"] = v->changed;
    d["payload_bytes"] = v->payload_bytes;
    d["bits_per_changed"] = bits_per_changed(v->payload_bytes, v->changed);
    d["checksum"] = v->checksum;
    d["ms"] = v->seconds * 1e3;
    return d;
  }

  std::uint64_t version() const { return rx_->version(); }
  std::uint64_t sender_version() const { return rx_->sender_version(); }
  int device() const { return place_.device(); }
  void close() { rx_->close(); }

 private:
  static place_options with_device(place_options o, int device) {
    o.device = device;
    return o;
  }

  held_views<true, Place::where> weights_;  // the worker's own arrays, referenced for as long as the receiver writes them
  Place place_;
  std::optional<receiver_type> rx_;
};

template <class Place>
void bind_endpoints(nb::module_& m, const char* publisher_name, const char* subscriber_name) {
  using pub = publisher<Place>;
  using sub = subscriber<Place>;
  const auto where = [](int device, const std::string& snapshot, const std::string& commit, const std::string& encoder = "auto") {
    return place_options{device, snapshot, commit, encoder};
  };
  nb::class_<pub>(m, publisher_name)
      .def("__init__",
           [where](pub* self, const model_layout& layout, const std::string& host, std::uint16_t port, const std::optional<std::string>& key_file,
                   const std::optional<tls_files>& tls, const std::string& values, std::uint64_t bucket_bytes, double ack_timeout, int device,
                   const std::string& snapshot, double link_gbps, const std::string& receivers, const std::string& encoder) {
             new (self) pub(layout, host, port, auth_options{key_file, tls, std::nullopt}, values, bucket_bytes, ack_timeout,
                            link_options(link_gbps, receivers), where(device, snapshot, "atomic", encoder));
           },
           nb::arg("layout"), nb::arg("host"), nb::arg("port"), nb::arg("key_file").none(), nb::arg("tls").none(), nb::arg("values"),
           nb::arg("bucket_bytes"), nb::arg("ack_timeout"), nb::arg("device"), nb::arg("snapshot"), nb::arg("link_gbps"), nb::arg("receivers"),
           nb::arg("encoder"))
      .def_prop_ro("port", &pub::port)
      .def_prop_ro("device", &pub::device)
      .def("accept", &pub::accept, nb::arg("timeout").none())
      .def("wait_for_receivers", &pub::wait_for_receivers, nb::arg("n"), nb::arg("timeout"))
      .def("publish", &pub::publish, nb::arg("version"), nb::arg("tensors").none(), nb::arg("stream"))
      .def("receivers", &pub::receivers)
      .def("close", &pub::close);
  nb::class_<sub>(m, subscriber_name)
      .def("__init__",
           [where](sub* self, const model_layout& layout, nb::handle tensors, const std::string& host, std::uint16_t port,
                   const std::optional<std::string>& key_file, const std::optional<tls_files>& tls, std::optional<double> receive_timeout,
                   double connect_timeout, std::optional<std::uint64_t> held_version, int device, const std::string& commit) {
             new (self) sub(layout, tensors, host, port, auth_options{key_file, tls, receive_timeout}, connect_timeout, held_version,
                            where(device, "device", commit));
           },
           nb::arg("layout"), nb::arg("tensors"), nb::arg("host"), nb::arg("port"), nb::arg("key_file").none(), nb::arg("tls").none(),
           nb::arg("receive_timeout").none(), nb::arg("connect_timeout"), nb::arg("held_version").none(), nb::arg("device"), nb::arg("commit"))
      .def("next", &sub::next, nb::arg("stream"))
      .def_prop_ro("version", &sub::version)
      .def_prop_ro("sender_version", &sub::sender_version)
      .def_prop_ro("device", &sub::device)
      .def("close", &sub::close);
}

}  // namespace sparsesync::python
