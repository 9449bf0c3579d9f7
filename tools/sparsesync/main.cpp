// sparsesync: send only the changed elements of model weights, losslessly (docs/CLI.md).
// Only the command line lives here; each command is its own translation unit in sparsesync_cli_lib.
#include <sparsesync/cli/atomic_file.hpp>
#include <sparsesync/cli/cmd_apply.hpp>
#include <sparsesync/cli/cmd_diff.hpp>
#include <sparsesync/cli/cmd_inspect.hpp>
#include <sparsesync/cli/exit_codes.hpp>
#ifdef SPARSESYNC_CLI_NET
#include <sparsesync/cli/cmd_pull.hpp>
#include <sparsesync/cli/cmd_serve.hpp>
#endif

#include <sparsesync/codec/encoder_table.hpp>
#include <sparsesync/core/error.hpp>

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <new>
#include <string>

#define SPARSESYNC_CLI_STR2(x) #x
#define SPARSESYNC_CLI_STR(x) SPARSESYNC_CLI_STR2(x)

namespace {

const char* const version_string = "sparsesync " SPARSESYNC_CLI_STR(SPARSESYNC_VERSION_MAJOR) "." SPARSESYNC_CLI_STR(
    SPARSESYNC_VERSION_MINOR) "." SPARSESYNC_CLI_STR(SPARSESYNC_VERSION_PATCH) " (patch format v1)";

// diff and apply: SIGINT/SIGTERM removes the temporary being written, then ends the process as the signal
// would. (serve and pull handle both signals on a thread of their own: net_common.hpp, signal_guard.)
extern "C" void remove_temps_and_die(int sig) {
  sparsesync::tools::unlink_pending_temps();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sparsesync::cli;
  CLI::App app{"sparsesync: send only the changed elements of model weights (safetensors checkpoints), losslessly.\n"
               "A patch turns BASE into NEW byte for byte; apply verifies everything before it writes."};
  app.footer(exit_code_help);
  app.set_version_flag("--version", version_string);
  app.require_subcommand(1, 1);
  app.fallthrough();  // -q works after the subcommand too
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "Print no summary and no progress bar (errors still go to stderr)");

  // --bucket-bytes after its size suffix is resolved: CLI::PositiveNumber would print a 309-digit range.
  const CLI::Validator at_least_one_byte(
      [](std::string& v) -> std::string {
        try {
          return std::stoull(v) >= 1 ? std::string() : std::string("must be at least 1 byte (e.g. 16MiB)");
        } catch (...) {
          return "must be a size in bytes (suffixes: k, M, G, KiB, MiB, GiB)";
        }
      },
      "SIZE >= 1");

