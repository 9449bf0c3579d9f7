// Full transfers at memory speed (format/dense_bitmap.hpp, sync/full_transfer.hpp): the dense frames are the
// bytes encode_bucket<bitmap> writes, a receiver reads them into memory that was never zeroed, damaged ones are
// refused, and a full transfer in flight survives a publish that changes the snapshot under it.
#include "../core/test_models.hpp"

#include <doctest/doctest.h>
#include <sparsesync/format/apply.hpp>
#include <sparsesync/core/hash_x86.hpp>
#include <sparsesync/format/dense_bitmap.hpp>
#include <sparsesync/sync/receiver.hpp>
#include <sparsesync/sync/sender.hpp>
#include <sparsesync/transport/inproc.hpp>

#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

using namespace sparsesync;
using namespace sparsesync::test;

namespace {

// Odd sizes (segments start and end inside chunks and 64-element blocks), three word sizes.
model_layout mixed_layout() {
  return model_layout({{"emb", dtype::bf16, {37, 211}}, {"f8", dtype::f8_e4m3, {1001}}, {"w", dtype::bf16, {3, 1000}},
                       {"s", dtype::f32, {777}}, {"ln", dtype::bf16, {5}}});
}

// Random weights with zeros: single ones, whole 64-element blocks, a whole 256-element chunk of "w".
host_model weights_with_zeros(const model_layout& layout, std::uint64_t seed) {
  host_model m(layout);
  fill_random(m, seed);
  std::mt19937_64 rng(seed + 1);
  for (std::size_t t = 0; t < layout.size(); ++t)
    for (std::uint64_t i = 0; i < layout[t].numel(); ++i)
      if (rng() % 7 == 0) m.set(t, i, 0);
  for (std::uint64_t i = 64; i < 128; ++i) m.set(0, i, 0);
  for (std::uint64_t i = 512; i < 768; ++i) m.set(2, i, 0);
  for (std::uint64_t i = 0; i < layout[3].numel(); ++i)  // elements that are 0 in their low byte only stay changes
    if (i % 5 == 0) m.set(3, i, 0x100);
  return m;
}

std::vector<const_tensor_view> zero_views(const model_layout& layout) {
  std::vector<const_tensor_view> v;
  for (const auto& t : layout.tensors()) v.push_back({nullptr, t.numel(), t.dtype});
  return v;
}

std::vector<unsigned char> bitmap_full_patch(const host_model& m, unsigned log2_chunk, std::size_t bucket_bytes) {
  patch_options po;
  po.encode = {value_mode::absolute, log2_chunk};
  const auto z = zero_views(m.layout);
  const auto t = m.views();
  return encode_patch<bitmap>(m.layout, z, t, po, fixed_bytes{bucket_bytes});
}

// The bytes of a stream's messages as one patch: prologue (its header replaced by the final one), buckets.
std::vector<unsigned char> patch_of(sync::version_stream& s) {
  std::vector<unsigned char> out;
  std::vector<unsigned char> final_header;
  for (std::size_t i = 0;; ++i) {
    const auto e = s.wait_for_entry(i);
    if (!e.host) break;
    const auto body = sync::body_of(*e.host);
    if (sync::type_of(*e.host) == sync::message_type::version_end) final_header.assign(body.begin(), body.end());
    else out.insert(out.end(), body.begin(), body.end());
  }
  REQUIRE(final_header.size() == patch_header_bytes);
  std::copy(final_header.begin(), final_header.end(), out.begin());
  return out;
}

// Staged into memory full of garbage through write_full_into, as host_sink does for a full transfer.
status read_full(const std::vector<unsigned char>& patch, host_model& into) {
  patch_prologue pro;
  if (auto s = parse_patch_prologue(patch, pro); !s) return s;
  for (auto& t : into.tensors) std::fill(t.begin(), t.end(), static_cast<unsigned char>(0xA5));
  const auto current = zero_views(into.layout);
  const auto out = into.mutable_views();
  staged_patch staged(into.layout, current);
  staged.stream_to([&](std::uint64_t, std::span<const staged_change> c) { detail::write_changes(out, c); });
  staged.write_full_into(out);
  std::size_t pos = pro.bytes;
  for (std::uint32_t b = 0; b < pro.header.bucket_count; ++b) {
    std::size_t used = 0;
    if (auto s = staged.add_bucket(std::span(patch).subspan(pos), used); !s) return s;
    pos += used;
  }
  return staged.finish(pro.header);
}

// Recomputes bucket 0's payload and header checksums after a test changed its bytes.
void reseal_first_bucket(std::vector<unsigned char>& patch, std::size_t at) {
  using namespace detail;
  bucket_header h;
  REQUIRE(read_bucket_header(std::span(patch).subspan(at), h).ok());
  unsigned char* seg = patch.data() + at + bucket_header_bytes;
  unsigned char* table = seg + segment_entry_bytes * h.segment_count;
  const unsigned char* data = table + chunk_entry_bytes * h.chunk_count;
  std::uint64_t payload = stream_hash(seg, segment_entry_bytes * h.segment_count, 0), offset = 0;
  for (std::uint32_t c = 0; c < h.chunk_count; ++c) {
    const unsigned char* e = table + chunk_entry_bytes * c;
    const auto bytes = load_le<std::uint32_t>(e + 4);
    stream_hasher hs(c);
    hs.update(e, chunk_entry_bytes);
    hs.update(data + offset, bytes);
    payload += hs.digest();
    offset += bytes;
  }
  h.payload_checksum = payload;
  write_bucket_header(patch.data() + at, h);
}

}  // namespace

