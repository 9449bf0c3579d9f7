// Uniform and normal variates from 32-bit random words, built only from IEEE-754 double operations that
// are correctly rounded everywhere (+, -, *, /, sqrt) and exact bit manipulation. Library log/exp/sin
// differ in their last bits between glibc, other libms and CUDA; these do not, and with every product
// kept unfused (exact_math.hpp) a GPU port or another compiler reproduces the generator bit for bit.
#pragma once

#include <sparsesync/core/config.hpp>
#include <sparsesync/gen/exact_math.hpp>

#include <bit>
#include <cmath>
#include <cstdint>

SPARSESYNC_NS_BEGIN
namespace gen {
namespace detail {

inline constexpr double ln2 = 0.6931471805599453094;

// Natural log of a positive, finite, normal double to ~1e-16 relative: x = 2^e * m with m in
// [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172, so 12 odd terms suffice.
SPARSESYNC_HD double log_det(double x) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  int e = static_cast<int>((bits >> 52) & 0x7FF) - 1023;
  double m = std::bit_cast<double>((bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);
  if (m > 1.4142135623730951) {
    m *= 0.5;
    ++e;
  }
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double series = 1.0 / 25.0;
  for (int k = 11; k >= 0; --k) series = mul_add(series, s2, 1.0 / (2 * k + 1));
  return mul_add(static_cast<double>(e), ln2, mul(2.0 * s, series));
}

// 2^x for |x| < 1000, ~1e-16 relative: 2^x = 2^k * e^(f ln2) with |f| <= 1/2, Taylor to degree 16.
SPARSESYNC_HD double exp2_det(double x) {
  const double kd = x >= 0 ? static_cast<double>(static_cast<long long>(x + 0.5))
                           : -static_cast<double>(static_cast<long long>(-x + 0.5));
  const double r = (x - kd) * ln2;
  double sum = 1.0;
  for (int n = 16; n >= 1; --n) sum = 1.0 + mul(sum, r) / n;
  const int k = static_cast<int>(kd);
  // Scale by 2^k through the exponent field; split in two so intermediate factors stay normal.
  const int k1 = k / 2, k2 = k - k1;
  const double f1 = std::bit_cast<double>(static_cast<std::uint64_t>(1023 + k1) << 52);
  const double f2 = std::bit_cast<double>(static_cast<std::uint64_t>(1023 + k2) << 52);
  return sum * f1 * f2;
}

}  // namespace detail

// (u + 1/2) / 2^32: exact in double, strictly inside (0, 1), symmetric (1 - p(u) == p(~u)).
SPARSESYNC_HD constexpr double uniform_open01(std::uint32_t u) {
  return (static_cast<double>(u) + 0.5) * (1.0 / 4294967296.0);
}

// Standard normal quantile of uniform_open01(u) by Acklam's rational approximation (relative error
// < 1.2e-9, |z| <= 6.3). One word per variate, no rejection: each element owns a fixed lane.
SPARSESYNC_HD double normal_from_u32(std::uint32_t u) {
  constexpr double a0 = -3.969683028665376e+01, a1 = 2.209460984245205e+02, a2 = -2.759285104469687e+02,
                   a3 = 1.383577518672690e+02, a4 = -3.066479806614716e+01, a5 = 2.506628277459239e+00;
  constexpr double b0 = -5.447609879822406e+01, b1 = 1.615858368580409e+02, b2 = -1.556989798598866e+02,
                   b3 = 6.680131188771972e+01, b4 = -1.328068155288572e+01;
  constexpr double c0 = -7.784894002430293e-03, c1 = -3.223964580411365e-01, c2 = -2.400758277161838e+00,
                   c3 = -2.549732539343734e+00, c4 = 4.374664141464968e+00, c5 = 2.938163982698783e+00;
  constexpr double d0 = 7.784695709041462e-03, d1 = 3.224671290700398e-01, d2 = 2.445134137142996e+00,
                   d3 = 3.754408661907416e+00;
  constexpr double p_low = 0.02425;
  // Evaluate the lower half only and mirror it, so z(u) == -z(~u) exactly.
  const bool upper = u >= 0x80000000u;
  const double p = uniform_open01(upper ? ~u : u);
  double z = 0;
  using detail::mul_add;
  if (p < p_low) {
    const double q = std::sqrt(-2.0 * detail::log_det(p));
    const double num = mul_add(mul_add(mul_add(mul_add(mul_add(c0, q, c1), q, c2), q, c3), q, c4), q, c5);
    const double den = mul_add(mul_add(mul_add(mul_add(d0, q, d1), q, d2), q, d3), q, 1.0);
    z = num / den;
  } else {
    const double q = p - 0.5;
    const double r = q * q;
    const double num = mul_add(mul_add(mul_add(mul_add(mul_add(a0, r, a1), r, a2), r, a3), r, a4), r, a5);
    const double den = mul_add(mul_add(mul_add(mul_add(mul_add(b0, r, b1), r, b2), r, b3), r, b4), r, 1.0);
    z = num * q / den;
  }
  return upper ? -z : z;
}

}  // namespace gen
SPARSESYNC_NS_END
