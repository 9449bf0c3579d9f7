// `sparsesync serve` and `sparsesync pull` as separate processes on 127.0.0.1: a watched directory that
// receives generated checkpoints (written under a temporary name and renamed), pulls that must produce the
// newest file byte for byte, catch-up by patches, --follow with its JSON lines, refusals of wrong keys, an
// edited OUT, and a change of layout; mutual TLS (with and without the key) and refusals of certificates.
// Every wait is bounded.
#include "cli_net_support.hpp"

using namespace net_test;
using namespace std::chrono_literals;
namespace ss = sparsesync;

TEST_CASE("pull: the newest version byte for byte, nothing to do when up to date, catch-up of an old OUT by patches") {
  temp_dir t;
  const auto key = make_key(t / "key");
  server s(t.path, key);
  trainer tr;
  // Names that are never checkpoints: hidden, temporary, other extensions.
  ss::tools::write_file_atomic(s.watch() / ".hidden.safetensors", [](auto& sink) { sink.write("x", 1); });
  ss::tools::write_file_atomic(s.watch() / "x.safetensors.tmp", [](auto& sink) { sink.write("x", 1); });
  ss::tools::write_file_atomic(s.watch() / "notes.txt", [](auto& sink) { sink.write("x", 1); });
  tr.drop(s.watch(), "step-1.safetensors");
  const auto v2 = tr.drop(s.watch(), "step-2.safetensors");
  s.wait_published(2);

  fs::create_directories(t / "a");
  const auto out = t / "a" / "model.safetensors";
  auto r = pull(t, s, out, key);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(same_file(out, v2));
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["version"] == 2);
  CHECK(lines[0]["full"] == true);
  CHECK(lines[0]["payload_bytes"].get<std::uint64_t>() > 0);
  CHECK(lines[0]["seconds"].get<double>() >= 0);
  CHECK(fs::exists(out.string() + ".sparsesync.json"));
  CHECK(entries(t / "a") == std::vector<std::string>{"model.safetensors", "model.safetensors.sparsesync.json"});

  r = pull(t, s, out, key);  // up to date: no version moves, OUT untouched
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(json_lines(r.out).empty());
  CHECK(same_file(out, v2));

  // step-10 must come after step-9 (name order compares numbers), both after step-2.
  const auto v3 = tr.drop(s.watch(), "step-9.safetensors");
  const auto v4 = tr.drop(s.watch(), "step-10.safetensors");
  s.wait_published(4);
  CHECK(s.log().find("version 3 <- step-9.safetensors") != std::string::npos);
  CHECK(s.log().find("version 4 <- step-10.safetensors") != std::string::npos);
  CHECK(s.log().find("version 5") == std::string::npos);  // the decoys were never published

  r = pull(t, s, out, key);  // OUT at version 2: versions 3 and 4 as patches
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  lines = json_lines(r.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["version"] == 3);
  CHECK(lines[1]["version"] == 4);
  CHECK(lines[0]["full"] == false);
  CHECK(lines[1]["full"] == false);
  CHECK(lines[1]["base_version"] == 3);
  CHECK(same_file(out, v4));
  (void)v3;

  // A puller with nothing gets one full transfer of the newest version.
  const auto fresh = t / "fresh.safetensors";
  check_one_version(pull(t, s, fresh, key), fresh, v4, true);
}

TEST_CASE("pull: an OUT edited since the last pull gets a full transfer, never a wrong file") {
  temp_dir t;
  const auto key = make_key(t / "key");
  server s(t.path, key);
  trainer tr;
  tr.drop(s.watch(), "step-1.safetensors");
  s.wait_published(1);
  const auto out = t / "out.safetensors";
  REQUIRE(pull(t, s, out, key).rc == 0);
  const auto v2 = tr.drop(s.watch(), "step-2.safetensors");
  s.wait_published(2);
  {  // flip a bit in the last tensor byte: OUT no longer is version 1
    std::fstream f(out, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 1));
  }
  check_one_version(pull(t, s, out, key), out, v2, true);
}

