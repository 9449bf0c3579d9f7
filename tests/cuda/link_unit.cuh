// The body of the two-translation-unit link test (link_a.cu, link_b.cu include it): every public .cuh header,
// and the public entry points instantiated and called, so that both object files carry every kernel and every
// inline function of the CUDA layer. A header that defines a non-template kernel, a non-inline function or a
// device variable makes the two objects collide at link time ("multiple definition of ...").
#pragma once

#include <sparsesync/bucketing/fixed_bytes.hpp>
#include <sparsesync/cuda/apply.cuh>
#include <sparsesync/cuda/codec.cuh>
#include <sparsesync/cuda/config.cuh>
#include <sparsesync/cuda/encode.cuh>
#include <sparsesync/cuda/plan.cuh>
#include <sparsesync/cuda/sync/frame_sync.cuh>
#include <sparsesync/cuda/types.cuh>
#if defined(SPARSESYNC_LINK_TEST_NCCL)
#include <sparsesync/cuda/sync/nccl_sync.cuh>
#endif

#include "gpu_sync_fixtures.hpp"

#include <cstdio>
#include <memory>
#include <random>
#include <vector>

namespace sparsesync_test {
namespace {  // each translation unit has its own copy: they share only the library's symbols

// One RL-like step of the test model, encoded bucket by bucket with `enc` (encode_plan) and applied to a copy
// of the base (apply_plan); true when the copy then holds the target.
bool link_roundtrip(sparsesync::encoder_id enc) {
  const auto layout = test_layout();
  const auto base = random_weights(layout.numel());
  auto target = base;
  std::mt19937_64 rng(11);
  step(target, rng);
  device_model d_base(layout), d_target(layout), d_worker(layout);
  d_base.upload(base);
  d_target.upload(target);
  d_worker.upload(base);
  sc::encode_config cfg;
  cfg.encoder = enc;
  cfg.mode = sparsesync::value_mode::ulp;
  const auto plans = sparsesync::fixed_bytes{1u << 20}.plan(layout, cfg.log2_chunk);
  std::vector<std::unique_ptr<sc::encode_plan>> encoders;  // frames stay alive until the apply is done
  sc::apply_plan applier(layout);
  for (std::size_t b = 0; b < plans.size(); ++b) {
    cfg.bucket_index = static_cast<std::uint32_t>(b);
    encoders.push_back(std::make_unique<sc::encode_plan>(layout, plans[b], cfg));
    encoders.back()->encode(d_base.pointers(), d_target.pointers());
    applier.apply(encoders.back()->frame(), encoders.back()->frame_bytes(), d_worker.pointers());
  }
  const auto report = applier.result();
  const bool ok = report.status.ok() && report.committed == plans.size() && d_worker.download() == target;
  if (!ok) std::printf("link roundtrip with encoder %d failed: %s\n", static_cast<int>(enc), report.status.message().c_str());
  return ok;
}

// Entry points the roundtrip does not call: instantiated (their addresses taken), not run (they need a peer).
[[maybe_unused]] void* volatile link_sink = nullptr;
void instantiate_other_entry_points() {
  link_sink = reinterpret_cast<void*>(&sc::encode_bucket_detect<>);
  link_sink = reinterpret_cast<void*>(&sc::make_any_frame_publisher);
  link_sink = reinterpret_cast<void*>(&sc::make_any_frame_subscriber);
#if defined(SPARSESYNC_LINK_TEST_NCCL)
  link_sink = reinterpret_cast<void*>(+[](const sparsesync::model_layout& l, std::vector<sparsesync::bucket_plan> p, sparsesync::nccl_broadcast_channel& ch) {
    return std::make_unique<sc::nccl_publisher>(l, std::move(p), sc::encode_config{}, ch, nullptr, nullptr);
  });
  link_sink = reinterpret_cast<void*>(+[](const sparsesync::model_layout& l, sparsesync::nccl_broadcast_channel& ch) {
    return std::make_unique<sc::nccl_subscriber>(l, ch, nullptr, nullptr);
  });
#endif
}

// Failures of the roundtrips, one per built-in encoder with a device twin.
int link_unit_failures() {
  instantiate_other_entry_points();
  int failures = 0;
  for (const auto& row : sparsesync::encoder_table)
    if (row.gpu) failures += link_roundtrip(row.id) ? 0 : 1;
  return failures;
}

}  // namespace
}  // namespace sparsesync_test
