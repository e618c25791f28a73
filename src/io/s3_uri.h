// The pure pieces of S3 addressing (private to io): `s3://bucket/key` parsed and checked,
// keys and query values encoded as AWS Signature V4 wants them (libcurl 7.88 signs the
// path and query exactly as given, so they are built here already encoded and sorted),
// and the request URL of an object in path-style or virtual-hosted addressing.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace dataecho::s3 {

// The stage every S3 error names.
inline constexpr const char* kStage = "s3";

struct ObjectUri {
  std::string bucket;
  std::string key;     // without the leading '/'; "" when the URI names only a bucket
  std::string sha256;  // the #sha256= fragment's 64 hex digits, lower-case ("": none)
  // "s3://bucket/key" (no #sha256= fragment): what errors and uri() show.
  std::string display() const { return "s3://" + bucket + "/" + key; }
};

// Why `bucket` is not a valid S3 bucket name ("" when it is): 3 to 63 characters of
// a-z, 0-9, '.' and '-', starting and ending with a letter or digit, no "..", not an IPv4
// address, none of AWS's reserved prefixes and suffixes.
std::string bucket_name_problem(std::string_view bucket);

// Parses "s3://bucket/key[#sha256=HEX]" (the scheme in any case). A trailing #sha256=
// fragment is left for the checksum; any other '#' belongs to the key. Throws
// dataecho::Error (kInvalidArgument, stage "s3", naming the URI) for userinfo, a query
// ('?'), a bad bucket name, or (when `need_key`) no key.
ObjectUri parse_uri(const std::string& uri, bool need_key = true);

// AWS's URI encoding: every byte but A-Z a-z 0-9 - _ . ~ as %XY (upper-case hex); '/'
// kept unless `encode_slash` (keys in paths keep it, query values do not).
std::string uri_encode(std::string_view s, bool encode_slash);

enum class Addressing { kAuto, kPath, kVirtual };
// "auto", "path" or "virtual"; throws dataecho::Error (kInvalidArgument) naming `where`.
Addressing parse_addressing(const std::string& text, const std::string& where);

// The URL of `key` in `bucket` at `endpoint` ("https://host[:port]", a trailing '/'
// ignored): virtual-hosted "https://bucket.host/key" or path-style "https://host/bucket/
// key". kAuto is virtual for an amazonaws.com endpoint and a bucket without dots, path
// otherwise (S3-compatible stores and loopback servers). The key is uri_encode()d. An
// empty key gives the bucket's URL ("https://host/bucket", "https://bucket.host/").
std::string object_url(const std::string& endpoint, Addressing addressing,
                       const std::string& bucket, const std::string& key);

// The query of a ListObjectsV2 request, sorted by name and encoded as SigV4 signs it:
// "continuation-token=..&delimiter=..&list-type=2&max-keys=N&prefix=.."; empty values
// are left out.
std::string list_query(const std::string& prefix, const std::string& delimiter,
                       const std::string& continuation_token, int max_keys);

}  // namespace dataecho::s3
