// The pure pieces of s3:// reading: URIs, AWS's encoding, object URLs, the ListObjectsV2
// query, the ini files and credential chain of the AWS tools, S3's XML error bodies and
// what each error answer means. No server.
#include <gtest/gtest.h>

#include <map>

#include "dataecho/core/error.h"
#include "io/s3_config.h"
#include "io/s3_errors.h"
#include "io/s3_uri.h"
#include "io/s3_xml.h"
#include "test_util.h"

namespace dataecho::s3 {
namespace {

using dataecho::testing::error_of;

TEST(S3Uri, ParsesBucketKeyAndRefusesUserinfoQueryAndBadBuckets) {
  const ObjectUri o = parse_uri("s3://my-bucket.data/train/a b#1.tfrecord");
  EXPECT_EQ(o.bucket, "my-bucket.data");
  EXPECT_EQ(o.key, "train/a b#1.tfrecord");  // a '#' that is not a checksum is the key's
  EXPECT_EQ(o.display(), "s3://my-bucket.data/train/a b#1.tfrecord");
  const std::string hash(64, 'a');
  EXPECT_EQ(parse_uri("S3://bkt/k.tar#sha256=" + hash).key, "k.tar");
  EXPECT_EQ(parse_uri("S3://bkt/k.tar#sha256=" + std::string(64, 'A')).sha256, hash);
  EXPECT_EQ(parse_uri("s3://bkt/k.tar#sha256=abc").key, "k.tar#sha256=abc");
  EXPECT_EQ(parse_uri("s3://bkt", false).key, "");
  const std::map<std::string, std::string> bad = {
      {"s3://id:secret@bkt/k", "takes no user or password"},
      {"s3://bkt/k?versionId=1", "takes no query"},
      {"s3:///k", "names no bucket"},
      {"s3://bkt", "names no key"},
      {"s3://bkt/", "names no key"},
      {"s3://ab/k", "3 to 63 characters"},
      {"s3://" + std::string(64, 'a') + "/k", "3 to 63 characters"},
      {"s3://My_Bucket/k", "only a-z, 0-9"},
      {"s3://-bucket/k", "starts and ends with a letter or digit"},
      {"s3://a..b/k", "no two adjacent dots"},
      {"s3://192.168.5.4/k", "not an IP address"},
      {"s3://xn--bucket/k", "may not start with 'xn--'"},
      {"s3://bucket-s3alias/k", "may not end with '-s3alias'"}};
  for (const auto& [uri, why] : bad) {
    const std::string e = error_of([&, u = uri] { parse_uri(u); });
    EXPECT_CONTAINS(e, why);
    EXPECT_CONTAINS(e, "s3: ");
    // (An error's text is redacted: a query or userinfo would not show as written.)
    if (uri.find_first_of("@?") == std::string::npos) EXPECT_CONTAINS(e, "(" + uri + ")");
    EXPECT_EQ(e.find("secret@"), std::string::npos) << e;
  }
}

TEST(S3Uri, EncodesKeysLikeAws) {
  EXPECT_EQ(uri_encode("a b/\xc3\xbc!.png", false), "a%20b/%C3%BC%21.png");
  EXPECT_EQ(uri_encode("a b/\xc3\xbc!.png", true), "a%20b%2F%C3%BC%21.png");
  EXPECT_EQ(uri_encode("AZaz09-_.~'()*+=&%", false), "AZaz09-_.~%27%28%29%2A%2B%3D%26%25");
}

TEST(S3Uri, ListQueryIsSortedAndEncoded) {
  EXPECT_EQ(list_query("train/x y", "/", "1+a/b=", 1000),
            "continuation-token=1%2Ba%2Fb%3D&delimiter=%2F&list-type=2&max-keys=1000&prefix="
            "train%2Fx%20y");
  EXPECT_EQ(list_query("", "", "", 2), "list-type=2&max-keys=2");
}

TEST(S3Uri, PathAndVirtualHostedUrls) {
  const std::string aws = "https://s3.eu-west-1.amazonaws.com";
  EXPECT_EQ(object_url(aws, Addressing::kAuto, "bkt", "a b/c"),
            "https://bkt.s3.eu-west-1.amazonaws.com/a%20b/c");
  // A dotted bucket would not match the wildcard certificate: path style.
  EXPECT_EQ(object_url(aws, Addressing::kAuto, "b.k.t", "k"),
            "https://s3.eu-west-1.amazonaws.com/b.k.t/k");
  EXPECT_EQ(object_url("http://127.0.0.1:9000/", Addressing::kAuto, "bkt", "k"),
            "http://127.0.0.1:9000/bkt/k");
  EXPECT_EQ(object_url("http://minio.lan:9000", Addressing::kVirtual, "bkt", "k"),
            "http://bkt.minio.lan:9000/k");
  EXPECT_EQ(object_url(aws, Addressing::kPath, "bkt", "k"),
            "https://s3.eu-west-1.amazonaws.com/bkt/k");
  // The bucket's own URL (a listing's), without a trailing '/' in the path style.
  EXPECT_EQ(object_url(aws, Addressing::kPath, "bkt", ""),
            "https://s3.eu-west-1.amazonaws.com/bkt");
  EXPECT_EQ(object_url(aws, Addressing::kVirtual, "bkt", ""),
            "https://bkt.s3.eu-west-1.amazonaws.com/");
  EXPECT_CONTAINS(error_of([] { parse_addressing("vhost", "the spec"); }),
                  "\"auto\", \"path\" or \"virtual\", not \"vhost\"");
}

TEST(S3Xml, EntitiesAndElements) {
  EXPECT_EQ(xml_decode("a&amp;b&lt;&gt;&quot;&apos;&#65;&#x263A;&#xD800;&bogus; & x"),
            "a&b<>\"'A\xe2\x98\xba\xef\xbf\xbd&bogus; & x");
  const std::string xml = "<R><KeyCount>2</KeyCount><Key>a&amp;b</Key><Key/><Key>c</Key></R>";
  size_t end = 0;
  EXPECT_EQ(xml_text(xml, "Key", 0, &end), "a&b");
  EXPECT_EQ(xml_text(xml, "Key", end, &end), "");
  EXPECT_EQ(xml_text(xml, "Key", end, &end), "c");
  EXPECT_EQ(xml_text(xml, "Key", end, &end), "");
  EXPECT_EQ(end, std::string::npos);
  EXPECT_EQ(xml_text("<Key>unclosed", "Key"), "");
}

TEST(S3Xml, ListPageObjectsTruncationAndToken) {
  const ListPage page = parse_list_page(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult><Name>bkt</Name>"
      "<Prefix>set/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
      "<IsTruncated>true</IsTruncated><Contents><Key>set/a&amp;b.txt</Key>"
      "<LastModified>2026-12-06T00:00:00.000Z</LastModified><ETag>&quot;9a0364b9&quot;</ETag>"
      "<Size>12</Size><StorageClass>STANDARD</StorageClass></Contents><Contents><Key>set/c</Key>"
      "<ETag>\"d41d-2\"</ETag><Size>0</Size></Contents>"
      "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
      "</ListBucketResult>");
  ASSERT_EQ(page.objects.size(), 2u);
  EXPECT_EQ(page.objects[0].key, "set/a&b.txt");
  EXPECT_EQ(page.objects[0].size, 12);
  EXPECT_EQ(page.objects[0].etag, "\"9a0364b9\"");
  EXPECT_EQ(page.objects[1].key, "set/c");
  EXPECT_EQ(page.objects[1].size, 0);
  EXPECT_TRUE(page.truncated);
  EXPECT_EQ(page.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
  const ListPage last =
      parse_list_page("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
  EXPECT_TRUE(last.objects.empty());
  EXPECT_FALSE(last.truncated);
}

TEST(S3Xml, ErrorCodeRegionMessage) {
  const ErrorBody e = parse_error_body(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AuthorizationHeaderMalformed</Code>"
      "<Message>The authorization header is malformed; the region &apos;us-east-1&apos; is "
      "wrong; expecting &apos;eu-west-1&apos;</Message><Region>eu-west-1</Region>"
      "<RequestId>X</RequestId></Error>");
  EXPECT_EQ(e.code, "AuthorizationHeaderMalformed");
  EXPECT_EQ(e.region, "eu-west-1");
  EXPECT_CONTAINS(e.message, "the region 'us-east-1' is wrong");
  EXPECT_EQ(parse_error_body("<html>502 Bad Gateway</html>").code, "");
}

std::string s3_error(const std::string& code, const std::string& message,
                     const std::string& extra = "") {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + code + "</Code><Message>" +
         message + "</Message>" + extra + "<RequestId>4442587FB7D0A2F9</RequestId></Error>";
}

TEST(S3Errors, RetryableCodesAndNamedOnes) {
  const std::string uri = "s3://bkt/train/a.tfrecord";
  auto retry = [&](long status, const std::string& body) {
    return classify_reply({status, body, ""}, uri, "us-east-1", "GET");
  };
  EXPECT_TRUE(retry(503, s3_error("SlowDown", "Please reduce your request rate.")).slow_down);
  EXPECT_FALSE(
      retry(500, s3_error("InternalError", "We encountered an internal error.")).slow_down);
  EXPECT_CONTAINS(retry(400, s3_error("RequestTimeout", "Idle too long")).reason,
                  "HTTP 400 RequestTimeout: Idle too long");
  EXPECT_FALSE(retry(502, "<html>bad gateway</html>").slow_down);
  const std::string sts =
      "<StringToSign>AWS4-HMAC-SHA256\n20130524T000000Z</StringToSign>"
      "<CanonicalRequest>GET /k</CanonicalRequest>"
      "<AWSAccessKeyId>AKIDEXAMPLEID</AWSAccessKeyId>";
  const std::map<std::string, std::pair<Reply, std::string>> named = {
      {"key",
       {{404, s3_error("NoSuchKey", "The specified key does not exist."), ""},
        "s3: no such key (HTTP 404 NoSuchKey: The specified key does not exist.; not "
        "retried) (s3://bkt/train/a.tfrecord)"}},
      {"bucket",
       {{404, s3_error("NoSuchBucket", "The specified bucket does not exist"), ""},
        "no such bucket (HTTP 404 NoSuchBucket"}},
      {"denied", {{403, s3_error("AccessDenied", "Access Denied"), ""}, "access denied"}},
      {"id",
       {{403, s3_error("InvalidAccessKeyId", "no such key id", sts), ""},
        "the access key id is not known to the server"}},
      {"secret",
       {{403, s3_error("SignatureDoesNotMatch", "The request signature...", sts), ""},
        "the secret access key does not match the key id"}},
      {"token",
       {{400, s3_error("ExpiredToken", "The provided token has expired."), ""},
        "the session token has expired"}},
      {"clock", {{403, s3_error("RequestTimeTooSkewed", "too skewed"), ""}, "clock is off"}},
      {"redirect",
       {{301,
         s3_error("PermanentRedirect", "use the endpoint",
                  "<Endpoint>bkt.s3."
                  "eu-west-1.amazonaws.com</Endpoint>"),
         "eu-west-1"},
        "the bucket is in region eu-west-1, not us-east-1: set \"s3\": {\"region\": "
        "\"eu-west-1\"} or AWS_REGION"}},
      {"malformed",
       {{400,
         s3_error("AuthorizationHeaderMalformed", "wrong region", "<Region>ap-south-1</Region>"),
         ""},
        "the bucket is in region ap-south-1, not us-east-1"}},
      {"endpoint",
       {{301, s3_error("PermanentRedirect", "use it", "<Endpoint>e.example</Endpoint>"), ""},
        "addressed at the endpoint e.example"}},
      {"head404", {{404, "", ""}, "no such key (HTTP 404; not retried)"}},
      {"other",
       {{409, s3_error("InvalidObjectState", "archived"), ""},
        "GET failed (HTTP 409 InvalidObjectState: archived; not retried)"}}};
  for (const auto& [name, c] : named) {
    const std::string e =
        error_of([&, r = c.first] { classify_reply(r, uri, "us-east-1", "GET"); });
    EXPECT_CONTAINS(e, c.second);
    EXPECT_CONTAINS(e, "(" + uri + ")");
    for (const char* never :
         {"StringToSign", "20130524T000000Z", "CanonicalRequest", "AKIDEXAMPLEID"})
      EXPECT_EQ(e.find(never), std::string::npos) << name << ": " << e;
  }
  try {
    retry(404, s3_error("NoSuchKey", "x"));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

}  // namespace
}  // namespace dataecho::s3
