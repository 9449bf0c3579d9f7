// sparsesync::compiled: the one translation unit that instantiates the run-time-dispatched encode and apply
// paths (every built-in encoder, and auto) for the programs that link it. Its target defines
// SPARSESYNC_COMPILED_LIBRARY, so the headers' extern declarations come first and these definitions follow
// them, which checks that both lists name the same functions.
#include <sparsesync/format/apply.hpp>
#include <sparsesync/format/patch_writer.hpp>

SPARSESYNC_NS_BEGIN
SPARSESYNC_DETAIL_ENCODE_INSTANTIATIONS()
SPARSESYNC_DETAIL_APPLY_INSTANTIATIONS()
SPARSESYNC_NS_END
