// safetensors header parsing and writing: the parts that need nlohmann::json, compiled once.
#include <sparsesync/cli/safetensors.hpp>

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

SPARSESYNC_NS_BEGIN
namespace tools {

namespace detail {

// nlohmann keeps the last of duplicate keys silently; a duplicated tensor name is ambiguous, so refuse it.
// (nlohmann::json, not ordered_json: ordered_json inserts in linear time, quadratic for 100K-tensor headers.)
nlohmann::json parse_header_json(std::span<const unsigned char> json, std::string_view what) {
  std::vector<std::set<std::string>> open_objects;
  bool duplicate = false;
  std::string duplicate_key;
  auto cb = [&](int /*depth*/, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using ev_t = nlohmann::json::parse_event_t;
    if (ev == ev_t::object_start) open_objects.emplace_back();
    if (ev == ev_t::object_end && !open_objects.empty()) open_objects.pop_back();
    if (ev == ev_t::key && !open_objects.empty() && !open_objects.back().insert(parsed.get<std::string>()).second && !duplicate) {
      duplicate = true;
      duplicate_key = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json.begin(), json.end(), cb);
  } catch (const nlohmann::json::exception& e) {
    malformed(what, std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (duplicate) malformed(what, "header lists key '" + duplicate_key + "' twice");
  if (!j.is_object()) malformed(what, "header is not a JSON object");
  return j;
}

std::uint64_t get_u64(const nlohmann::json& v, std::string_view what, const std::string& context) {
  if (!v.is_number_unsigned()) malformed(what, context + " is not a non-negative integer");
  return v.get<std::uint64_t>();
}

}  // namespace detail

// Parses and validates the header at the start of `prefix` (at least its first 8 + N bytes) of a file of
// `file_size` bytes. `what` names the source in error messages.
safetensors_header parse_safetensors_header(std::span<const unsigned char> prefix, std::uint64_t file_size, std::string_view what) {
  using detail::malformed;
  if (prefix.size() < 8 || file_size < 8) malformed(what, "file is shorter than the 8-byte header length");
  const std::uint64_t n = sparsesync::detail::load_le<std::uint64_t>(prefix.data());
  if (n > safetensors_max_header_size)
    malformed(what, "header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(safetensors_max_header_size) + " bytes");
  if (n > file_size - 8) malformed(what, "header length " + std::to_string(n) + " exceeds the file size " + std::to_string(file_size));
  if (prefix.size() < 8 + n) malformed(what, "header is truncated");

  const auto j = detail::parse_header_json(prefix.subspan(8, n), what);
  safetensors_header h;
  h.header_size = 8 + n;
  const std::uint64_t data_size = file_size - h.header_size;

  struct entry {
    tensor_info info;
    std::uint64_t begin, end;
  };
  std::vector<entry> entries;
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) malformed(what, "__metadata__ is not an object");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) malformed(what, "__metadata__ value of '" + k + "' is not a string");
        h.metadata.emplace(k, s.get<std::string>());
      }
      continue;
    }
    const std::string ctx = "tensor '" + name + "'";
    if (name.size() > max_tensor_name) malformed(what, "a tensor name is longer than " + std::to_string(max_tensor_name) + " bytes");
    if (entries.size() >= max_tensors) malformed(what, "more than " + std::to_string(max_tensors) + " tensors");
    if (!v.is_object()) malformed(what, ctx + " is not an object");
    const auto dt = v.find("dtype"), shape = v.find("shape"), offs = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) malformed(what, ctx + " has no dtype string");
    if (shape == v.end() || !shape->is_array()) malformed(what, ctx + " has no shape array");
    if (offs == v.end() || !offs->is_array() || offs->size() != 2) malformed(what, ctx + " has no data_offsets pair");
    entry e;
    e.info.name = name;
    const auto t = safetensors_dtype(dt->get<std::string>());
    if (!t)
      malformed(what, ctx + " has unsupported dtype '" + dt->get<std::string>() + "' (supported: BF16, F16, F32, F8_E4M3, F8_E5M2)");
    e.info.dtype = *t;
    if (shape->size() > max_tensor_rank) malformed(what, ctx + " has rank " + std::to_string(shape->size()) + " > " + std::to_string(max_tensor_rank));
    unsigned __int128 numel = 1;
    for (const auto& d : *shape) {
      e.info.shape.push_back(detail::get_u64(d, what, ctx + " shape entry"));
      numel *= e.info.shape.back();
      if (numel > (static_cast<unsigned __int128>(1) << 56)) malformed(what, ctx + " has too many elements");
    }
    e.begin = detail::get_u64((*offs)[0], what, ctx + " data_offsets[0]");
    e.end = detail::get_u64((*offs)[1], what, ctx + " data_offsets[1]");
    if (e.begin > e.end) malformed(what, ctx + " has data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] that run backwards");
    if (e.end > data_size)
      malformed(what, ctx + " ends at data offset " + std::to_string(e.end) + ", past the data area of " + std::to_string(data_size) + " bytes");
    const unsigned __int128 bytes = numel * size_of(e.info.dtype);
    if (bytes != e.end - e.begin)
      malformed(what, ctx + " has shape of " + std::to_string(static_cast<std::uint64_t>(bytes)) + " bytes but data_offsets span " +
                          std::to_string(e.end - e.begin));
    // Views hand out typed pointers; the reference writer always aligns, so a misaligned tensor means a
    // hand-made file we would rather refuse than read through misaligned pointers.
    if (e.begin % size_of(e.info.dtype) != 0) malformed(what, ctx + " starts at a data offset not aligned to its element size");
    entries.push_back(std::move(e));
  }

  // Data-offset order; zero-size tensors sort before a tensor starting at the same offset and among
  // themselves by name, so the order is a pure function of the header.
  std::sort(entries.begin(), entries.end(), [](const entry& a, const entry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.info.name < b.info.name;
  });
  std::uint64_t expected = 0;
  for (const auto& e : entries) {
    if (e.begin < expected) malformed(what, "tensor '" + e.info.name + "' overlaps the tensor before it in the data area");
    if (e.begin > expected)
      malformed(what, "data area has a hole of " + std::to_string(e.begin - expected) + " bytes before tensor '" + e.info.name + "'");
    expected = e.end;
  }
  if (expected != data_size)
    malformed(what, "data area has " + std::to_string(data_size - expected) + " bytes after the last tensor (file size does not match the header)");

  std::vector<tensor_info> infos;
  infos.reserve(entries.size());
  for (auto& e : entries) {
    h.offsets.push_back(e.begin);
    infos.push_back(std::move(e.info));
  }
  h.offsets.push_back(data_size);
  h.layout = model_layout(std::move(infos));
  return h;
}

