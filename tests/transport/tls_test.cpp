#include "test_support.hpp"
#include "tls_fixtures.hpp"

#include <sparsesync/transport/asio_tcp.hpp>

#include <doctest/doctest.h>

#include <openssl/ssl.h>

#include <thread>

using namespace sparsesync;
using namespace std::chrono_literals;
using sparsesync_test::error_of;
using sparsesync_test::payload;

namespace {

struct pki {
  sparsesync_test::temp_dir dir;
  pki() { sparsesync_test::make_test_pki(dir.path); }

  tls_options side(const std::string& who, const std::string& ca = "ca.pem") const {
    return {dir / ca, dir / (who + ".pem"), dir / (who + ".key"), {}};
  }
};

asio_tcp_options with_tls(tls_options tls, std::optional<pre_shared_key> key) {
  asio_tcp_options o;
  o.key = std::move(key);
  o.tls = std::move(tls);
  o.connect_timeout = 5s;
  o.handshake_timeout = 5s;
  o.receive_timeout = 30s;
  o.stall_timeout = 30s;
  return o;
}

struct server_result {
  transport_errc error = transport_errc::ok;
  std::string message;
};

// Accepts one peer; echoes until it closes. Reports the accept/handshake error, if any.
std::thread serve_once(asio_tcp_listener& l, server_result& r) {
  return std::thread([&l, &r] {
    r.error = error_of([&] {
      auto t = l.accept(10s);
      std::vector<std::byte> f;
      while (t.receive(f)) t.send(f);
      t.close();
    }, &r.message);
  });
}

}  // namespace

TEST_CASE("tls: mutual certificates plus the pre-shared key carry frames byte-identical") {
  pki p;
  const auto key = pre_shared_key::generate();
  asio_tcp_listener l("127.0.0.1", 0, with_tls(p.side("server"), key));
  server_result sr;
  auto server = serve_once(l, sr);
  auto client_tls = p.side("client");
  client_tls.server_name = "localhost";
  auto t = asio_tcp_transport::connect("127.0.0.1", l.port(), with_tls(client_tls, key));
  CHECK(t.encrypted());
  CHECK(t.authenticated());
  CHECK(t.peer().rfind("tls ", 0) == 0);
  const auto& sizes = sparsesync_test::varied_sizes();
  std::thread sender([&] {
    for (std::size_t i = 0; i < sizes.size(); ++i) t.send(payload(i, sizes[i]));
    t.close();
  });
  std::vector<std::byte> f;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    REQUIRE(t.receive(f));
    CHECK(f == payload(i, sizes[i]));
  }
  CHECK_FALSE(t.receive(f));
  sender.join();
  server.join();
  CHECK(sr.error == transport_errc::ok);
}

TEST_CASE("tls: mutual TLS alone (no pre-shared key) is accepted as authentication") {
  pki p;
  asio_tcp_listener l("127.0.0.1", 0, with_tls(p.side("server"), std::nullopt));
  server_result sr;
  auto server = serve_once(l, sr);
  auto t = asio_tcp_transport::connect("127.0.0.1", l.port(), with_tls(p.side("client"), std::nullopt));
  CHECK(t.encrypted());
  CHECK_FALSE(t.authenticated());  // no frame MACs: TLS protects the frames
  t.send(payload(7, 5000));
  std::vector<std::byte> f;
  REQUIRE(t.receive(f));
  CHECK(f == payload(7, 5000));
  t.close();
  CHECK_FALSE(t.receive(f));
  server.join();
  CHECK(sr.error == transport_errc::ok);
}

TEST_CASE("tls: a client without a certificate is refused") {
  pki p;
  asio_tcp_listener l("127.0.0.1", 0, with_tls(p.side("server"), pre_shared_key::generate()));
  server_result sr;
  auto server = serve_once(l, sr);
  // A bare OpenSSL client that trusts the server's CA but presents no certificate.
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), &SSL_CTX_free);
  REQUIRE(SSL_CTX_load_verify_locations(ctx.get(), (p.dir / "ca.pem").c_str(), nullptr) == 1);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  sparsesync_test::raw_socket raw(l.port());
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), &SSL_free);
  SSL_set_fd(ssl.get(), raw.fd());
  const int connected = SSL_connect(ssl.get());
  char buf[80];
  int got = -1;
  if (connected == 1) {
    // TLS 1.3 clients finish before the server has judged their certificate; the refusal arrives as an alert.
    const char hello[48] = {'S', 'S', 'Y', 'N', 'C', 'C', 'H', '1', 1, 0, 1, 0};
    SSL_write(ssl.get(), hello, sizeof hello);
    got = SSL_read(ssl.get(), buf, sizeof buf);
  }
  CHECK(got <= 0);
  server.join();
  CHECK(sr.error == transport_errc::tls);
  CHECK(sr.message.find("certificate") != std::string::npos);
}

TEST_CASE("tls: certificates from another CA, and a wrong server name, are refused") {
  pki p;
  const auto key = pre_shared_key::generate();
  SUBCASE("client certificate signed by a rogue CA") {
    asio_tcp_listener l("127.0.0.1", 0, with_tls(p.side("server"), key));
    server_result sr;
    auto server = serve_once(l, sr);
    auto rogue = p.side("rogue-client");  // trusts the right CA, presents the wrong chain
    const auto client_err = error_of([&] {
      auto t = asio_tcp_transport::connect("127.0.0.1", l.port(), with_tls(rogue, key));
      std::vector<std::byte> f;
      t.receive(f);
    });
    server.join();
    CHECK(sr.error == transport_errc::tls);
    CHECK(client_err != transport_errc::ok);
  }
  SUBCASE("client that trusts another CA refuses the server") {
    asio_tcp_listener l("127.0.0.1", 0, with_tls(p.side("server"), key));
    server_result sr;
    auto server = serve_once(l, sr);
    std::string msg;
    const auto client_err =
        error_of([&] { asio_tcp_transport::connect("127.0.0.1", l.port(), with_tls(p.side("client", "rogue-ca.pem"), key)); }, &msg);
    server.join();
    CHECK(client_err == transport_errc::tls);
    CHECK(msg.find("certificate") != std::string::npos);
    CHECK(sr.error != transport_errc::ok);
  }
  SUBCASE("server certificate without the expected name") {
    asio_tcp_listener l("127.0.0.1", 0, with_tls(p.side("server"), key));
    server_result sr;
    auto server = serve_once(l, sr);
    auto c = p.side("client");
    c.server_name = "trainer.example";
    CHECK(error_of([&] { asio_tcp_transport::connect("127.0.0.1", l.port(), with_tls(c, key)); }) == transport_errc::tls);
    server.join();
    CHECK(sr.error != transport_errc::ok);
  }
  SUBCASE("plain client against a TLS server") {
    asio_tcp_listener l("127.0.0.1", 0, with_tls(p.side("server"), key));
    server_result sr;
    auto server = serve_once(l, sr);
    asio_tcp_options plain;
    plain.key = key;
    plain.handshake_timeout = 5s;
    CHECK(error_of([&] { asio_tcp_transport::connect("127.0.0.1", l.port(), plain); }) != transport_errc::ok);
    server.join();
    CHECK(sr.error == transport_errc::tls);
  }
  SUBCASE("missing certificate files are reported by path") {
    auto bad = p.side("server");
    bad.cert_file = p.dir / "nope.pem";
    std::string msg;
    CHECK(error_of([&] { asio_tcp_listener("127.0.0.1", 0, with_tls(bad, key)); }, &msg) == transport_errc::tls);
    CHECK(msg.find("nope.pem") != std::string::npos);
  }
}
