// The `bucketing_policy` concept: how a model is cut into buckets, the unit of encoding, framing,
// checksumming, pipelining and transmission.
#pragma once

#include <sparsesync/bucketing/bucket_plan.hpp>
#include <sparsesync/core/layout.hpp>

#include <concepts>
#include <vector>

SPARSESYNC_NS_BEGIN

struct bucketing_policy_tag {};

// A type P is a `bucketing_policy` when:
//  1. it opts in with `using bucketing_policy_concept = sparsesync::bucketing_policy_tag;`
//  2. `p.plan(layout, log2_chunk)` on a const P returns `std::vector<sparsesync::bucket_plan>` whose segments,
//     taken in order, tile every non-empty tensor of the layout exactly once in layout order
//     (the wire format checks this tiling on the receiving side);
//  3. every bucket holds tensors of a single dtype and at least one element.
// Receivers never run the policy: the segments travel in each bucket header, so sender and receiver
// may use different policies and builds.
namespace detail {
// One concept per requirement a compiler can check; the tiling of 2 and requirement 3 are run-time properties
// that the receiver's validating reader checks (format/bucket_reader.hpp).
template <class P>
concept bucketing_policy_req1_opts_in =
    requires { requires std::same_as<typename P::bucketing_policy_concept, bucketing_policy_tag>; };
template <class P>
concept bucketing_policy_req2_plan = requires(const P& p, const model_layout& layout, unsigned log2_chunk) {
  { p.plan(layout, log2_chunk) } -> std::same_as<std::vector<bucket_plan>>;
};
}  // namespace detail

template <class P>
concept bucketing_policy = detail::bucketing_policy_req1_opts_in<P> && detail::bucketing_policy_req2_plan<P>;

namespace detail {
template <class P>
struct bucketing_policy_diagnostics {
  static_assert(bucketing_policy_req1_opts_in<P>,
                "sparsesync: bucketing_policy requirement 1: a bucketing policy opts in with `using "
                "bucketing_policy_concept = sparsesync::bucketing_policy_tag;`");
  static_assert(bucketing_policy_req2_plan<P>,
                "sparsesync: bucketing_policy requirement 2: a bucketing policy needs `std::vector<sparsesync::bucket_plan> "
                "plan(const sparsesync::model_layout&, unsigned log2_chunk) const`");
  static constexpr bool value = bucketing_policy<P>;
};
}  // namespace detail

// In templates that take a policy: `static_assert(sparsesync::check_bucketing_policy<P>)` names what P misses.
template <class P>
inline constexpr bool check_bucketing_policy = detail::bucketing_policy_diagnostics<P>::value;

SPARSESYNC_NS_END