TEST_CASE("dense full-transfer frames are the bytes encode_bucket<bitmap> writes from the zero model") {
  const auto layout = mixed_layout();
  const auto m = weights_with_zeros(layout, 11);
  const auto z = zero_views(layout);
  const auto t = m.views();
  for (unsigned log2_chunk : {8u, 10u}) {
    for (std::size_t bucket_bytes : {std::size_t{3000}, std::size_t{1} << 20}) {
      const auto plans = fixed_bytes{bucket_bytes}.plan(layout, log2_chunk);
      for (std::size_t i = 0; i < plans.size(); ++i) {
        std::vector<unsigned char> ref;
        const auto [base, target] = encode_bucket<bitmap>(layout, plans[i], static_cast<std::uint32_t>(i), z, t,
                                                          {value_mode::absolute, log2_chunk}, ref);
        std::vector<unsigned char> dense(detail::dense_frame_bound(plans[i], log2_chunk));
        bucket_checksums sums;
        const std::size_t n = visit_word(plans[i].dtype, [&]<class W>() {
          return detail::write_dense_bucket<W>(layout, plans[i], static_cast<std::uint32_t>(i), t, log2_chunk, std::nullopt, dense.data(), &sums);
        });
        dense.resize(n);
        CHECK(dense == ref);
        CHECK(sums.base == base);
        CHECK(sums.target == target);
        // With the checksums given (a sender's record of its snapshot) nothing is hashed: the same bytes.
        std::vector<unsigned char> known(detail::dense_frame_bound(plans[i], log2_chunk));
        const std::size_t k = visit_word(plans[i].dtype, [&]<class W>() {
          return detail::write_dense_bucket<W>(layout, plans[i], static_cast<std::uint32_t>(i), t, log2_chunk, bucket_checksums{base, target},
                                               known.data());
        });
        known.resize(k);
        CHECK(known == ref);
        const auto summary = visit_word(plans[i].dtype, [&]<class W>() { return detail::summarize_dense_bucket<W>(layout, plans[i], t, log2_chunk); });
        CHECK(summary.frame_bytes == ref.size());
        CHECK(summary.sums.target == target);
      }
    }
  }
}

