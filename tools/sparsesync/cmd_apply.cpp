// `sparsesync apply BASE PATCH -o OUT`: verifies everything, then writes OUT atomically (docs/CLI.md).
#include <sparsesync/cli/cmd_apply.hpp>

#include <sparsesync/cli/checkpoint.hpp>
#include <sparsesync/cli/exit_codes.hpp>
#include <sparsesync/cli/file_io.hpp>
#include <sparsesync/cli/safetensors.hpp>
#include <sparsesync/cli/patch_check.hpp>
#include <sparsesync/cli/progress.hpp>

#include <sparsesync/sparsesync.hpp>

#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

namespace sparsesync::cli {

namespace detail_apply {

// Writes BASE's tensors to `out` in layout (= data-offset) order, a verified bucket at a time: each call
// writes the elements up to a flat index with that bucket's staged changes applied, so apply holds one
// bucket's changes, never the whole patch's. The changes come sorted by (tensor, offset): buckets tile the
// layout in order and positions increase.
class tensor_writer {
 public:
  tensor_writer(const model_layout& layout, std::span<const const_tensor_view> base, tools::file_sink& out)
      : layout_(layout), base_(base), out_(out) {}

  void write_until(std::uint64_t upto, std::span<const staged_change> changes) {
    constexpr std::uint64_t block = 8u << 20;  // bytes per write
    std::size_t next = 0;
    while (flat_ < upto) {
      if (tensor_ >= layout_.size()) throw failure(exit_internal, "buckets cover more elements than the layout");
      const auto& info = layout_[tensor_];
      if (offset_ == info.numel()) {
        ++tensor_;
        offset_ = 0;
        continue;
      }
      const unsigned w = size_of(info.dtype);
      const std::uint64_t n = std::min({info.numel() - offset_, upto - flat_, block / w});
      const auto* src = static_cast<const unsigned char*>(base_[tensor_].data);
      if (src)
        buf_.assign(src + offset_ * w, src + (offset_ + n) * w);
      else
        buf_.assign(n * w, 0);  // a full transfer: the base is the all-zero model
      for (; next < changes.size() && changes[next].tensor == tensor_ && changes[next].offset < offset_ + n; ++next) {
        const auto& c = changes[next];
        if (c.offset < offset_) throw failure(exit_internal, "staged changes are not in layout order");
        unsigned char* p = buf_.data() + (c.offset - offset_) * w;
        switch (w) {
          case 1: *p = static_cast<std::uint8_t>(c.bits); break;
          case 2: {
            const auto v = static_cast<std::uint16_t>(c.bits);
            std::memcpy(p, &v, 2);
            break;
          }
          default: std::memcpy(p, &c.bits, 4); break;
        }
      }
      out_.write(buf_);
      offset_ += n;
      flat_ += n;
    }
    if (next != changes.size()) throw failure(exit_internal, "staged changes are not in layout order");
  }

 private:
  const model_layout& layout_;
  std::span<const const_tensor_view> base_;
  tools::file_sink& out_;
  std::vector<unsigned char> buf_;
  std::size_t tensor_ = 0;
  std::uint64_t offset_ = 0;  // element offset within tensor_
  std::uint64_t flat_ = 0;    // elements written
};

}  // namespace detail_apply

int run_apply(const apply_args& a) {
  static_assert(std::endian::native == std::endian::little, "safetensors data and patch words are little-endian");
  refuse_same_file(a.out, a.patch, "-o", "PATCH");  // OUT may be BASE (an in-place update), never the patch
  (void)tools::remove_stale_temps(a.out);  // left by an earlier run that was killed while writing OUT
  // 1. The patch on its own: structure, checksums, tiling, the stored target header.
  const mapped_file patch_file = mapped_file::open(a.patch, "PATCH");
  const auto patch = patch_file.bytes();
  patch_summary ps;
  check(check_patch(patch, ps, /*decode=*/false), "PATCH " + a.patch);
  check(ps.target_header_status, "PATCH " + a.patch);
  const auto& ph = ps.prologue.header;

  // 2. A stored header must describe exactly the patch's layout, with data packed in layout order.
  const auto& th = ps.target_header;
  if (!th.stored.empty()) {
    if (!ps.prologue.layout) throw failure(exit_bad_patch, "PATCH " + a.patch + ": the patch has no layout section (not made by `sparsesync diff`)");
    const parsed_header target = parse_header_bytes(th.stored, ps.prologue.layout->bytes());
    if (!target.ok) throw failure(exit_bad_patch, "PATCH " + a.patch + ": the stored target header is not valid safetensors: " + target.error);
    if (target.layout.hash() != ph.layout_hash)
      throw failure(exit_bad_patch, "PATCH " + a.patch + ": the stored target header does not describe the patch's layout");
  }

  // 3. BASE: the layout first, then (bucket by bucket) its contents.
  const checkpoint base = checkpoint::open(a.base, "BASE");
  if (base.layout().hash() != ph.layout_hash) {
    std::string why = "the patch was made for another model layout (names, dtypes, shapes or order differ)";
    if (ps.prologue.layout)
      if (auto d = first_layout_difference(*ps.prologue.layout, base.layout(), "the patch", "BASE"); !d.empty()) why += ": " + d;
    throw failure(exit_base_mismatch, "BASE " + a.base + ": " + why);
  }
  if (th.same_as_base && header_hash(base.header_bytes()) != *th.same_as_base)
    throw failure(exit_base_mismatch, "BASE " + a.base +
                                          ": its safetensors header is not the one the patch was made against (the patch reuses BASE's "
                                          "header for OUT; diff with --full-header to store NEW's header instead)");
  const auto out_header = th.same_as_base ? base.header_bytes() : th.stored;
  // A patch from the all-zero model (a full transfer) ignores BASE's contents: only its layout matters.
  auto views = base.views();
  if (ph.flags & flag_from_zero)
    for (auto& v : views) v.data = nullptr;
  // 4. OUT is written into a temporary file as the patch decodes (one chunk's changes in memory, not the
  // whole patch's); the temporary becomes OUT only once every check below passed, and is removed otherwise.
  staged_patch staged(base.layout(), views);
  tools::write_file_atomic(a.out, [&](tools::file_sink& sink) {
    sink.write(out_header);
    detail_apply::tensor_writer writer(base.layout(), views, sink);
    staged.stream_to([&](std::uint64_t flat_end, std::span<const staged_change> changes) { writer.write_until(flat_end, changes); });
    progress bar("apply", ph.bucket_count, !a.quiet);
    std::size_t pos = ps.prologue.bytes;
    for (std::uint32_t b = 0; b < ph.bucket_count; ++b) {
      std::size_t used = 0;
      if (auto s = staged.add_bucket(patch.subspan(pos), used); !s) {
        bar.done();
        if (s.code() == errc::base_mismatch) check(s, "BASE " + a.base + " is not the patch's base");
        check(s, "PATCH " + a.patch);
      }
      pos += used;
      bar.update(b + 1);
    }
    bar.done();
    if (pos != patch.size()) throw failure(exit_bad_patch, "PATCH " + a.patch + ": trailing bytes after the last bucket");
    check(staged.finish(ph), "PATCH " + a.patch);
    writer.write_until(base.layout().numel(), {});  // empty tensors at the end, if any
  });
  if (!a.quiet) {
    std::printf("apply: %" PRIu64 " of %" PRIu64 " elements changed in %u buckets; base and target checksums verified; wrote %s\n",
                staged.changed(), staged.numel(), staged.buckets(), a.out.c_str());
    std::fflush(stdout);
  }
  return exit_ok;
}

}  // namespace sparsesync::cli
