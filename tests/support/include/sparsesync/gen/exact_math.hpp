// Products that the compiler may not fuse into an FMA. Compilers contract a*b+c into one fused
// multiply-add whenever the target has FMA (GCC's default -ffp-contract=fast with -march=native, Clang's
// -ffp-contract=on, nvcc's --fmad=true), which rounds once instead of twice and changes the generator's
// bits between builds. Routing every product that feeds an addition through `mul` pins the rounding, so
// the stream is the same for every compiler and flag set (short of -ffast-math) and for a CUDA port.
#pragma once

#include <sparsesync/core/config.hpp>

SPARSESYNC_NS_BEGIN
namespace gen {
namespace detail {

SPARSESYNC_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);  // documented never to be contracted
#else
  float p = a * b;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+x"(p));  // an opaque register round trip: the product must exist, rounded, before any add
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(p));
#endif
  return p;
#endif
}

SPARSESYNC_HD double mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  double p = a * b;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+x"(p));
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(p));
#endif
  return p;
#endif
}

// a * b + c with two roundings, never fused.
template <class T>
SPARSESYNC_HD T mul_add(T a, T b, T c) {
  return mul(a, b) + c;
}

}  // namespace detail
}  // namespace gen
SPARSESYNC_NS_END