TEST_CASE("the dense checksums (eight elements at a time where the CPU has AVX-512) are the element hashes' sums") {
  std::mt19937_64 rng(21);
  std::vector<std::uint32_t> words(700);
  for (auto& w : words) w = static_cast<std::uint32_t>(rng());
  words[3] = 0;
  words[4] = 0xFFFFFFFFu;
  const auto check = [&]<class W>(std::uint64_t first, std::size_t offset, std::size_t count) {
    std::vector<W> bits(count);
    for (std::size_t i = 0; i < count; ++i) bits[i] = static_cast<W>(words[(offset + i) % words.size()]);
    std::uint64_t zero = 5, target = 7;  // added to, not overwritten
    detail::add_zero_and_content_checksums(bits.data(), count, first, zero, target);
    std::uint64_t z = 5, t = 7;
    for (std::size_t i = 0; i < count; ++i) {
      z += element_hash(first + i, 0);
      t += element_hash(first + i, bits[i]);
    }
    CHECK(zero == z);
    CHECK(target == t);
  };
  // Lengths around the 8-element step, indices where the low or high 32 bits carry, words of every size.
  for (std::uint64_t first : {std::uint64_t{0}, std::uint64_t{0xFFFFFFF9}, ~std::uint64_t{0} - 20, rng(), rng()}) {
    for (std::size_t count : {0u, 1u, 7u, 8u, 9u, 16u, 63u, 64u, 65u, 333u}) {
      const std::size_t offset = static_cast<std::size_t>(rng() % 97);
      check.template operator()<std::uint8_t>(first, offset, count);
      check.template operator()<std::uint16_t>(first, offset, count);
      check.template operator()<std::uint32_t>(first, offset, count);
    }
  }
}

TEST_CASE("host_source's full transfers are encode_patch<bitmap>'s patch, byte for byte") {
  const auto layout = mixed_layout();
  const auto m = weights_with_zeros(layout, 12);
  sync::host_source<> src;
  const encode_options enc{value_mode::ulp, 8};
  src.prepare(layout, enc, fixed_bytes{3000});
  patch_options po;
  po.target_version = 7;
  po.include_layout = false;
  const std::vector<unsigned char> meta{1, 2, 3};
  po.metadata = meta;
  patch_options ref_po = po;
  ref_po.encode = {value_mode::absolute, 8};
  const auto z = zero_views(layout);
  const auto t = m.views();
  const auto ref = encode_patch<bitmap>(layout, z, t, ref_po, fixed_bytes{3000});
  sync::version_stream first;
  (void)src.encode_version(t, po, first);  // the first version: from zero, hashed
  CHECK(patch_of(first) == ref);
  sync::version_stream again;
  src.encode_full(po, again);  // from the snapshot, with the recorded checksums
  CHECK(patch_of(again) == ref);
  // Bucket by bucket, as the sender sends it.
  const auto frames = src.full_transfer_frames(po);
  std::vector<unsigned char> pieces(frames.final_header.begin(), frames.final_header.end());
  pieces.insert(pieces.end(), frames.prologue.begin() + patch_header_bytes, frames.prologue.end());
  for (std::size_t i = 0; i < frames.buckets; ++i) {
    const auto msg = src.encode_full_bucket(i);
    const auto body = sync::body_of(*msg);
    pieces.insert(pieces.end(), body.begin(), body.end());
  }
  CHECK(pieces == ref);
  // Again in reverse, holding every frame: buffers that held other buckets' frames (host_source recycles the
  // frames it sent) and fresh ones give the same bytes.
  REQUIRE(frames.buckets > 2);
  std::vector<std::shared_ptr<const std::vector<std::byte>>> held(frames.buckets);
  for (std::size_t i = frames.buckets; i-- > 0;) held[i] = src.encode_full_bucket(i);
  std::vector<unsigned char> again_pieces(pieces.begin(), pieces.begin() + static_cast<std::ptrdiff_t>(frames.prologue.size()));
  for (const auto& msg : held) {
    const auto body = sync::body_of(*msg);
    again_pieces.insert(again_pieces.end(), body.begin(), body.end());
  }
  CHECK(again_pieces == ref);
  // capture() (a first version sent only bucket by bucket) records the same checksums and sizes.
  sync::host_source<> cap;
  cap.prepare(layout, enc, fixed_bytes{3000});
  const auto rep = cap.capture(t, po);
  CHECK(rep.payload_bytes == ref.size());
  const auto cap_frames = cap.full_transfer_frames(po);
  CHECK(cap_frames.final_header == frames.final_header);
  CHECK(rep.target_checksum == frames.target_checksum);
}

