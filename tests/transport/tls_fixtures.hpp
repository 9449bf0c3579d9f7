// Throwaway PKI for the TLS tests, made with the OpenSSL C API: a CA, certificates it signs (server, client),
// and a second, unrelated CA for certificates that must be refused.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace sparsesync_test {

struct pki_entity {
  std::shared_ptr<EVP_PKEY> key;
  std::shared_ptr<X509> cert;
};

inline void check_ssl(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test PKI: ") + what + " failed");
}

inline void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  check_ssl(ext != nullptr, "X509V3_EXT_conf_nid");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// An EC P-256 key and a certificate for `cn`, signed by `issuer` (self-signed when null).
inline pki_entity make_entity(const std::string& cn, const pki_entity* issuer, bool is_ca, const char* san = nullptr) {
  pki_entity e;
  e.key.reset(EVP_EC_gen("P-256"), EVP_PKEY_free);
  check_ssl(e.key != nullptr, "EVP_EC_gen");
  e.cert.reset(X509_new(), X509_free);
  X509* c = e.cert.get();
  X509_set_version(c, 2);
  static long serial = 1;
  ASN1_INTEGER_set(X509_get_serialNumber(c), serial++);
  X509_gmtime_adj(X509_getm_notBefore(c), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c), 86400);
  X509_set_pubkey(c, e.key.get());
  X509_NAME* name = X509_get_subject_name(c);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* issuer_cert = issuer ? issuer->cert.get() : c;
  X509_set_issuer_name(c, X509_get_subject_name(issuer_cert));
  add_ext(c, issuer_cert, NID_basic_constraints, is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  add_ext(c, issuer_cert, NID_key_usage, is_ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
  add_ext(c, issuer_cert, NID_subject_key_identifier, "hash");
  if (issuer) add_ext(c, issuer_cert, NID_authority_key_identifier, "keyid");
  if (!is_ca) add_ext(c, issuer_cert, NID_ext_key_usage, "serverAuth,clientAuth");
  if (san) add_ext(c, issuer_cert, NID_subject_alt_name, san);
  check_ssl(X509_sign(c, issuer ? issuer->key.get() : e.key.get(), EVP_sha256()) > 0, "X509_sign");
  return e;
}

inline void write_pem(const pki_entity& e, const std::filesystem::path& cert_path, const std::filesystem::path& key_path) {
  FILE* f = std::fopen(cert_path.c_str(), "wb");
  check_ssl(f && PEM_write_X509(f, e.cert.get()) == 1, "PEM_write_X509");
  std::fclose(f);
  if (key_path.empty()) return;
  f = std::fopen(key_path.c_str(), "wb");
  check_ssl(f && PEM_write_PrivateKey(f, e.key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1, "PEM_write_PrivateKey");
  std::fclose(f);
}

// Files under `dir`: ca.pem, server.{pem,key}, client.{pem,key}, rogue-ca.pem, rogue-client.{pem,key}.
inline void make_test_pki(const std::filesystem::path& dir) {
  const auto ca = make_entity("sparsesync test CA", nullptr, true);
  const auto server = make_entity("localhost", &ca, false, "DNS:localhost,IP:127.0.0.1");
  const auto client = make_entity("sparsesync test client", &ca, false);
  const auto rogue_ca = make_entity("rogue CA", nullptr, true);
  const auto rogue_client = make_entity("rogue client", &rogue_ca, false);
  write_pem(ca, dir / "ca.pem", {});
  write_pem(server, dir / "server.pem", dir / "server.key");
  write_pem(client, dir / "client.pem", dir / "client.key");
  write_pem(rogue_ca, dir / "rogue-ca.pem", {});
  write_pem(rogue_client, dir / "rogue-client.pem", dir / "rogue-client.key");
}

}  // namespace sparsesync_test