  // --encoder: every row of the encoder table (names and aliases), or auto.
  std::vector<std::string> encoder_choices{"auto"};
  for (const auto& r : sparsesync::encoder_table) {
    encoder_choices.emplace_back(r.name);
    if (!r.alias.empty()) encoder_choices.emplace_back(r.alias);
  }
  const std::string encoder_help = sparsesync::encoder_names_list() +
                                   ", or auto: the smallest per bucket (entropy among them only with --link-gbps)";
  auto add_link = [](CLI::App* c, sparsesync::cli::link_args& l) {
    c->add_option("--link-gbps", l.gbps,
                  "The link's speed in Gb/s, for auto: entropy takes a bucket where its bytes saved cross the link sooner than "
                  "the receivers walk the base to decode it (0: not stated; auto then leaves entropy out)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    c->add_option("--receivers", l.receivers, "Where the receivers decode, for --link-gbps: gpu or cpu (a CPU walks ~300x slower)")
        ->capture_default_str()
        ->check(CLI::IsMember({"gpu", "cpu"}));
  };

  diff_args d;
  auto* diff = app.add_subcommand("diff", "Write a patch that turns BASE into NEW (same tensors, same order)");
  diff->add_option("BASE", d.base, "The version the receiver has (.safetensors)")->required();
  diff->add_option("NEW", d.next, "The version to send (.safetensors)")->required();
  diff->add_option("-o,--output", d.out, "The patch file to write (atomically)")->required();
  diff->add_option("--encoder", d.encoder, encoder_help)->capture_default_str()->check(CLI::IsMember(encoder_choices));
  add_link(diff, d.link);
  diff->add_option("--values", d.values, "How a changed value travels: absolute (its bits) or ulp (its step from the base value)")
      ->capture_default_str()
      ->check(CLI::IsMember({"absolute", "ulp"}));
  diff->add_option("--bucket-bytes", d.bucket_bytes, "Bytes of weights per bucket (suffixes: k, M, G, KiB, MiB, GiB)")
      ->capture_default_str()
      ->transform(CLI::AsSizeValue(false))
      ->check(at_least_one_byte);
  diff->add_option("--chunk-log2", d.chunk_log2, "log2 of the chunk size in elements (the unit of parallel decoding)")
      ->capture_default_str()
      ->check(CLI::Range(8, 24));
  diff->add_option("--base-version", d.base_version, "Version number recorded for BASE")->capture_default_str();
  diff->add_option("--target-version", d.target_version, "Version number recorded for NEW")->capture_default_str();
  diff->add_flag("--full-header", d.full_header,
                 "Store NEW's safetensors header in the patch even when it is byte-identical to BASE's (by default it is then "
                 "referenced, and apply requires BASE's header to be that same one)");
  diff->footer(exit_code_help);

  apply_args ap;
  auto* apply = app.add_subcommand("apply", "Rebuild NEW from BASE and a patch; writes nothing unless everything verifies");
  apply->add_option("BASE", ap.base, "The patch's base version (.safetensors)")->required();
  apply->add_option("PATCH", ap.patch, "A patch written by `sparsesync diff`")->required();
  apply->add_option("-o,--output", ap.out, "The file to write (atomically; may be BASE itself)")->required();
  apply->footer(exit_code_help);

  inspect_args in;
  auto* inspect = app.add_subcommand("inspect", "Validate a patch and report its buckets, sizes, encoders and checksums");
  inspect->add_option("PATCH", in.patch, "A patch file")->required();
  inspect->add_flag("--json", in.json, "Print one JSON object (schema in docs/CLI.md)");
  inspect->footer(exit_code_help);

#ifdef SPARSESYNC_CLI_NET
  auto add_security = [](CLI::App* c, net_security_args& s, bool client) {
    c->add_option("--key-file", s.key_file, "Pre-shared key file (hex or raw, mode 0600); both sides need the same one");
    c->add_option("--tls-ca", s.tls_ca, "Mutual TLS: CA file (PEM) the peer's certificate must chain to");
    c->add_option("--tls-cert", s.tls_cert, "Mutual TLS: this side's certificate chain (PEM)");
    c->add_option("--tls-key", s.tls_key, "Mutual TLS: this side's private key (PEM)");
    if (client) c->add_option("--tls-server-name", s.tls_server_name, "Mutual TLS: the name the server's certificate must carry");
    c->add_flag("--insecure-no-auth", s.insecure_no_auth, "No authentication and no encryption at all (both sides; trusted hosts only)");
  };

  serve_args sv;
  auto* serve = app.add_subcommand("serve", "Publish every new checkpoint that appears in DIR to subscribers (`sparsesync pull`)");
  serve->add_option("--listen", sv.listen, "HOST:PORT to listen on (port 0: any free port; see --port-file)")->required();
  serve->add_option("--watch", sv.watch, "Directory where checkpoints (*.safetensors) are renamed into place")->required();
  add_security(serve, sv.security, false);
  serve->add_option("--encoder", sv.encoder, encoder_help)->capture_default_str()->check(CLI::IsMember(encoder_choices));
  add_link(serve, sv.link);
  serve->add_option("--values", sv.values, "How a changed value travels: absolute or ulp")->capture_default_str()->check(CLI::IsMember({"absolute", "ulp"}));
  serve->add_option("--bucket-bytes", sv.bucket_bytes, "Bytes of weights per bucket, the unit of pipelining (suffixes: k, M, G, KiB, MiB, GiB)")
      ->capture_default_str()
      ->transform(CLI::AsSizeValue(false))
      ->check(at_least_one_byte);
  serve->add_option("--chunk-log2", sv.chunk_log2, "log2 of the chunk size in elements")->capture_default_str()->check(CLI::Range(8, 24));
  serve->add_option("--poll-ms", sv.poll_ms, "How often DIR is scanned for new checkpoints")->capture_default_str()->check(CLI::Range(10, 600000));
  serve->add_option("--history", sv.history, "Versions kept as patches for subscribers that are behind (older ones get a full transfer)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  serve->add_option("--ack-timeout-ms", sv.ack_timeout_ms, "Longest wait for subscribers to acknowledge a version before the next file")
      ->capture_default_str();
  serve->add_option("--peer-timeout", sv.peer_timeout_s, "Seconds a subscriber may take to answer (hello, acknowledgements)")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  serve->add_option("--port-file", sv.port_file, "Write the port listened on to this file (atomically), e.g. with --listen HOST:0");
  serve->footer(net_exit_code_help);

  pull_args pl;
  auto* pull = app.add_subcommand("pull", "Bring OUT to the newest version a `sparsesync serve` publishes (atomically)");
  pull->add_option("SERVER", pl.server, "HOST:PORT of the server")->required();
  pull->add_option("-o,--output", pl.out, "The checkpoint to keep up to date (replaced atomically; state in OUT.sparsesync.json)")->required();
  add_security(pull, pl.security, true);
  pull->add_flag("--follow", pl.follow, "Keep OUT at the newest version until SIGINT/SIGTERM, reconnecting after errors; one JSON line per version");
  pull->add_option("--retries", pl.retries, "Without --follow: further attempts after a network error")->capture_default_str()->check(CLI::Range(0, 1000));
  pull->add_option("--timeout", pl.timeout_s, "Without --follow: give up when the server is silent this many seconds (0: never)")
      ->capture_default_str();
  pull->footer(net_exit_code_help);
#endif

  // CLI11 takes an unknown first word for a stray positional and says "A subcommand is required".
  for (int i = 1; i < argc; ++i) {
    const std::string w = argv[i];
    if (w.empty() || w[0] == '-') continue;
    bool known = false;
    std::string names;
    for (const auto* sub : app.get_subcommands({})) {
      known = known || sub->get_name() == w;
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "sparsesync: unknown subcommand '%s' (expected one of: %s)\nRun with --help for more information.\n", w.c_str(),
                   names.c_str());
      return exit_usage;
    }
    break;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? exit_ok : exit_usage;
  }

  const char* cmd = *diff ? "diff" : *apply ? "apply" : "inspect";
#ifdef SPARSESYNC_CLI_NET
  if (*serve) cmd = "serve";
  if (*pull) cmd = "pull";
#endif
  try {
    d.quiet = ap.quiet = in.quiet = quiet;
    if (*diff || *apply) {
      std::signal(SIGINT, remove_temps_and_die);
      std::signal(SIGTERM, remove_temps_and_die);
    }
    if (*diff) return run_diff(d);
    if (*apply) return run_apply(ap);
#ifdef SPARSESYNC_CLI_NET
    sv.quiet = pl.quiet = quiet;
    if (*serve) return run_serve(sv);
    if (*pull) return run_pull(pl);
#endif
    return run_inspect(in);
  } catch (const failure& f) {
    std::fprintf(stderr, "sparsesync %s: error: %s\n", cmd, f.what());
    return f.code();
  } catch (const sparsesync::error& e) {
    std::fprintf(stderr, "sparsesync %s: error: %s\n", cmd, e.what());
    return exit_code_for(e.code());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "sparsesync %s: error: out of memory\n", cmd);
    return exit_io;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparsesync %s: internal error: %s\n", cmd, e.what());
    return exit_internal;
  }
}