// The canonical header for `layout` laid out contiguously in layout order: the 8-byte length, then
// compact JSON ({"__metadata__":...} first when non-empty; each tensor as {"dtype","shape","data_offsets"}),
// padded with spaces to a multiple of 8 bytes.
std::vector<unsigned char> make_safetensors_header(const model_layout& layout, const safetensors_metadata& metadata) {
  // Written by hand rather than through a JSON object: the order is the layout's, and ordered_json would
  // take quadratic time for headers with many tensors. nlohmann still escapes (and validates) the strings.
  auto quoted = [](const std::string& s) {
    try {
      return nlohmann::json(s).dump();
    } catch (const nlohmann::json::exception& e) {
      throw error(errc::invalid_argument, std::string("safetensors: names and metadata must be valid UTF-8 (") + e.what() + ")");
    }
  };
  std::string text = "{";
  if (!metadata.empty()) {
    text += "\"__metadata__\":{";
    for (auto it = metadata.begin(); it != metadata.end(); ++it) {
      if (it != metadata.begin()) text += ',';
      text += quoted(it->first) + ":" + quoted(it->second);
    }
    text += "}";
  }
  std::set<std::string_view> seen;
  std::uint64_t offset = 0;
  for (const auto& t : layout.tensors()) {
    if (t.name == "__metadata__") throw error(errc::invalid_argument, "safetensors: a tensor may not be named __metadata__");
    if (!seen.insert(t.name).second) throw error(errc::invalid_argument, "safetensors: tensor name '" + t.name + "' appears twice");
    if (offset % size_of(t.dtype) != 0)
      throw error(errc::invalid_argument, "safetensors: tensor '" + t.name +
                                              "' would start at a misaligned offset; order tensors by decreasing element size");
    if (text.size() > 1) text += ',';
    text += quoted(t.name) + ":{\"dtype\":\"" + std::string(safetensors_dtype_name(t.dtype)) + "\",\"shape\":[";
    for (std::size_t d = 0; d < t.shape.size(); ++d) text += (d ? "," : "") + std::to_string(t.shape[d]);
    text += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.bytes()) + "]}";
    offset += t.bytes();
  }
  text += "}";
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<unsigned char> out(8 + text.size());
  sparsesync::detail::store_le<std::uint64_t>(out.data(), text.size());
  std::memcpy(out.data() + 8, text.data(), text.size());
  return out;
}

}  // namespace tools
SPARSESYNC_NS_END