TEST_CASE("a full transfer is read into memory that was never zeroed, dense or not") {
  const auto layout = mixed_layout();
  const auto m = weights_with_zeros(layout, 13);
  host_model got(layout);
  REQUIRE(read_full(bitmap_full_patch(m, 8, 3000), got).ok());
  CHECK(got == m);
  // Another encoder's full transfer (an older or GPU sender's): its buckets are zeroed, then changes written.
  patch_options po;
  po.encode = {value_mode::absolute, 9};
  const auto z = zero_views(layout);
  const auto t = m.views();
  host_model got_rice(layout);
  REQUIRE(read_full(encode_patch<rice>(layout, z, t, po, fixed_bytes{3000}), got_rice).ok());
  CHECK(got_rice == m);
  // And the all-zero model itself (chunks without changes).
  host_model zeros(layout);
  host_model got_zero(layout);
  REQUIRE(read_full(bitmap_full_patch(zeros, 8, 3000), got_zero).ok());
  CHECK(got_zero == zeros);
}

TEST_CASE("damaged dense chunks are refused") {
  const auto layout = model_layout({{"w", dtype::bf16, {4096}}});
  host_model m(layout);
  fill_random(m, 14);
  for (std::uint64_t i = 0; i < 4096; ++i)
    if (m.get(0, i) == 0) m.set(0, i, 1);
  const auto good = bitmap_full_patch(m, 8, 1 << 20);
  patch_prologue pro;
  REQUIRE(parse_patch_prologue(good, pro).ok());
  const std::size_t at = pro.bytes;
  bucket_header h;
  REQUIRE(detail::read_bucket_header(std::span(good).subspan(at), h).ok());
  const std::size_t data_at = at + bucket_header_bytes + segment_entry_bytes * h.segment_count + chunk_entry_bytes * h.chunk_count;
  const std::size_t mask_bytes = 256 / 8;  // chunk 0: 256 elements, all nonzero
  host_model got(layout);
  {
    auto p = good;  // a zero value: a change that changes nothing
    p[data_at + mask_bytes + 2 * 7] = 0;
    p[data_at + mask_bytes + 2 * 7 + 1] = 0;
    reseal_first_bucket(p, at);
    CHECK(read_full(p, got).code() == errc::non_canonical);
  }
  {
    auto p = good;  // one mask bit cleared: fewer set bits than the chunk's change count
    p[data_at + 3] &= 0xFE;
    reseal_first_bucket(p, at);
    CHECK(read_full(p, got).code() == errc::malformed);
  }
  {
    auto p = good;  // one value bit flipped: not the sender's weights
    p[data_at + mask_bytes + 100] ^= 0x10;
    reseal_first_bucket(p, at);
    CHECK(read_full(p, got).code() == errc::target_mismatch);
  }
  {
    auto p = good;  // the bucket claims another base
    bucket_header bh;
    REQUIRE(detail::read_bucket_header(std::span(p).subspan(at), bh).ok());
    bh.base_checksum ^= 1;
    detail::write_bucket_header(p.data() + at, bh);
    CHECK(read_full(p, got).code() == errc::base_mismatch);
  }
  {
    auto p = good;  // a byte changed without resealing: the payload checksum catches it first
    p[data_at + mask_bytes + 5] ^= 1;
    CHECK(read_full(p, got).code() == errc::payload_checksum);
  }
  REQUIRE(read_full(good, got).ok());
  CHECK(got == m);
}

namespace {

// The receiver's end of a connection that stops before the second bucket message until released: the sender's
// session is then blocked mid full transfer (the inproc queue holds one frame).
class gated_link {
 public:
  using transport_concept = transport_tag;
  explicit gated_link(inproc_transport inner) : inner_(std::move(inner)) {}
  gated_link(gated_link&& o) noexcept : inner_(std::move(o.inner_)), state_(std::move(o.state_)) {}

  void send(std::span<const std::byte> m) { inner_.send(m); }
  bool receive(std::vector<std::byte>& out) {
    {
      std::unique_lock lock(state_->mutex);
      if (state_->buckets == 1) {
        state_->held = true;
        state_->cv.notify_all();
        state_->cv.wait(lock, [&] { return state_->open; });
      }
    }
    if (!inner_.receive(out)) return false;
    if (sync::type_of(out) == sync::message_type::bucket) {
      std::lock_guard lock(state_->mutex);
      ++state_->buckets;
    }
    return true;
  }
  void close() noexcept { inner_.close(); }
  [[nodiscard]] std::size_t max_frame_size() const noexcept { return inner_.max_frame_size(); }

  struct state {
    std::mutex mutex;
    std::condition_variable cv;
    int buckets = 0;
    bool held = false, open = false;
  };
  [[nodiscard]] std::shared_ptr<state> gate() const { return state_; }

