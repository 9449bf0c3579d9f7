// The NCCL functions the NCCL endpoints call (nccl_link, nccl.hpp), defined here as forwards to the library
// load_nccl() finds at run time. Linking libnccl into the module instead would make the process load whichever
// libnccl.so.2 the dynamic loader meets first: the system's one could then stand in for torch's inside torch.
// These definitions are hidden (the module is built with -fvisibility=hidden), so they never interpose on the
// NCCL of other libraries in the process.
#include "nccl_loader.hpp"

#include <sparsesync/core/error.hpp>

#include <nccl.h>

#include <dlfcn.h>

#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <type_traits>

namespace sparsesync::python {
namespace {

struct nccl_api {
  void* handle = nullptr;
  nccl_library info;
#define SPARSESYNC_NCCL_FN(name) decltype(&::name) name = nullptr;
  SPARSESYNC_NCCL_FN(ncclGetVersion)
  SPARSESYNC_NCCL_FN(ncclGetErrorString)
  SPARSESYNC_NCCL_FN(ncclGetLastError)
  SPARSESYNC_NCCL_FN(ncclGetUniqueId)
  SPARSESYNC_NCCL_FN(ncclCommInitRank)
  SPARSESYNC_NCCL_FN(ncclCommInitRankConfig)
  SPARSESYNC_NCCL_FN(ncclCommAbort)
  SPARSESYNC_NCCL_FN(ncclCommDestroy)
  SPARSESYNC_NCCL_FN(ncclCommGetAsyncError)
  SPARSESYNC_NCCL_FN(ncclCommSplit)
  SPARSESYNC_NCCL_FN(ncclCommUserRank)
  SPARSESYNC_NCCL_FN(ncclSend)
  SPARSESYNC_NCCL_FN(ncclRecv)
  SPARSESYNC_NCCL_FN(ncclBroadcast)
#undef SPARSESYNC_NCCL_FN
};

nccl_api load() {
  nccl_api api;
  std::string tried;
  // Already in the process (torch imported first): use that very library.
  api.handle = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  tried = "an already loaded libnccl.so.2";
  if (!api.handle) {
    if (const char* path = std::getenv("SPARSESYNC_NCCL_LIBRARY"); path && *path) {
      api.handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
      tried += std::string(", $SPARSESYNC_NCCL_LIBRARY=") + path;
    }
  }
  if (!api.handle) {
    api.handle = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    tried += ", libnccl.so.2 on the loader's search path";
  }
  if (!api.handle) {
    const char* why = ::dlerror();
    throw error(errc::io, "NCCL not found (tried " + tried + "): install it (pip install nvidia-nccl-cu13, or torch), or set "
                          "SPARSESYNC_NCCL_LIBRARY to a libnccl.so.2" + (why ? std::string(": ") + why : std::string()));
  }
  const auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(api.handle, name));
    if (!fn) throw error(errc::io, std::string("the NCCL library found has no ") + name + " (too old: NCCL 2.19 or newer is needed)");
  };
#define SPARSESYNC_NCCL_SYM(name) sym(api.name, #name);
  SPARSESYNC_NCCL_SYM(ncclGetVersion)
  SPARSESYNC_NCCL_SYM(ncclGetErrorString)
  SPARSESYNC_NCCL_SYM(ncclGetLastError)
  SPARSESYNC_NCCL_SYM(ncclGetUniqueId)
  SPARSESYNC_NCCL_SYM(ncclCommInitRank)
  SPARSESYNC_NCCL_SYM(ncclCommInitRankConfig)
  SPARSESYNC_NCCL_SYM(ncclCommAbort)
  SPARSESYNC_NCCL_SYM(ncclCommDestroy)
  SPARSESYNC_NCCL_SYM(ncclCommGetAsyncError)
  SPARSESYNC_NCCL_SYM(ncclCommSplit)
  SPARSESYNC_NCCL_SYM(ncclCommUserRank)
  SPARSESYNC_NCCL_SYM(ncclSend)
  SPARSESYNC_NCCL_SYM(ncclRecv)
  SPARSESYNC_NCCL_SYM(ncclBroadcast)
#undef SPARSESYNC_NCCL_SYM
  api.ncclGetVersion(&api.info.version);
  Dl_info where{};
  if (::dladdr(reinterpret_cast<void*>(api.ncclSend), &where) && where.dli_fname) api.info.path = where.dli_fname;
  return api;
}

const nccl_api& api() {
  static std::once_flag once;
  static nccl_api a;
  static std::exception_ptr failure;
  std::call_once(once, [] {
    try {
      a = load();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  if (failure) std::rethrow_exception(failure);
  return a;
}

}  // namespace

const nccl_library& load_nccl() { return api().info; }

}  // namespace sparsesync::python

// The forwards. Each resolves the library on first use; a failure to load is reported by load_nccl(), which
// the endpoints call before any of these.
using sparsesync::python::api;

extern "C" {
ncclResult_t ncclGetVersion(int* version) { return api().ncclGetVersion(version); }
const char* ncclGetErrorString(ncclResult_t result) { return api().ncclGetErrorString(result); }
const char* ncclGetLastError(ncclComm_t comm) { return api().ncclGetLastError(comm); }
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) { return api().ncclGetUniqueId(id); }
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) { return api().ncclCommInitRank(comm, nranks, id, rank); }
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  return api().ncclCommInitRankConfig(comm, nranks, id, rank, config);
}
ncclResult_t ncclCommAbort(ncclComm_t comm) { return api().ncclCommAbort(comm); }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return api().ncclCommDestroy(comm); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) { return api().ncclCommGetAsyncError(comm, error); }
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) { return api().ncclCommUserRank(comm, rank); }
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return api().ncclCommSplit(comm, color, key, newcomm, config);
}
ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  return api().ncclSend(buf, count, type, peer, comm, stream);
}
ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  return api().ncclRecv(buf, count, type, peer, comm, stream);
}
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm, cudaStream_t stream) {
  return api().ncclBroadcast(send, recv, count, type, root, comm, stream);
}
}