TEST_CASE("pull: a wrong key or no key is refused with exit 8 and nothing written") {
  temp_dir t;
  const auto key = make_key(t / "key");
  const auto other = make_key(t / "other-key");
  server s(t.path, key);
  trainer tr;
  tr.drop(s.watch(), "step-1.safetensors");
  s.wait_published(1);
  fs::create_directories(t / "out");
  const auto out = t / "out" / "model.safetensors";

  auto r = pull(t, s, out, other);
  CHECK(r.rc == 8);
  CHECK(r.err.find("authentication failed") != std::string::npos);
  r = run({SPARSESYNC_CLI_PATH, "pull", s.address(), "-o", out.string(), "--insecure-no-auth", "--timeout", "20"}, t.path, 60s);
  CHECK(r.rc == 8);
  CHECK(entries(t / "out").empty());  // no OUT, no sidecar, no temporary file

  r = run({SPARSESYNC_CLI_PATH, "pull", s.address(), "-o", out.string()}, t.path, 60s);  // no authentication configured
  CHECK(r.rc == 1);
  CHECK(s.log().find("refused a connection") != std::string::npos);
}

TEST_CASE("pull --follow: one JSON line per version, through a change of layout, until SIGTERM") {
  temp_dir t;
  const auto key = make_key(t / "key");
  server s(t.path, key);
  trainer tr;
  tr.drop(s.watch(), "step-1.safetensors");
  s.wait_published(1);

  const auto out = t / "follow.safetensors";
  process follower({SPARSESYNC_CLI_PATH, "pull", s.address(), "-o", out.string(), "--key-file", key.string(), "--follow"}, t / "follow.out",
                   t / "follow.err");
  auto lines_seen = [&](std::size_t n) { return wait_until([&] { return json_lines(follower.out()).size() >= n; }, 60s); };
  REQUIRE_MESSAGE(lines_seen(1), follower.err());
  tr.drop(s.watch(), "step-2.safetensors");
  REQUIRE_MESSAGE(lines_seen(2), follower.err());
  const auto v3 = tr.drop(s.watch(), "step-3.safetensors");
  REQUIRE_MESSAGE(lines_seen(3), follower.err());
  CHECK(same_file(out, v3));

  // A checkpoint of another model: serve starts over with the new layout, the follower reconnects and
  // receives it in full.
  trainer bigger(3);
  const auto v4 = bigger.drop(s.watch(), "step-4.safetensors");
  REQUIRE_MESSAGE(lines_seen(4), follower.err() << "\n" << s.log());
  CHECK(same_file(out, v4));

  follower.signal(SIGTERM);
  REQUIRE(follower.wait(30s) == std::optional<int>(0));
  const auto lines = json_lines(follower.out());
  REQUIRE(lines.size() == 4);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    CHECK(lines[i]["version"] == i + 1);
    CHECK(lines[i].contains("payload_bytes"));
    CHECK(lines[i].contains("seconds"));
  }
  CHECK(lines[0]["full"] == true);
  CHECK(lines[1]["full"] == false);
  CHECK(lines[2]["full"] == false);
  CHECK(lines[3]["full"] == true);
  CHECK(lines[1]["payload_bytes"].get<std::uint64_t>() < lines[0]["payload_bytes"].get<std::uint64_t>() / 5);
}

TEST_CASE("serve --link-gbps: auto weighs entropy in for a slow link; pull rebuilds each version byte for byte") {
  temp_dir t;
  const auto key = make_key(t / "key");
  server s(t.path, key, {"--link-gbps", "0.1"});
  trainer tr;
  const auto v1 = tr.drop(s.watch(), "step-1.safetensors");
  s.wait_published(1);
  const auto out = t / "out.safetensors";
  check_one_version(pull(t, s, out, key), out, v1, true);
  const auto v2 = tr.drop(s.watch(), "step-2.safetensors");
  s.wait_published(2);
  check_one_version(pull(t, s, out, key), out, v2, false);
}

