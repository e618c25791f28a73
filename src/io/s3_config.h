// Where an s3:// read goes and what it signs with (private to io), resolved as the AWS
// command line tools and boto3 resolve them:
//   credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), skipped
//     when the spec names a profile; then the profile's keys in the shared credentials
//     file (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials, section [name]); then
//     in the config file (AWS_CONFIG_FILE, else ~/.aws/config, [default] or
//     [profile name]). The profile: the spec's, else AWS_PROFILE, else "default".
//   region: the spec's, AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1.
//   endpoint: the spec's, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's s3
//     endpoint_url or endpoint_url (none of these three when
//     AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true), else https://s3.REGION.amazonaws.com.
//   addressing: the spec's, the profile's s3 addressing_style, else auto.
// The secret key and session token found are registered with redact.h's
// register_secret, so no error, log or saved text carries them.
// Thread-safety: resolve_config reads the environment and files; call it from one
// thread at a time with respect to setenv.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "dataecho/io/byte_stream.h"
#include "s3_uri.h"

namespace dataecho::s3 {

// An AWS ini file: sections of `key = value` lines; a key whose value is empty and whose
// following lines are indented holds nested keys, stored as "key.nested" ("s3 =" then
// "  addressing_style = path" gives "s3.addressing_style"). Keys are lower-cased; lines
// starting with '#' or ';' are comments.
using IniSection = std::map<std::string, std::string>;
using IniFile = std::map<std::string, IniSection>;
// Throws dataecho::Error (kInvalidArgument, stage "s3") naming `path` and the line.
IniFile parse_ini(std::string_view text, const std::string& path);

struct Credentials {
  std::string key_id;
  std::string secret;
  std::string token;  // a session token ("" for long-term keys)
};

struct Config {
  std::string profile;
  std::string region;
  std::string endpoint;
  Addressing addressing = Addressing::kAuto;
  bool anonymous = false;
  Credentials credentials;  // empty when anonymous
};

// The configuration of an s3:// read. Throws dataecho::Error (stage "s3", input
// `display`) when no credentials are found (saying where it looked), when a named
// profile exists in neither file, a profile's keys are incomplete, or a profile needs a
// role, SSO or a credential process (which dataecho does not run).
Config resolve_config(const S3Options& spec, const std::string& display);

}  // namespace dataecho::s3
