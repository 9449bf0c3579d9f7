// The session protocol (sync/protocol.hpp) and its parser in the receiver (sync/receiver.hpp). Input: a
// selector byte (bit 0: the receiver holds the golden base as version 41; bits 1..: the golden dtype), then
// the sender's messages, each as a 16-bit little-endian length and that many bytes; the input's end is the
// sender closing the connection in order.
// Properties: every message that decodes as hello, welcome, ack or nack re-encodes to the same bytes; the
// receiver only ever throws sparsesync::error; after each version it reports, its buffers hold exactly that
// version (content checksum, and the golden target where that is the version's checksum) and it acknowledged
// it; whatever it refuses, and after it, the buffers stay a whole version while it claims one (never torn).
#include "fuzz_support.hpp"

#include "golden_cases.hpp"

#include <sparsesync/core/model_checksum.hpp>
#include <sparsesync/sync/receiver.hpp>

#include <deque>
#include <memory>

namespace {
using namespace sparsesync;

// The sender's side of the connection, scripted by the fuzz input.
struct scripted_transport {
  using transport_concept = transport_tag;
  std::shared_ptr<std::deque<std::vector<std::byte>>> incoming;
  std::shared_ptr<std::vector<std::vector<std::byte>>> sent;

  void send(std::span<const std::byte> frame) { sent->emplace_back(frame.begin(), frame.end()); }
  bool receive(std::vector<std::byte>& out) {
    out.clear();
    if (incoming->empty()) return false;
    out = std::move(incoming->front());
    incoming->pop_front();
    return true;
  }
  void close() noexcept {}
  [[nodiscard]] std::size_t max_frame_size() const noexcept { return 1 << 16; }
};

bool same(const std::vector<std::byte>& a, std::span<const std::byte> b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

// Decoding is the inverse of encoding on every message it accepts.
void check_round_trip(std::span<const std::byte> m) {
  if (sync::hello h; sync::decode(m, h)) FUZZ_CHECK(same(sync::encode(h), m));
  if (sync::welcome w; sync::decode(m, w)) FUZZ_CHECK(same(sync::encode(w), m));
  if (sync::ack a; sync::decode(m, a)) FUZZ_CHECK(same(sync::encode(a), m));
  if (sync::nack n; sync::decode(m, n) && sync::type_of(m) == sync::message_type::nack && m.size() <= 13 + 4096) {
    std::uint32_t code = 0;
    std::memcpy(&code, m.data() + 9, 4);
    if (code <= static_cast<std::uint32_t>(errc::io)) FUZZ_CHECK(same(sync::encode(n), m));
  }
}

struct golden_model {
  golden::golden_inputs in;
  std::uint64_t target_checksum;
};

const golden_model& model(std::size_t i) {
  static const auto all = [] {
    std::vector<std::unique_ptr<golden_model>> v;
    for (std::uint8_t d = 1; is_valid(static_cast<dtype>(d)); ++d) {
      auto in = golden::make_golden_inputs(static_cast<dtype>(d));
      const auto t = model_checksum(in.target.layout, in.target.views());
      v.push_back(std::make_unique<golden_model>(golden_model{std::move(in), t}));
    }
    return v;
  }();
  return *all[i % all.size()];
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::cursor in(data, size);
  const std::uint8_t selector = in.byte();
  scripted_transport link{std::make_shared<std::deque<std::vector<std::byte>>>(),
                          std::make_shared<std::vector<std::vector<std::byte>>>()};
  while (!in.empty()) {
    const auto bytes = in.take(in.u16());
    const auto* p = reinterpret_cast<const std::byte*>(bytes.data());
    link.incoming->emplace_back(p, p + bytes.size());
    check_round_trip(link.incoming->back());
  }

  const golden_model& g = model(selector >> 1);
  test::host_model weights = g.in.base;
  const auto buffers = weights.mutable_views();
  const auto holds = [&](std::uint64_t checksum) { return model_checksum(weights.layout, weights.views()) == checksum; };
  sync::receiver_options opt;
  opt.has_version = selector & 1;
  opt.version = golden::golden_base_version;
  auto sent = link.sent;
  std::optional<sync::receiver<scripted_transport>> rx;
  try {
    rx.emplace(weights.layout, buffers, std::move(link), opt);
  } catch (const error&) {
    FUZZ_CHECK(weights == g.in.base);
    return 0;
  }
  for (;;) {
    try {
      const auto v = rx->next();
      if (!v) break;
      FUZZ_CHECK(rx->has_version() && rx->version() == v->version && rx->checksum() == v->checksum);
      FUZZ_CHECK(holds(v->checksum));
      if (v->checksum == g.target_checksum) FUZZ_CHECK(weights == g.in.target);
      sync::ack a;
      FUZZ_CHECK(!sent->empty() && sync::decode(sent->back(), a) && a.version == v->version && a.checksum == v->checksum);
    } catch (const error&) {
      // A refused version is followed by more (the sender's full transfer): read on. Every next() takes at
      // least one message, so the loop ends with the input.
      if (rx->has_version()) FUZZ_CHECK(holds(rx->checksum()));
    }
  }
  return 0;
}
