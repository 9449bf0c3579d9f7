// Umbrella header: the host library (layouts, codecs, wire format, bucketing, apply).
#pragma once

#include <sparsesync/bucketing/fixed_bytes.hpp>
#include <sparsesync/bucketing/per_tensor.hpp>
#include <sparsesync/codec/registry.hpp>
#include <sparsesync/core/dtype.hpp>
#include <sparsesync/core/error.hpp>
#include <sparsesync/core/hash.hpp>
#include <sparsesync/core/layout.hpp>
#include <sparsesync/core/model_checksum.hpp>
#include <sparsesync/format/apply.hpp>
#include <sparsesync/format/patch_writer.hpp>
