// TLS for the service's calls (docs/service.md, Security): a server's certificate and key,
// a client's roots, read from PEM files; and the transport's settings of either.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dataecho/service/service.h"
#include "service/calls.h"

namespace dataecho::service {
namespace {

// The text of `path`; an error names `what` and the file when it cannot be read.
std::string read_pem_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) throw_error(ErrorCode::kNotFound, "service", what + ": cannot read " + path);
  return text.str();
}

// Whether `pem` holds a PEM block whose label ends with `label` ("CERTIFICATE",
// "PRIVATE KEY": "-----BEGIN EC PRIVATE KEY-----" is one).
bool has_pem_block(const std::string& pem, const std::string& label) {
  for (size_t at = pem.find("-----BEGIN "); at != std::string::npos;
       at = pem.find("-----BEGIN ", at + 1)) {
    const size_t end = pem.find("-----", at + 11);
    if (end == std::string::npos) return false;
    const std::string name = pem.substr(at + 11, end - at - 11);
    if (name.size() >= label.size() &&
        name.compare(name.size() - label.size(), label.size(), label) == 0 &&
        pem.find("-----END " + name + "-----", end) != std::string::npos)
      return true;
  }
  return false;
}

std::string read_pem(const std::string& path, const std::string& what, const std::string& label) {
  std::string pem = read_pem_file(path, what);
  if (!has_pem_block(pem, label))
    throw_error(
        ErrorCode::kInvalidArgument, "service",
        what + ": " + path + " holds no PEM " + label + " (-----BEGIN ..." + label + "-----)");
  return pem;
}

}  // namespace

TlsOptions read_server_tls(const std::string& cert_file, const std::string& key_file,
                           const std::string& cert_flag, const std::string& key_flag) {
  TlsOptions tls;
  if (cert_file.empty() && key_file.empty()) return tls;
  if (cert_file.empty() || key_file.empty())
    throw_error(ErrorCode::kInvalidArgument, "service",
                (cert_file.empty() ? cert_flag : key_flag) + " is missing: TLS needs both " +
                    cert_flag + " and " + key_flag);
  tls.cert_pem = read_pem(cert_file, cert_flag, "CERTIFICATE");
  tls.key_pem = read_pem(key_file, key_flag, "PRIVATE KEY");
  return tls;
}

std::string read_ca_roots(const std::string& ca_file, const std::string& ca_path,
                          const std::string& ca_file_what, const std::string& ca_path_what) {
  std::string roots;
  if (!ca_file.empty()) roots = read_pem(ca_file, ca_file_what, "CERTIFICATE");
  if (ca_path.empty()) return roots;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(ca_path, ec)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".pem" || ext == ".crt")) files.push_back(entry.path());
  }
  if (ec)
    throw_error(ErrorCode::kNotFound, "service",
                ca_path_what + ": cannot read the folder " + ca_path + ": " + ec.message());
  if (files.empty())
    throw_error(ErrorCode::kNotFound, "service",
                ca_path_what + ": the folder " + ca_path + " has no .pem or .crt file");
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::string pem = read_pem(f.string(), ca_path_what, "CERTIFICATE");
    if (!roots.empty() && roots.back() != '\n') roots += '\n';
    roots += pem;
  }
  return roots;
}

TransportOptions client_transport(const TlsOptions& tls) {
  TransportOptions o;
  o.tls_root_pem = tls.root_pem;
  o.tls_server_name = tls.server_name;
  return o;
}

TransportOptions server_transport(const TlsOptions& tls) {
  TransportOptions o;
  o.tls_cert_pem = tls.cert_pem;
  o.tls_key_pem = tls.key_pem;
  return o;
}

}  // namespace dataecho::service
