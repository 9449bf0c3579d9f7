// What `auto` (best_of) weighs an encoder that reads the base against: the link a patch crosses and the time
// its receivers spend decoding it.
//
// entropy (the one built-in encoder that reads the base) spends ~1.4x fewer bits per change than rice, but its
// decoder walks the whole base to learn the classes, where rice's touches only the changes. Which wins depends on
// the link: a bucket's bytes saved cross it in saved / bytes_per_second seconds; the walk costs receivers
// numel * extra_decode_seconds_per_element. best_of counts that walk as the bytes the link would carry in the
// same time, and takes a base reader for a bucket only when its frame plus those bytes is still the smallest.
// With no link speed stated it takes no base reader at all (where another member can encode the bucket), so
// today's payloads and encode cost stay what they were for callers that never set one.
#pragma once

#include <sparsesync/core/config.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

SPARSESYNC_NS_BEGIN

struct link_cost {
  // Per element of a bucket, what a base reader's decode costs a receiver beyond rice's, measured beside rice's in
  // the same runs on BF16 weights at ~1% density:
  // - a GPU receiver, verified apply of 7e9 elements on an H100: entropy 30.7 ms, rice 9.7 ms (session 19,
  //   bench/results/gpu-h100-entropy.md): 3.0 ps an element; on an H200 with this tree's kernels, 7.6e9 elements
  //   with the base known: 31.06 ms against 10.59 (session 28, gpu-test-runs/s28/callB): 2.7 ps;
  static constexpr double gpu_receiver = 3.0e-12;
  // - a CPU receiver, one core of an AMD EPYC (Zen 4), apply with the base known, real stream steps 1 and 24:
  //   entropy 1.07 / 1.73 GB/s, rice 2.03 / 8.90 GB/s of model (session 26, bench/results/entropy-cpu.md):
  //   0.88 / 0.93 ns an element.
  static constexpr double cpu_receiver = 0.9e-9;

  double bytes_per_second = 0;  // the link's speed; 0 (or less): not stated
  double extra_decode_seconds_per_element = gpu_receiver;

  constexpr bool stated() const { return bytes_per_second > 0; }
  // The bytes the link carries while a receiver walks a bucket of `numel` elements.
  constexpr double walk_as_bytes(std::uint64_t numel) const {
    return stated() ? static_cast<double>(numel) * extra_decode_seconds_per_element * bytes_per_second : 0.0;
  }
  // A link of `gbps` gigabits a second.
  static constexpr link_cost gigabits(double gbps, double extra = gpu_receiver) { return {gbps * 1e9 / 8, extra}; }
  // The walk's cost for receivers named "gpu" or "cpu" (the CLI's --receivers, Python's receivers=); none for
  // another name.
  static constexpr std::optional<double> receivers_named(std::string_view name) {
    if (name == "gpu") return gpu_receiver;
    if (name == "cpu") return cpu_receiver;
    return std::nullopt;
  }
};

SPARSESYNC_NS_END