TEST_CASE("pull over mutual TLS plus the pre-shared key: OUT byte for byte, then the next version as a patch") {
  temp_dir t;
  const auto key = make_key(t / "key");
  const test_pki pki(t / "pki");
  server s(t.path, key, pki.args("server"));
  trainer tr;
  const auto v1 = tr.drop(s.watch(), "step-1.safetensors");
  s.wait_published(1);
  CHECK(s.log().find(", mutual TLS)") != std::string::npos);

  const auto out = t / "out.safetensors";
  auto r = pull(t, s, out, key, pki.args("client"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.err.find("(TLS)") != std::string::npos);  // pull's "connected to ... (TLS)": the link is encrypted
  CHECK(same_file(out, v1));

  const auto v2 = tr.drop(s.watch(), "step-2.safetensors");
  s.wait_published(2);
  check_one_version(pull(t, s, out, key, pki.args("client")), out, v2, false);
}

TEST_CASE("pull over TLS: a client certificate from another CA, an untrusted server or a wrong server name is refused, OUT untouched") {
  temp_dir t;
  const auto key = make_key(t / "key");
  const test_pki pki(t / "pki");
  server s(t.path, key, pki.args("server"));
  trainer tr;
  tr.drop(s.watch(), "step-1.safetensors");
  s.wait_published(1);
  const auto out = t / "out.safetensors";
  REQUIRE(pull(t, s, out, key, pki.args("client")).rc == 0);
  const auto v2 = tr.drop(s.watch(), "step-2.safetensors");
  s.wait_published(2);
  const auto held = slurp(out);  // version 1: a refused pull must leave it as it is
  const auto sidecar = slurp(out.string() + ".sparsesync.json");

  auto refused = [&](const std::vector<std::string>& tls, const std::string& why) {
    const auto r = pull(t, s, out, key, tls);
    CHECK_MESSAGE(r.rc == 8, why << ": exit " << r.rc << "\n" << r.err);  // 8: authentication failed
    CHECK_MESSAGE(r.err.find("TLS error") != std::string::npos, why << ": " << r.err);  // not the key's "authentication failed"
    CHECK(slurp(out) == held);
    CHECK(slurp(out.string() + ".sparsesync.json") == sidecar);
  };
  SUBCASE("the server refuses a client certificate signed by another CA") {
    refused(pki.args("rogue-client"), "rogue client certificate");
    CHECK(wait_until([&] { return s.log().find("refused a connection") != std::string::npos; }, 10s));
    CHECK(s.log().find("certificate") != std::string::npos);
  }
  SUBCASE("the client refuses a server certificate its CA did not sign") {
    refused(pki.args("client", "rogue-ca.pem"), "untrusted server");
  }
  SUBCASE("the client refuses a server certificate without the expected name") {
    refused(pki.args("client") + std::vector<std::string>{"--tls-server-name", "other.example"}, "wrong server name");
  }
  SUBCASE("a client without TLS (the right key only) is refused") {
    // The server's TLS handshake fails on the plaintext hello and it closes the connection: the client only
    // sees the connection end during the handshake, a network error (7), not an authentication failure (8).
    const auto r = pull(t, s, out, key);
    CHECK_MESSAGE((r.rc == 7 || r.rc == 8), "exit " << r.rc << "\n" << r.err);
    CHECK(slurp(out) == held);
  }
  // The server still serves a client with the right certificate: the refusals were about the certificates.
  const auto r = pull(t, s, out, key, pki.args("client"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(same_file(out, v2));
}

TEST_CASE("serve and pull with mutual TLS alone (no pre-shared key)") {
  temp_dir t;
  const test_pki pki(t / "pki");
  server s(t.path, {}, pki.args("server"));
  trainer tr;
  const auto v1 = tr.drop(s.watch(), "step-1.safetensors");
  s.wait_published(1);
  CHECK(s.log().find("(no key, mutual TLS)") != std::string::npos);

  const auto out = t / "out.safetensors";
  auto r = pull(t, s, out, {}, pki.args("client") + std::vector<std::string>{"--tls-server-name", "localhost"});
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.err.find("(TLS)") != std::string::npos);
  CHECK(same_file(out, v1));

  fs::create_directories(t / "rogue");
  r = pull(t, s, t / "rogue" / "out.safetensors", {}, pki.args("rogue-client"));
  CHECK_MESSAGE(r.rc == 8, r.err);
  CHECK(entries(t / "rogue").empty());  // no OUT, no sidecar, no temporary file
}
