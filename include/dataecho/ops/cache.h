// cache: the first pass over the input fills a cache, and later passes read from it
// instead of the input (tf.data's `cache`). Echo is for the pass that is still slow; the
// cache is for the passes after it (docs/echo.md, "Cache or echo").
//
// - In memory (`path` empty): the elements of the first complete pass, shared (no copy)
//   by later passes of the same pipeline. Bounded by `max_bytes` of tensor data: when the
//   input does not fit, the pass fails with a message that says how much it held, or,
//   with `prefix`, keeps what fits (one element over at most) and the input's position
//   after it, so later passes read the prefix from memory and the rest from the input,
//   restored to that position (not read again from the start).
// - On local disk (`path` a folder): the first pass writes its elements to a temporary
//   file and renames it to cache-<key>.decache only when the pass completed, so an
//   interrupted pass never leaves a file that looks whole; any later pass, also of
//   another process or a later run, reads the file. `key` is the fingerprint of
//   everything upstream (the spec builder hashes the canonical spec up to the stage, the
//   seed and the local source files' sizes and times), so a changed spec or source finds
//   no file and fills a new one.
// - A pass that starts while another iterator is filling the cache, or that was restored
//   into the middle of a filling pass, reads the input and fills nothing.
//
// save/restore: the position in every mode. A restored reading pass of a memory cache in
// a fresh process refills the cache first (the first pass again, from the input), then
// continues at its position; a disk cache seeks to it.
// Stats: counters "hits" (elements read from the cache), "misses" (read from the input),
// "cached_bytes" (tensor bytes held, or written to the file), "cached_elements".
// Memory: the memory cache holds its elements (at most max_bytes of tensors plus one
// element); the disk cache holds one element and a 1 MiB write or read buffer.
// Thread-safety: iterators of one cache may run on different threads.
#pragma once

#include <cstdint>
#include <string>

#include "dataecho/core/dataset.h"

namespace dataecho {

struct CacheOptions {
  std::string path;       // "": in memory; else the folder of the cache file
  std::string key;        // the file's key (required on disk): [A-Za-z0-9_.-]+
  int64_t max_bytes = 0;  // memory: tensor bytes; 0: a quarter of physical memory
  bool prefix = false;    // memory: keep the prefix that fits instead of failing
};

DatasetPtr make_cache(DatasetPtr input, CacheOptions options);

// The file a disk cache with these options reads and writes.
std::string cache_file_path(const CacheOptions& options);

}  // namespace dataecho
