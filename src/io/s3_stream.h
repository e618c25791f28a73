// s3:// objects read over HTTP(S) (private to io): the URI is parsed, the configuration
// resolved (s3_config.h) before any request, and the object read by the HTTP stream
// (http_stream.cc) with each request signed by libcurl's AWS Signature V4
// (CURLOPT_AWS_SIGV4 "aws:amz:REGION:s3").
//
// What libcurl 7.88 leaves to us: it signs the path and query exactly as given (so they
// are built already encoded and sorted: s3_uri.h), it does not add
// x-amz-content-sha256 (S3 refuses a signed request without it: the empty body's SHA-256
// is sent, right for every GET and HEAD), it knows no session token (x-amz-security-token
// is added as a header, which curl then signs with the others), and an Authorization
// header among the request's own makes it skip signing (refused here).
#pragma once

#include <curl/curl.h>

#include <memory>
#include <string>
#include <vector>

#include "dataecho/io/byte_stream.h"
#include "dataecho/io/http_stream.h"
#include "s3_config.h"
#include "s3_xml.h"

namespace dataecho::s3 {

// SHA-256 of no bytes: the payload hash of a request without a body.
inline constexpr const char* kEmptyPayloadSha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// The signing and error options of an S3 request: SigV4 with the credentials (none when
// anonymous), the path sent as it is (keys may hold "..", "//"), no redirects followed (a
// region redirect is read and named), no FAILONERROR (the error's XML body is read).
void configure_request(CURL* easy, const Config& config);

// The headers every S3 request adds to its own: x-amz-content-sha256 and, with session
// credentials, x-amz-security-token.
std::vector<std::string> request_headers(const Config& config);

// Opens "s3://bucket/key" for reading. Throws dataecho::Error (stage "s3", naming the URI)
// for a bad URI, missing credentials, an Authorization header in the options, or plain
// http to a host other than loopback without plain_http_credentials; and for what the
// server answers (s3_errors.h).
std::unique_ptr<ByteStream> open_s3_stream(const std::string& uri, const StreamOptions& options);

// The request URL of "s3://bucket/key" (endpoint, bucket and key: what a local copy is
// keyed by), resolved and checked as open_s3_stream does.
std::string object_request_url(const std::string& uri, const StreamOptions& options);

// What a signed HEAD request says of the object: its size and ETag. An error status is
// read again by a GET, so that the error thrown names it as open_s3_stream does (a HEAD
// answer has no body to tell a missing bucket from a missing key, or a wrong secret).
HttpHead head_object(const std::string& uri, const StreamOptions& options);

// Every object whose key starts with `prefix` in `bucket`, from ListObjectsV2 pages of
// at most `max_keys` (1 to 1000) keys, in the server's (byte) order of keys. Each page is
// one signed GET through the HTTP stream (retries and S3's errors as for objects), counted
// as s3_list_requests on options.stats. Another max_keys is an error (kInvalidArgument).
std::vector<ListedObject> list_objects(const std::string& bucket, const std::string& prefix,
                                       const StreamOptions& options, int max_keys = 1000);

// The s3:// URIs a pattern names, sorted bytewise: "s3://b/dir/" every key under dir/
// (folder markers, keys ending '/', left out); a glob ("s3://b/train-*.tfrecord") the
// keys that match it as glob(3) matches paths ('*' and '?' never cross '/', a name
// starting '.' needs an explicit '.'), listed from the literal prefix before its first
// '*', '?' or '['. Throws dataecho::Error (kNotFound, stage "uri", naming the pattern)
// when no key matches.
// (Pages of options.s3.max_keys keys.)
std::vector<std::string> expand_pattern(const std::string& pattern, const StreamOptions& options);

// expand_pattern of each of `patterns` (the prefixes of one brace pattern), listed by up
// to options.s3.list_parallelism (taken into [1, 64]) threads at once (each stream takes its own
// connection), the keys of patterns[i] in element i. When some fail, the error thrown is the one of
// the first pattern (in their order) that failed, as listing them one after another
// would throw; no pattern after a failure is started.
std::vector<std::vector<std::string>> expand_patterns(const std::vector<std::string>& patterns,
                                                      const StreamOptions& options);

}  // namespace dataecho::s3
