// The credential chain, region, endpoint and addressing of s3:// reads, resolved as the
// AWS tools resolve them, from the environment and ini files in a fresh HOME.
#include <gtest/gtest.h>

#include "dataecho/core/error.h"
#include "dataecho/core/redact.h"
#include "io/s3_config.h"
#include "s3_test_env.h"
#include "test_util.h"

namespace dataecho::s3 {
namespace {

using dataecho::testing::error_of;
using dataecho::testing::ScopedAwsEnv;
using dataecho::testing::write_file;

const char* kDisplay = "s3://bkt/k";

TEST(S3Ini, SectionsKeysNestingAndComments) {
  const IniFile ini = parse_ini(
      "# comment\n[default]\nAWS_Access_Key_ID = AKID\r\n; another\n"
      "region=eu-west-1\ns3 =\n  addressing_style = path\n  endpoint_url = http://h:9\n"
      "output = json\n\n[profile dev]\n  region = us-west-2  \n",
      "/x/config");
  ASSERT_EQ(ini.size(), 2u);
  const IniSection& d = ini.at("default");
  EXPECT_EQ(d.at("aws_access_key_id"), "AKID");
  EXPECT_EQ(d.at("region"), "eu-west-1");
  EXPECT_EQ(d.at("s3.addressing_style"), "path");
  EXPECT_EQ(d.at("s3.endpoint_url"), "http://h:9");
  EXPECT_EQ(d.at("output"), "json");
  EXPECT_EQ(ini.at("profile dev").at("region"), "us-west-2");
  EXPECT_CONTAINS(error_of([] { parse_ini("key = v\n", "/x/c"); }),
                  "a key before the first [section] (/x/c line 1)");
  EXPECT_CONTAINS(error_of([] { parse_ini("[a]\njunk\n", "/x/c"); }),
                  "expected [section] or key = value (/x/c line 2)");
  EXPECT_CONTAINS(error_of([] { parse_ini("[a\n", "/x/c"); }), "ends with ']' (/x/c line 1)");
}

TEST(S3Config, EnvBeforeFilesAndExplicitProfileSkipsEnv) {
  ScopedAwsEnv env;
  write_file(env.home() + "/.aws/credentials",
             "[default]\naws_access_key_id = FILEID\naws_secret_access_key = filesecret123\n"
             "[dev]\naws_access_key_id = DEVID\naws_secret_access_key = devsecret1234\n"
             "aws_session_token = devtoken12345\n");
  env.set("AWS_ACCESS_KEY_ID", "ENVID");
  env.set("AWS_SECRET_ACCESS_KEY", "envsecret1234");
  env.set("AWS_SESSION_TOKEN", "envtoken12345");
  Config c = resolve_config({}, kDisplay);
  EXPECT_EQ(c.credentials.key_id, "ENVID");
  EXPECT_EQ(c.credentials.token, "envtoken12345");
  env.set("AWS_PROFILE", "dev");  // AWS_PROFILE does not outrank the keys of the environment
  EXPECT_EQ(resolve_config({}, kDisplay).credentials.key_id, "ENVID");
  S3Options spec;
  spec.profile = "dev";  // a profile the spec names does: botocore drops the env provider
  c = resolve_config(spec, kDisplay);
  EXPECT_EQ(c.credentials.key_id, "DEVID");
  EXPECT_EQ(c.credentials.secret, "devsecret1234");
  EXPECT_EQ(c.credentials.token, "devtoken12345");
  // The secrets found are redacted from then on.
  EXPECT_EQ(redact_urls("x devsecret1234 devtoken12345"), "x <redacted> <redacted>");
}

TEST(S3Config, ProfileFromAwsProfileAndFileVariables) {
  ScopedAwsEnv env;
  const std::string dir = dataecho::testing::temp_dir();
  write_file(dir + "/creds",
             "[work]\naws_access_key_id = WORKID\naws_secret_access_key = ws12345678\n");
  write_file(dir + "/conf",
             "[profile work]\nregion = ap-south-1\n[profile keys]\n"
             "aws_access_key_id = CONFID\naws_secret_access_key = cs12345678\n");
  env.set("AWS_SHARED_CREDENTIALS_FILE", dir + "/creds");
  env.set("AWS_CONFIG_FILE", dir + "/conf");
  env.set("AWS_PROFILE", "work");
  Config c = resolve_config({}, kDisplay);
  EXPECT_EQ(c.profile, "work");
  EXPECT_EQ(c.credentials.key_id, "WORKID");
  EXPECT_EQ(c.region, "ap-south-1");
  env.set("AWS_PROFILE", "keys");  // keys in the config file's [profile keys]
  EXPECT_EQ(resolve_config({}, kDisplay).credentials.key_id, "CONFID");
  env.set("AWS_PROFILE", "nope");
  EXPECT_CONTAINS(error_of([] { resolve_config({}, kDisplay); }),
                  "the profile 'nope' (named by AWS_PROFILE) is in neither " + dir + "/creds nor " +
                      dir + "/conf");
}

TEST(S3Config, RegionAndEndpointOrder) {
  ScopedAwsEnv env;
  write_file(env.home() + "/.aws/config",
             "[default]\nregion = eu-north-1\nendpoint_url = http://profile:1\n"
             "aws_access_key_id = A\naws_secret_access_key = B\n");
  S3Options spec;
  Config c = resolve_config(spec, kDisplay);
  EXPECT_EQ(c.region, "eu-north-1");
  EXPECT_EQ(c.endpoint, "http://profile:1");
  env.set("AWS_DEFAULT_REGION", "eu-west-2");
  env.set("AWS_ENDPOINT_URL", "http://env:2");
  c = resolve_config(spec, kDisplay);
  EXPECT_EQ(c.region, "eu-west-2");
  EXPECT_EQ(c.endpoint, "http://env:2");
  env.set("AWS_REGION", "eu-west-3");
  env.set("AWS_ENDPOINT_URL_S3", "http://env-s3:3");
  c = resolve_config(spec, kDisplay);
  EXPECT_EQ(c.region, "eu-west-3");
  EXPECT_EQ(c.endpoint, "http://env-s3:3");
  env.set("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true");
  EXPECT_EQ(resolve_config(spec, kDisplay).endpoint, "https://s3.eu-west-3.amazonaws.com");
  spec.region = "sa-east-1";
  spec.endpoint = "http://127.0.0.1:9";
  c = resolve_config(spec, kDisplay);
  EXPECT_EQ(c.region, "sa-east-1");
  EXPECT_EQ(c.endpoint, "http://127.0.0.1:9");
  spec.region = "us-east-1:evil";
  EXPECT_CONTAINS(error_of([&] { resolve_config(spec, kDisplay); }), "other characters");
  spec.region = "";
  spec.endpoint = "ftp://x";
  EXPECT_CONTAINS(error_of([&] { resolve_config(spec, kDisplay); }), "not an http:// or https://");
}

TEST(S3Config, NestedS3AddressingStyle) {
  ScopedAwsEnv env;
  write_file(env.home() + "/.aws/config",
             "[default]\naws_access_key_id = A\naws_secret_access_key = B\ns3 =\n"
             "    addressing_style = virtual\n    endpoint_url = http://nested:4\n");
  S3Options spec;
  Config c = resolve_config(spec, kDisplay);
  EXPECT_EQ(c.addressing, Addressing::kVirtual);
  EXPECT_EQ(c.endpoint, "http://nested:4");
  spec.addressing = "path";
  EXPECT_EQ(resolve_config(spec, kDisplay).addressing, Addressing::kPath);
}

TEST(S3Config, RoleArnProfileNamesExport) {
  ScopedAwsEnv env;
  write_file(env.home() + "/.aws/config",
             "[profile ci]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = default\n");
  S3Options spec;
  spec.profile = "ci";
  EXPECT_CONTAINS(error_of([&] { resolve_config(spec, kDisplay); }),
                  "the profile 'ci' gets its credentials through role_arn, which dataecho does "
                  "not run: export them first (eval \"$(aws configure export-credentials "
                  "--profile ci --format env)\")");
}

TEST(S3Config, NoCredentialsSaysWhereItLooked) {
  ScopedAwsEnv env;
  const std::string e = error_of([] { resolve_config({}, kDisplay); });
  EXPECT_CONTAINS(e,
                  "s3: no AWS credentials found: looked in AWS_ACCESS_KEY_ID/"
                  "AWS_SECRET_ACCESS_KEY (not set), " +
                      env.home() + "/.aws/credentials [default] (no such file), " + env.home() +
                      "/.aws/config [default] (no such file)");
  EXPECT_CONTAINS(e, "(s3://bkt/k)");
  write_file(env.home() + "/.aws/credentials", "[other]\naws_access_key_id = X\n");
  write_file(env.home() + "/.aws/config", "[default]\nregion = eu-west-1\n");
  EXPECT_CONTAINS(error_of([] { resolve_config({}, kDisplay); }),
                  "/.aws/credentials [default] (no such profile), " + env.home() +
                      "/.aws/config [default] (no keys)");
  env.set("AWS_ACCESS_KEY_ID", "ONLYID");
  EXPECT_CONTAINS(error_of([] { resolve_config({}, kDisplay); }),
                  "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
  S3Options anonymous;
  anonymous.anonymous = true;  // a public bucket: no credentials looked for
  EXPECT_TRUE(resolve_config(anonymous, kDisplay).credentials.key_id.empty());
}

}  // namespace
}  // namespace dataecho::s3
