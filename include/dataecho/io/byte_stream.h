// ByteStream: the bytes of one file or URL, read front to back. Every file-based
// source (tfrecord, tar, idx) reads through this, so a local path and an http(s) URL
// behave the same. Not thread-safe: one reader per stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataecho/core/stats.h"

namespace dataecho {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Reads up to `n` bytes into `dst`; returns how many, 0 only at the end of the data.
  // Throws dataecho::Error (stage "io" or "http") naming the URI on failure.
  virtual size_t read(void* dst, size_t n) = 0;
  // Bytes delivered so far (the offset of the next byte read() returns).
  virtual uint64_t position() const = 0;
  // Continues from absolute byte `offset` (used by restore()): a local file seeks, an
  // HTTP stream asks for a Range.
  virtual void seek(uint64_t offset) = 0;
  // Total size when known (a local file, an HTTP response with Content-Length); -1 otherwise.
  virtual int64_t size() const = 0;
  virtual const std::string& uri() const = 0;

  // Reads up to `n` bytes, returning once at least `at_least` have arrived (or the data
  // ended): as much as the stream has, without waiting for more. Returns how many. When a
  // read throws, the bytes of earlier reads in this call are in `dst` but not counted.
  size_t read_at_least(void* dst, size_t n, size_t at_least);
  // Reads exactly `n` bytes unless the data ends first; returns how many were read.
  size_t read_fully(void* dst, size_t n) { return read_at_least(dst, n, n); }
};

// Where and how s3:// objects are read (docs/http.md). Every field left empty is resolved
// as the AWS tools resolve it: AWS_* environment variables, then the profile of
// ~/.aws/credentials and ~/.aws/config. Secrets are never options: they come from the
// environment or those files only.
struct S3Options {
  // The profile; when set, AWS_ACCESS_KEY_ID and friends are not used. "": AWS_PROFILE,
  // else "default".
  std::string profile;
  // "": AWS_REGION, AWS_DEFAULT_REGION, the profile's region, else us-east-1.
  std::string region;
  // "http(s)://host[:port]". "": AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's,
  // else https://s3.REGION.amazonaws.com.
  std::string endpoint;
  // "path" or "virtual". "" or "auto": the profile's s3 addressing_style, else virtual on
  // AWS's endpoints and path elsewhere.
  std::string addressing;
  // Unsigned requests (public buckets): no credentials are looked for.
  bool anonymous = false;
  // Listing: the keys a page asks for (1 to 1000), and how many prefixes of a brace
  // pattern are listed at once (1 to 64).
  int max_keys = 1000;
  int list_parallelism = 8;
};

struct StreamOptions {
  size_t buffer_bytes = 1 << 20;  // read-ahead buffer of a stream
  // HTTP only: see http_stream.h.
  double connect_timeout_s = 10;
  double low_speed_time_s = 30;  // a transfer slower than 1 byte/s for this long is retried
  int max_retries = 8;
  double backoff_initial_s = 0.1;
  double backoff_max_s = 5;
  // TLS (https): the server's certificate and host name are verified unless `insecure`.
  // A CA bundle file or folder for servers with a CA of their own; when both are empty,
  // the SSL_CERT_FILE or CURL_CA_BUNDLE variable names the file (libcurl itself reads
  // neither), else the system's store is used.
  std::string ca_file;
  std::string ca_path;
  bool insecure = false;
  // Extra request headers, "Name: value" ("Authorization: Bearer ..."). libcurl does not
  // forward them when a redirect leads to another host.
  std::vector<std::string> headers;
  // Credentials (an Authorization header, user:password in the URL) go over plain http
  // only when this says so; otherwise opening such a stream fails.
  bool plain_http_credentials = false;
  // http(s) only: keep each shard on local disk in this folder, fetched once and read
  // from there after (io/shard_cache.h); "" reads over the network every time.
  std::string cache_dir;
  int64_t cache_max_bytes = 0;  // the folder's bound (least recently used go first); 0: none
  // An open of a cached shard asks the server whether it changed (a HEAD request) unless
  // this process found it current less than this many seconds ago; 0: on every open.
  double cache_revalidate_s = 60;
  // s3:// objects: the store, region and profile (credentials come from the environment).
  S3Options s3;
  // Counters (bytes, requests, retries, resumed) are added to this node when given.
  std::shared_ptr<NodeStats> stats;
};

// Opens a local path, a file:// URL, an http:// / https:// URL, or an s3://bucket/key
// object (signed with AWS Signature V4).
std::unique_ptr<ByteStream> open_stream(const std::string& uri, const StreamOptions& options = {});

bool is_http_uri(const std::string& uri);
bool is_s3_uri(const std::string& uri);
// http(s) or s3: bytes that come over the network.
bool is_remote_uri(const std::string& uri);

// Turns the `uri` list of a spec into the ordered list of shards: each entry may be a
// path, a glob (`train-*.tfrecord`), a brace range (`train-{00000..00007}.tfrecord`),
// an http(s) URL (brace ranges expand there too) or an s3:// URI (brace ranges, and
// globs or a trailing '/' that list the bucket with `options`; the prefixes of one
// entry's brace groups are listed options.s3.list_parallelism at a time, their keys kept
// in the entry's order). Globs' matches are sorted. Relative local paths are taken
// relative to `base_dir` when it is not empty. An entry that matches nothing is an error
// naming it (an s3:// entry: the first of its prefixes that fails). Manifests are read
// with `options`.
std::vector<std::string> expand_uris(const std::vector<std::string>& patterns,
                                     const std::string& base_dir = "",
                                     const StreamOptions& options = {});

}  // namespace dataecho
