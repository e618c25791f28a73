// Remote shards kept on local disk (the HTTP sources' "cache_dir", as WebDataset and
// MosaicML Streaming keep theirs): each http(s) or s3:// shard is downloaded once into
// the folder and read from there after, also by later runs and by other processes on the
// machine. An s3:// shard is asked for with signed requests, and its copy is keyed by its
// request URL (endpoint, bucket and key), so that two stores never share one.
//
// - Checked: a download is kept only when its length equals the server's; the server's
//   ETag is stored beside it, and each open asks the server (a HEAD request) whether the
//   shard changed: a new ETag or length fetches it again, unless this process found it
//   current less than `cache_revalidate_s` ago (60 s by default; 0: every open). When
//   the server cannot be reached, a complete local copy is read (offline work goes on).
// - Never half a shard: a download goes to a temporary file renamed into place when it
//   is whole; a folder's files are <hash of the URL>.shard, .meta (URL, length, ETag),
//   .lock and .use.
// - Several processes: a shard's .lock is held exclusively (flock) while it is checked
//   or downloaded, so one process fetches it and the others wait and read it; its .use
//   is held shared while it is read, so eviction passes it by.
// - Bounded: when the folder's shards exceed `cache_max_bytes`, the least recently used
//   (by modification time, renewed on every open) that nobody reads are deleted.
// Counters on StreamOptions::stats: cache_hits, cache_misses, cache_evictions,
// cache_bytes_fetched. Memory: the stream's read buffer and a 1 MiB copy buffer while
// downloading.
#pragma once

#include <memory>
#include <string>

#include "dataecho/io/byte_stream.h"

namespace dataecho {

// `url`: an http(s):// URL or an s3:// URI.
std::unique_ptr<ByteStream> open_cached_http_stream(const std::string& url,
                                                    const StreamOptions& options);

}  // namespace dataecho