 private:
  inproc_transport inner_;
  std::shared_ptr<state> state_ = std::make_shared<state>();
};

}  // namespace

TEST_CASE("a full transfer in flight across a publish: the receiver gets the old version whole, then the patch") {
  const auto layout = model_layout({{"a", dtype::bf16, {300, 301}}, {"b", dtype::f32, {4099}}});
  host_model trainer(layout);
  fill_random(trainer, 15);
  sync::sender_options so;
  so.encode.log2_chunk = 9;
  so.ack_timeout = std::chrono::milliseconds(200);
  using tx_t = sync::sender<auto_encoder, fixed_bytes, inproc_transport>;
  tx_t tx(layout, so, fixed_bytes{8192});
  tx.publish(1, trainer.views());
  const host_model v1 = trainer;

  inproc_options io;
  io.max_queued_bytes = 1;  // one frame in flight: the session blocks in send until the receiver reads
  auto [a, b] = make_inproc_pair(io);
  tx.add_receiver(std::move(b));
  host_model worker(layout);
  fill_random(worker, 99);  // whatever was there: a full transfer overwrites every element
  auto views = worker.mutable_views();
  gated_link link(std::move(a));
  const auto gate = link.gate();
  sync::receiver<gated_link> rx(layout, views, std::move(link));
  std::vector<sync::applied_version> applied;
  std::thread rx_thread([&] {
    try {
      while (auto v = rx.next()) {
        applied.push_back(*v);
        if (v->version == 2) break;
      }
    } catch (const std::exception& e) {
      MESSAGE("receiver: " << e.what());
    }
  });
  {
    std::unique_lock lock(gate->mutex);
    REQUIRE(gate->cv.wait_for(lock, std::chrono::seconds(20), [&] { return gate->held; }));
  }
  // The session is mid full transfer of version 1; version 2 changes the snapshot in place.
  perturb_ulp(trainer, 0.05, 16);
  const auto rep = tx.publish(2, trainer.views());
  CHECK(rep.acknowledged == 0);
  {
    std::lock_guard lock(gate->mutex);
    gate->open = true;
  }
  gate->cv.notify_all();
  rx_thread.join();
  REQUIRE(applied.size() == 2);
  CHECK(applied[0].version == 1);
  CHECK(applied[0].full);
  CHECK(applied[1].version == 2);
  CHECK_FALSE(applied[1].full);
  CHECK(worker == trainer);
  const auto st = tx.receivers();
  REQUIRE(st.size() == 1);
  CHECK(st[0].full_transfers == 1);
  tx.close();
  CHECK(v1 != trainer);
}

TEST_CASE("receivers present at the first publish take it bucket by bucket and are not counted as full transfers") {
  const auto layout = model_layout({{"a", dtype::bf16, {500, 70}}, {"b", dtype::f8_e5m2, {999}}});
  host_model trainer(layout);
  fill_random(trainer, 17);
  sync::sender_options so;
  so.encode.log2_chunk = 8;
  using tx_t = sync::sender<auto_encoder, fixed_bytes, inproc_transport>;
  tx_t tx(layout, so, fixed_bytes{4096});
  std::vector<std::unique_ptr<host_model>> models;
  std::vector<std::unique_ptr<sync::receiver<inproc_transport>>> rxs;
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    auto [a, b] = make_inproc_pair();
    tx.add_receiver(std::move(b));
    models.push_back(std::make_unique<host_model>(layout));
    auto v = models.back()->mutable_views();
    rxs.push_back(std::make_unique<sync::receiver<inproc_transport>>(layout, v, std::move(a)));
  }
  REQUIRE(tx.wait_for_receivers(3, std::chrono::seconds(20)));
  for (auto& r : rxs) threads.emplace_back([&r] { (void)r->next(); });
  const auto rep = tx.publish(1, trainer.views());
  for (auto& t : threads) t.join();
  CHECK(rep.acknowledged == 3);
  CHECK(rep.changed <= layout.numel());
  CHECK(rep.payload_bytes > layout.bytes());
  for (auto& m : models) CHECK(*m == trainer);
  for (const auto& s : tx.receivers()) CHECK(s.full_transfers == 0);
  tx.close();
}
