# Finds UCX for sparsesync::ucx, and tells whether it carries CUDA memory (sparsesync::ucx_cuda). Sets
# SPARSESYNC_UCX_INCLUDE_DIR, SPARSESYNC_UCP_LIBRARY, SPARSESYNC_UCS_LIBRARY, SPARSESYNC_UCX_VERSION,
# SPARSESYNC_UCX_CUDA (ON when its module folder holds libuct_cuda: the cuda_copy / cuda_ipc transports) and
# SPARSESYNC_UCX_FOUND_IN (which one, for the status line). Searched in this order, the first with ucp/api/ucp.h,
# libucp and libucs wins:
#   1. SPARSESYNC_UCX_ROOT, then the environment's UCX_ROOT: an install prefix, or the libucx/ folder of the
#      libucx-cu13 wheel (scripts/get_ucx_cuda.sh unpacks it and prints that path);
#   2. a pip-installed wheel: the folder of Python's `libucx` package (pip install libucx-cu13);
#   3. pkg-config `ucx`, then the system (Debian: libucx-dev, built without CUDA).
# The cache of scripts/get_ucx_cuda.sh is not looked in on its own: a build that had it would switch UCX silently
# (and build the device link's tests); pass the path the script prints.
# One UCX per build: the host transport and the device link link the same libraries.

set(SPARSESYNC_UCX_ROOT "" CACHE PATH "UCX prefix: an install, or the libucx/ folder of the libucx-cu13 wheel (optional)")

set(_ss_ucx_prefixes)
foreach(_p IN ITEMS "${SPARSESYNC_UCX_ROOT}" "$ENV{UCX_ROOT}")
  if(_p)
    list(APPEND _ss_ucx_prefixes "${_p}")
  endif()
endforeach()
if(NOT _ss_ucx_prefixes)
  find_package(Python3 QUIET COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c "import libucx, os; print(os.path.dirname(libucx.__file__))"
                    OUTPUT_VARIABLE _ss_ucx_pip OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _ss_ucx_pip_rc)
    if(_ss_ucx_pip_rc EQUAL 0 AND _ss_ucx_pip)
      list(APPEND _ss_ucx_prefixes "${_ss_ucx_pip}")
    endif()
  endif()
endif()

set(SPARSESYNC_UCX_FOUND_IN "")
foreach(_p IN LISTS _ss_ucx_prefixes)
  if(EXISTS "${_p}/include/ucp/api/ucp.h" AND EXISTS "${_p}/lib")
    file(GLOB _ss_ucp "${_p}/lib/libucp.so*")
    file(GLOB _ss_ucs "${_p}/lib/libucs.so*")
    if(_ss_ucp AND _ss_ucs)
      set(SPARSESYNC_UCX_INCLUDE_DIR "${_p}/include" CACHE PATH "UCX headers" FORCE)
      # The unversioned name where there is one (the wheel ships libucp.so too); the linker records the soname.
      set(SPARSESYNC_UCP_LIBRARY "${_p}/lib/libucp.so" CACHE FILEPATH "libucp" FORCE)
      set(SPARSESYNC_UCS_LIBRARY "${_p}/lib/libucs.so" CACHE FILEPATH "libucs" FORCE)
      set(SPARSESYNC_UCX_FOUND_IN "${_p}")
      break()
    endif()
  endif()
endforeach()

if(NOT SPARSESYNC_UCX_FOUND_IN)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(SPARSESYNC_PC_UCX QUIET ucx)
  endif()
  find_path(SPARSESYNC_UCX_INCLUDE_DIR ucp/api/ucp.h HINTS ${SPARSESYNC_PC_UCX_INCLUDE_DIRS})
  find_library(SPARSESYNC_UCP_LIBRARY ucp HINTS ${SPARSESYNC_PC_UCX_LIBRARY_DIRS})
  find_library(SPARSESYNC_UCS_LIBRARY ucs HINTS ${SPARSESYNC_PC_UCX_LIBRARY_DIRS})
  if(SPARSESYNC_PC_UCX_FOUND)
    set(SPARSESYNC_UCX_FOUND_IN "pkg-config ucx")
  else()
    set(SPARSESYNC_UCX_FOUND_IN "the system")
  endif()
endif()

set(SPARSESYNC_UCX_VERSION "")
set(SPARSESYNC_UCX_CUDA OFF)
set(SPARSESYNC_UCX_MODULE_DIR "")
if(SPARSESYNC_UCX_INCLUDE_DIR AND EXISTS "${SPARSESYNC_UCX_INCLUDE_DIR}/ucp/api/ucp_version.h")
  file(STRINGS "${SPARSESYNC_UCX_INCLUDE_DIR}/ucp/api/ucp_version.h" _ss_v REGEX "#define UCP_API_(MAJOR|MINOR) ")
  string(REGEX REPLACE ".*UCP_API_MAJOR +([0-9]+).*" "\\1" _ss_major "${_ss_v}")
  string(REGEX REPLACE ".*UCP_API_MINOR +([0-9]+).*" "\\1" _ss_minor "${_ss_v}")
  set(SPARSESYNC_UCX_VERSION "${_ss_major}.${_ss_minor}")
endif()
if(SPARSESYNC_UCP_LIBRARY)
  # UCX loads its transports from the `ucx` folder beside libucs; CUDA support is the cuda module there.
  get_filename_component(_ss_ucs_real "${SPARSESYNC_UCS_LIBRARY}" REALPATH)
  get_filename_component(_ss_ucx_libdir "${_ss_ucs_real}" DIRECTORY)
  set(SPARSESYNC_UCX_MODULE_DIR "${_ss_ucx_libdir}/ucx")
  file(GLOB _ss_uct_cuda "${SPARSESYNC_UCX_MODULE_DIR}/libuct_cuda.so*")
  if(_ss_uct_cuda)
    set(SPARSESYNC_UCX_CUDA ON)
  endif()
endif()
