// The integrations' part of sparsesync._core (changes.cpp): a patch decoded into per-tensor changes, and the
// library's checksum over values the caller gathers (python/sparsesync/integrations/).
#pragma once

#include <nanobind/nanobind.h>

void bind_changes(nanobind::module_& m);
