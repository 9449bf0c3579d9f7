// Build configuration shared by host and device code.
#pragma once

#define SPARSESYNC_VERSION_MAJOR 0
#define SPARSESYNC_VERSION_MINOR 1
#define SPARSESYNC_VERSION_PATCH 0

// One macro makes codec helpers callable from CUDA kernels when compiled by nvcc and plain inline
// functions otherwise, so the host codec (the specification) and the device codec share arithmetic.
#if defined(__CUDACC__)
#define SPARSESYNC_HD __host__ __device__ __forceinline__
#else
#define SPARSESYNC_HD inline
#endif

// A host loop unrolled n times where the compiler takes GCC's pragma (GCC and clang compiling host code); nvcc's
// front end, which sees the host code of .cu files, warns on it ("unrecognized GCC pragma"), and MSVC would too.
#if defined(__GNUC__) && !defined(__CUDACC__)
#define SPARSESYNC_HOST_UNROLL_PRAGMA(x) _Pragma(#x)
#define SPARSESYNC_HOST_UNROLL(n) SPARSESYNC_HOST_UNROLL_PRAGMA(GCC unroll n)
#else
#define SPARSESYNC_HOST_UNROLL(n)
#endif

// A small host function inlined into its hot callers where the compiler's size limits would leave a call
// (the entropy decoder's Rice reads: a call each took ~10% of its apply at 3.6% density).
#if defined(__GNUC__)
#define SPARSESYNC_ALWAYS_INLINE [[gnu::always_inline]] inline
#elif defined(_MSC_VER)
#define SPARSESYNC_ALWAYS_INLINE __forceinline
#else
#define SPARSESYNC_ALWAYS_INLINE inline
#endif

// Kernels and device helpers live in a versioned inline namespace: two shared libraries built with
// different sparsesync versions cannot silently pick up each other's weak kernel symbols.
#define SPARSESYNC_NS_BEGIN namespace sparsesync { inline namespace v0_1 {
#define SPARSESYNC_NS_END } }
