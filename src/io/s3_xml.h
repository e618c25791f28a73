// A small reader for the XML S3 answers with (private to io): the text of an element,
// with XML's character references decoded, and S3's <Error> body. Not a general XML
// parser: S3's bodies are flat, without attributes that matter, CDATA or comments.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dataecho::s3 {

// `text` with &amp; &lt; &gt; &quot; &apos; &#N; and &#xN; decoded (to UTF-8); anything
// else after '&' is kept as it is.
std::string xml_decode(std::string_view text);

// The decoded text of the first <tag>...</tag> (or <tag/>) element at or after `from`
// in `xml`; "" when there is none. `*end` (when given) is set past its end tag, or to
// npos.
std::string xml_text(std::string_view xml, std::string_view tag, size_t from = 0,
                     size_t* end = nullptr);

// What an S3 <Error> body says. Only these fields are ever quoted in messages: never the
// StringToSign, CanonicalRequest or AWSAccessKeyId the body may also hold.
struct ErrorBody {
  std::string code;      // "NoSuchKey", "SlowDown", ...; "" when the body is not S3's XML
  std::string message;   // the server's words
  std::string region;    // <Region>, given with a wrong region
  std::string endpoint;  // <Endpoint>, given with PermanentRedirect
  std::string bucket;    // <BucketName>
  std::string key;       // <Key>
};
ErrorBody parse_error_body(std::string_view xml);

// One object of a listing.
struct ListedObject {
  std::string key;
  int64_t size = -1;
  std::string etag;  // as S3 gives it, quotes included
};
// One page of a ListObjectsV2 answer (<ListBucketResult>).
struct ListPage {
  std::vector<ListedObject> objects;  // <Contents>, in the server's (byte) order
  bool truncated = false;             // <IsTruncated>true</IsTruncated>: more pages follow
  std::string next_token;             // <NextContinuationToken>
};
ListPage parse_list_page(std::string_view xml);

}  // namespace dataecho::s3
