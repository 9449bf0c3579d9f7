// A listener that does not name the transport it accepts (requirement 2).
#include <sparsesync/transport/inproc.hpp>

struct anonymous_listener {
  using listener_concept = sparsesync::listener_tag;
  sparsesync::inproc_transport accept();
  void close() noexcept {}
};

static_assert(sparsesync::check_listener<anonymous_listener>);

int main() { return 0; }
