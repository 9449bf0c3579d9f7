// Which NCCL library the Python module's NCCL endpoints call (nccl_loader.cpp): the module does not link NCCL,
// so that a process has one NCCL, the one torch already loaded where torch is in use.
#pragma once

#include <string>

namespace sparsesync::python {

struct nccl_library {
  int version = 0;   // NCCL_VERSION_CODE of the library, e.g. 22803
  std::string path;  // the file it was loaded from
};

// Resolves NCCL once (later calls return the same): a libnccl.so.2 already loaded in the process (torch's),
// else $SPARSESYNC_NCCL_LIBRARY, else libnccl.so.2 from the loader's search path. Throws sparsesync::error
// (io) naming what was tried when none loads.
const nccl_library& load_nccl();

}  // namespace sparsesync::python
