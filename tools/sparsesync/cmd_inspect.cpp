// `sparsesync inspect PATCH [--json]`: validates a patch on its own and reports what it holds.
#include <sparsesync/cli/cmd_inspect.hpp>

#include <sparsesync/cli/exit_codes.hpp>
#include <sparsesync/cli/file_io.hpp>
#include <sparsesync/cli/patch_check.hpp>

#include <nlohmann/json.hpp>

#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <string>

namespace sparsesync::cli {

inline std::string hex64(std::uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

// Figures shared by the summary lines, the JSON and the text report.
struct size_figures {
  std::uint64_t numel = 0, changed = 0, dense_bytes = 0, payload_bytes = 0;
  [[nodiscard]] double density() const { return numel ? static_cast<double>(changed) / static_cast<double>(numel) : 0.0; }
  [[nodiscard]] double bits_per_changed() const { return changed ? 8.0 * static_cast<double>(payload_bytes) / static_cast<double>(changed) : 0.0; }
  [[nodiscard]] double ratio() const { return payload_bytes ? static_cast<double>(dense_bytes) / static_cast<double>(payload_bytes) : 0.0; }
};

inline nlohmann::json figures_json(const size_figures& f) {
  nlohmann::json j;
  j["numel"] = f.numel;
  j["changed"] = f.changed;
  j["density"] = f.density();
  j["payload_bytes"] = f.payload_bytes;
  j["dense_bytes"] = f.dense_bytes;
  j["bits_per_changed"] = f.changed ? nlohmann::json(f.bits_per_changed()) : nlohmann::json(nullptr);
  j["ratio_vs_dense"] = f.ratio();
  return j;
}

inline std::string segment_name(const patch_summary& p, const segment& s) {
  if (p.prologue.layout && s.tensor < p.prologue.layout->size()) return (*p.prologue.layout)[s.tensor].name;
  return "#" + std::to_string(s.tensor);
}

inline nlohmann::json inspect_json(const patch_summary& p) {
  const auto& h = p.prologue.header;
  nlohmann::json j;
  size_figures total;
  std::uint64_t data_bytes = 0;
  nlohmann::json buckets = nlohmann::json::array();
  nlohmann::json encoders = nlohmann::json::object();
  for (const auto& b : p.buckets) {
    size_figures f{b.header.numel, b.header.changed, b.header.numel * size_of(b.header.dtype), b.frame_bytes};
    total.numel += f.numel;
    total.changed += f.changed;
    total.dense_bytes += f.dense_bytes;
    data_bytes += b.header.data_bytes;
    nlohmann::json jb = figures_json(f);
    const auto enc = std::string(encoder_name(b.header.encoder));
    jb["index"] = b.header.index;
    jb["file_offset"] = b.offset;
    jb["encoder"] = enc;
    jb["value_mode"] = std::string(to_string(b.header.mode));
    jb["dtype"] = std::string(to_string(b.header.dtype));
    jb["log2_chunk"] = b.header.log2_chunk;
    jb["chunks"] = b.header.chunk_count;
    jb["data_bytes"] = b.header.data_bytes;
    jb["base_checksum"] = hex64(b.header.base_checksum);
    jb["target_checksum"] = hex64(b.header.target_checksum);
    jb["payload_checksum"] = hex64(b.header.payload_checksum);
    nlohmann::json segs = nlohmann::json::array();
    for (const auto& s : b.segments) {
      nlohmann::json js{{"tensor", s.tensor}, {"offset", s.offset}, {"count", s.count}};
      if (p.prologue.layout) js["name"] = segment_name(p, s);
      segs.push_back(std::move(js));
    }
    jb["segments"] = std::move(segs);
    encoders[enc] = encoders.value(enc, 0) + 1;
    buckets.push_back(std::move(jb));
  }
  total.payload_bytes = p.file_bytes;
  if (p.prologue.layout) total.dense_bytes = p.prologue.layout->bytes();
  j = figures_json(total);
  j["format_version"] = format_version;
  j["data_bytes"] = data_bytes;
  j["data_bits_per_changed"] = total.changed ? nlohmann::json(8.0 * static_cast<double>(data_bytes) / static_cast<double>(total.changed))
                                             : nlohmann::json(nullptr);
  j["bucket_count"] = h.bucket_count;
  j["base_version"] = h.base_version;
  j["target_version"] = h.target_version;
  j["layout_hash"] = hex64(h.layout_hash);
  j["base_checksum"] = hex64(h.base_checksum);
  j["target_checksum"] = hex64(h.target_checksum);
  j["layout_section_bytes"] = h.layout_bytes;
  j["metadata_bytes"] = h.metadata_bytes;
  // How apply gets NEW's safetensors header: stored in the patch, or the same bytes as BASE's.
  if (p.target_header.same_as_base)
    j["target_header"] = {{"form", "same_as_base"}, {"bytes", 0}, {"xxh64", hex64(*p.target_header.same_as_base)}};
  else if (!p.target_header.stored.empty())
    j["target_header"] = {{"form", "stored"}, {"bytes", p.target_header.stored.size()}, {"xxh64", hex64(header_hash(p.target_header.stored))}};
  else
    j["target_header"] = {{"form", "none"}, {"bytes", 0}};
  j["tensors"] = p.prologue.layout ? nlohmann::json(p.prologue.layout->size()) : nlohmann::json(nullptr);
  j["encoders"] = std::move(encoders);
  j["buckets"] = std::move(buckets);
  return j;
}

inline std::string fixed2(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v.get<double>());
  return buf;
}

inline void inspect_text(const patch_summary& p, std::FILE* out) {
  const auto& h = p.prologue.header;
  const nlohmann::json j = inspect_json(p);
  std::fprintf(out, "sparsesync patch, format v%u, %" PRIu64 " bytes\n", format_version, p.file_bytes);
  std::fprintf(out, "  versions        %" PRIu64 " -> %" PRIu64 "\n", h.base_version, h.target_version);
  std::fprintf(out, "  layout hash     %s (%s)\n", hex64(h.layout_hash).c_str(),
               p.prologue.layout ? (std::to_string(p.prologue.layout->size()) + " tensors listed").c_str() : "no layout section");
  std::fprintf(out, "  base checksum   %s\n  target checksum %s\n", hex64(h.base_checksum).c_str(), hex64(h.target_checksum).c_str());
  std::string th = "none (apply needs one)";
  if (p.target_header.same_as_base)
    th = "same bytes as BASE's header (xxh64 " + hex64(*p.target_header.same_as_base) + "), not stored";
  else if (!p.target_header.stored.empty())
    th = "stored, " + std::to_string(p.target_header.stored.size()) + " bytes";
  std::fprintf(out, "  target header   %s\n", th.c_str());
  std::fprintf(out, "\n%6s %-8s %-8s %-6s %12s %10s %8s %12s %9s %8s  %-18s %-18s  %s\n", "bucket", "encoder", "values", "dtype", "elements",
               "changed", "density", "bytes", "bits/chg", "ratio", "base checksum", "target checksum", "tensors");
  for (std::size_t i = 0; i < p.buckets.size(); ++i) {
    const auto& b = p.buckets[i];
    const auto& jb = j["buckets"][i];
    std::string names;
    for (std::size_t s = 0; s < b.segments.size(); ++s) {
      if (s == 3) {
        names += ", ... (+" + std::to_string(b.segments.size() - 3) + " more)";
        break;
      }
      if (s) names += ", ";
      const auto& sg = b.segments[s];
      names += segment_name(p, sg);
      if (p.prologue.layout && (sg.offset != 0 || sg.count != (*p.prologue.layout)[sg.tensor].numel()))
        names += "[" + std::to_string(sg.offset) + ":" + std::to_string(sg.offset + sg.count) + "]";
    }
    std::fprintf(out, "%6u %-8s %-8s %-6s %12" PRIu64 " %10" PRIu64 " %7.3f%% %12" PRIu64 " %9s %7.1fx  %-18s %-18s  %s\n",
                 b.header.index, std::string(encoder_name(b.header.encoder)).c_str(), std::string(to_string(b.header.mode)).c_str(),
                 std::string(to_string(b.header.dtype)).c_str(), b.header.numel, b.header.changed, 100.0 * jb["density"].get<double>(),
                 b.frame_bytes, fixed2(jb["bits_per_changed"]).c_str(),
                 jb["ratio_vs_dense"].get<double>(), hex64(b.header.base_checksum).c_str(), hex64(b.header.target_checksum).c_str(), names.c_str());
  }
  std::fprintf(out, "\ntotal: %" PRIu64 " elements, %" PRIu64 " changed (%.3f%%), %" PRIu64 " bytes (%" PRIu64 " of chunk data), ",
               j["numel"].get<std::uint64_t>(), j["changed"].get<std::uint64_t>(), 100.0 * j["density"].get<double>(), p.file_bytes,
               j["data_bytes"].get<std::uint64_t>());
  if (j["bits_per_changed"].is_null())
    std::fprintf(out, "no changes, ");
  else
    std::fprintf(out, "%.2f bits/changed element (%.2f in chunk data), ", j["bits_per_changed"].get<double>(), j["data_bits_per_changed"].get<double>());
  std::fprintf(out, "%.1fx smaller than dense (%" PRIu64 " bytes)\n", j["ratio_vs_dense"].get<double>(), j["dense_bytes"].get<std::uint64_t>());
}

int run_inspect(const inspect_args& a) {
  const mapped_file in = mapped_file::open(a.patch, "PATCH");
  patch_summary p;
  check(check_patch(in.bytes(), p, true, !a.quiet), "PATCH " + a.patch);
  if (a.json) {
    std::cout << inspect_json(p).dump(2) << '\n';
  } else {
    inspect_text(p, stdout);
  }
  std::fflush(stdout);
  return exit_ok;
}

}  // namespace sparsesync::cli
