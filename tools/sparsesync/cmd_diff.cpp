// `sparsesync diff BASE NEW -o PATCH`: encodes the change from BASE to NEW (docs/CLI.md).
#include <sparsesync/cli/cmd_diff.hpp>

#include <sparsesync/cli/checkpoint.hpp>
#include <sparsesync/cli/exit_codes.hpp>
#include <sparsesync/cli/progress.hpp>
#include <sparsesync/cli/selection.hpp>
#include <sparsesync/cli/target_header.hpp>

#include <sparsesync/sparsesync.hpp>

#include <cinttypes>
#include <cstdio>
#include <algorithm>
#include <map>
#include <string>

namespace sparsesync::cli {

// The library's patch encoder, driven bucket by bucket so that a progress bar can follow.
template <class Sel>
std::vector<unsigned char> encode_with_progress(const model_layout& layout, std::span<const const_tensor_view> base,
                                                std::span<const const_tensor_view> target, const patch_options& opt, const fixed_bytes& policy,
                                                bool show_progress) {
  patch_encoder<Sel, fixed_bytes> enc(layout, base, target, opt, policy);
  std::vector<unsigned char> out;
  enc.prologue(out);
  progress bar("diff", enc.bucket_count(), show_progress);
  while (enc.next_bucket() < enc.bucket_count()) {
    enc.encode_next(out);
    bar.update(enc.next_bucket());
  }
  bar.done();
  enc.final_header(out.data());
  return out;
}

int run_diff(const diff_args& a) {
  const auto mode = parse_value_mode(a.values);
  if (!mode) throw failure(exit_usage, "--values must be absolute or ulp, not '" + a.values + "'");
  if (a.chunk_log2 < min_log2_chunk || a.chunk_log2 > max_log2_chunk) throw failure(exit_usage, "--chunk-log2 must lie in [8, 24]");
  if (a.bucket_bytes == 0) throw failure(exit_usage, "--bucket-bytes must be positive");
  refuse_same_file(a.out, a.base, "-o", "BASE");
  refuse_same_file(a.out, a.next, "-o", "NEW");
  (void)tools::remove_stale_temps(a.out);  // left by an earlier run that was killed while writing OUT

  const checkpoint base = checkpoint::open(a.base, "BASE");
  const checkpoint next = checkpoint::open(a.next, "NEW");
  if (auto diff = first_layout_difference(base.layout(), next.layout(), "BASE", "NEW"); !diff.empty())
    throw failure(exit_base_mismatch, "BASE and NEW have different layouts: " + diff);

  patch_options opt;
  opt.encode.mode = *mode;
  opt.encode.log2_chunk = a.chunk_log2;
  opt.encode.link = to_link_cost(a.link);
  opt.base_version = a.base_version;
  opt.target_version = a.target_version;
  opt.include_layout = true;
  // NEW's exact header, or a 16-byte reference when it is BASE's (target_header.hpp): apply rebuilds NEW byte for byte.
  const bool same_header = !a.full_header && std::ranges::equal(base.header_bytes(), next.header_bytes());
  const auto same_record = make_same_header_record(base.header_bytes());
  opt.metadata = same_header ? std::span<const unsigned char>(same_record) : next.header_bytes();
  const fixed_bytes policy{a.bucket_bytes};
  const auto base_views = base.views();
  const auto next_views = next.views();
  std::vector<unsigned char> patch;
  visit_selection(a.encoder, [&]<class Sel>() {
    patch = encode_with_progress<Sel>(base.layout(), base_views, next_views, opt, policy, !a.quiet);
  });

  tools::write_file_atomic(a.out, [&](tools::file_sink& sink) { sink.write(patch); });

  if (!a.quiet) {
    // Totals from the patch itself, so the line says what inspect would say.
    patch_prologue pro;
    check(parse_patch_prologue(patch, pro));
    std::uint64_t changed = 0;
    std::map<std::string, unsigned> encoders;
    std::size_t pos = pro.bytes;
    for (std::uint32_t b = 0; b < pro.header.bucket_count; ++b) {
      bucket_header bh;
      check(detail::read_bucket_header(std::span(patch).subspan(pos), bh));
      changed += bh.changed;
      ++encoders[std::string(encoder_name(bh.encoder))];
      pos += bh.total_bytes();
    }
    const std::uint64_t numel = base.layout().numel(), dense = base.layout().bytes();
    std::string enc;
    for (const auto& [name, n] : encoders) enc += (enc.empty() ? "" : ", ") + name + " x" + std::to_string(n);
    std::printf("diff: %" PRIu64 " of %" PRIu64 " elements changed (%.4f%%), patch %zu bytes, ", changed, numel,
                numel ? 100.0 * static_cast<double>(changed) / static_cast<double>(numel) : 0.0, patch.size());
    if (changed)
      std::printf("%.2f bits/changed element, ", 8.0 * static_cast<double>(patch.size()) / static_cast<double>(changed));
    std::printf("%.1fx smaller than dense (%" PRIu64 " bytes); values %s; encoders: %s; NEW's header %s\n",
                static_cast<double>(dense) / static_cast<double>(patch.size()), dense, a.values.c_str(), enc.empty() ? "none" : enc.c_str(),
                same_header ? "= BASE's (not stored)" : ("stored (" + std::to_string(next.header_bytes().size()) + " bytes)").c_str());
    std::fflush(stdout);
  }
  return exit_ok;
}

}  // namespace sparsesync::cli
