// A ByteStream over bytes held in memory (tests, fuzz targets, data already fetched).
// Buffers: holds the whole string. Never fails. Not thread-safe.
#pragma once

#include <memory>
#include <string>

#include "dataecho/io/byte_stream.h"

namespace dataecho {

std::unique_ptr<ByteStream> make_memory_stream(std::string bytes, std::string uri = "memory");

}  // namespace dataecho
