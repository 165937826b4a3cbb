// The gateway's local certificate authority; see local_ca.h.
#include "app/gateway/local_ca.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/config_error.h"

namespace sluice::app::gateway {
namespace {

namespace fs = std::filesystem;

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

[[noreturn]] void fail(const std::string& what) {
  std::string reason;
  while (unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    reason += std::string(reason.empty() ? ": " : "; ") + text;
  }
  throw ConfigError("local CA: " + what + reason);
}

Key new_key() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) fail("cannot make a P-256 key");
  return key;
}

std::string pem_of(const Cert& cert) {
  Bio out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_X509(out.get(), cert.get()) != 1) fail("cannot write a certificate");
  char* data = nullptr;
  const long n = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string pem_of(const Key& key) {
  Bio out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_PrivateKey(out.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1)
    fail("cannot write a key");
  char* data = nullptr;
  const long n = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

// `text` to `path` through a new file of `mode` renamed over it.
void write_file(const fs::path& path, const std::string& text, mode_t mode) {
  const auto tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) throw ConfigError("local CA: " + tmp + ": cannot be written: " + std::strerror(errno));
  std::size_t done = 0;
  while (done < text.size()) {
    const auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int why = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw ConfigError("local CA: " + tmp + ": cannot be written: " + std::strerror(why));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int why = errno;
    ::unlink(tmp.c_str());
    throw ConfigError("local CA: " + path.string() + ": cannot be written: " + std::strerror(why));
  }
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("local CA: " + path.string() + ": cannot be read: " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Only its owner may use it: a CA key others can read signs certificates for any name.
void owner_only(const fs::path& path, mode_t allowed) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw ConfigError("local CA: " + path.string() + ": " + std::strerror(errno));
  if (st.st_uid != ::geteuid())
    throw ConfigError("local CA: " + path.string() + " belongs to uid " + std::to_string(st.st_uid) +
                      ", not to this user: give each user a CA of their own (SLUICE_CA_DIR)");
  if ((st.st_mode & 0777 & ~allowed) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 0777);
    throw ConfigError("local CA: " + path.string() + " has mode " + mode + ": others may use it; chmod it to " +
                      (allowed == 0700 ? "0700" : "0600") + " (or remove the directory to make a new CA)");
  }
}

void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) fail("cannot make the extension " + std::string(OBJ_nid2sn(nid)) + "=" + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A certificate for `key`'s public half, named `common_name`, signed by `issuer`'s `signer` (a server's,
// for the subject alternative names `san`), else by itself (the CA's).
Cert make_cert(const Key& key, const std::string& common_name, long days, X509* issuer, EVP_PKEY* signer,
               const std::string& san = "") {
  Cert cert(X509_new());
  if (!cert) fail("cannot make a certificate");
  X509_set_version(cert.get(), 2);
  std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>> serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())))
    fail("cannot make a serial number");
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), days * 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("sluice local development"),
                             -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name);
  X509* issuing = issuer ? issuer : cert.get();
  add_extension(cert.get(), issuing, NID_subject_key_identifier, "hash");
  if (issuer) add_extension(cert.get(), issuing, NID_authority_key_identifier, "keyid:always");
  if (issuer) {
    add_extension(cert.get(), issuing, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert.get(), issuing, NID_key_usage, "critical,digitalSignature");
    add_extension(cert.get(), issuing, NID_ext_key_usage, "serverAuth");
    if (!san.empty()) add_extension(cert.get(), issuing, NID_subject_alt_name, san);
  } else {
    add_extension(cert.get(), issuing, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
    add_extension(cert.get(), issuing, NID_key_usage, "critical,keyCertSign,cRLSign");
  }
  if (X509_sign(cert.get(), signer ? signer : key.get(), EVP_sha256()) <= 0) fail("cannot sign a certificate");
  return cert;
}

}  // namespace

fs::path default_ca_dir() {
  if (const char* dir = std::getenv("SLUICE_CA_DIR"); dir && *dir) return dir;
  if (const char* data = std::getenv("XDG_DATA_HOME"); data && *data) return fs::path(data) / "sluice" / "ca";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/") / ".local" / "share" / "sluice" / "ca";
}

LocalCa load_or_create_ca(const fs::path& dir) {
  LocalCa ca{dir};
  std::error_code ec;
  const bool has_cert = fs::exists(ca.cert_file(), ec), has_key = fs::exists(ca.key_file(), ec);
  if (has_cert != has_key)
    throw ConfigError("local CA: " + dir.string() + " holds " + (has_cert ? "ca.pem without ca-key.pem" : "ca-key.pem without ca.pem") +
                      ": remove the directory to make a new CA");
  if (!has_cert) {
    fs::create_directories(dir.parent_path(), ec);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      throw ConfigError("local CA: " + dir.string() + ": cannot be made: " + std::strerror(errno));
    owner_only(dir, 0700);
    auto key = new_key();
    auto cert = make_cert(key, "sluice local CA " + std::to_string(::geteuid()) + "@" + [] {
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      return std::string(host);
    }(), 10 * 365, nullptr, nullptr);
    write_file(ca.key_file(), pem_of(key), 0600);
    write_file(ca.cert_file(), pem_of(cert), 0644);
    ca.created = true;
  }
  owner_only(dir, 0700);
  owner_only(ca.key_file(), 0600);
  return ca;
}

void issue_server_cert(const LocalCa& ca, const std::vector<std::string>& names, const fs::path& cert_file,
                       const fs::path& key_file) {
  const auto ca_pem = read_file(ca.cert_file()), ca_key_pem = read_file(ca.key_file());
  Bio cert_in(BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size())));
  Cert ca_cert(PEM_read_bio_X509(cert_in.get(), nullptr, nullptr, nullptr));
  Bio key_in(BIO_new_mem_buf(ca_key_pem.data(), static_cast<int>(ca_key_pem.size())));
  Key ca_key(PEM_read_bio_PrivateKey(key_in.get(), nullptr, nullptr, nullptr));
  if (!ca_cert || !ca_key) fail(ca.dir.string() + ": ca.pem or ca-key.pem is not PEM");
  if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1) fail(ca.dir.string() + ": ca.pem and ca-key.pem are not a pair");
  std::string san;
  for (const auto& n : names) {
    in6_addr v6{};
    in_addr v4{};
    const bool ip = ::inet_pton(AF_INET, n.c_str(), &v4) == 1 || ::inet_pton(AF_INET6, n.c_str(), &v6) == 1;
    san += (san.empty() ? "" : ",") + std::string(ip ? "IP:" : "DNS:") + n;
  }
  auto key = new_key();
  // The subject alternative names are the certificate's names; the common name repeats the first.
  auto cert = make_cert(key, names.empty() ? "localhost" : names.front(), 397, ca_cert.get(), ca_key.get(), san);
  write_file(key_file, pem_of(key), 0600);
  write_file(cert_file, pem_of(cert) + pem_of(ca_cert), 0644);
}

}  // namespace sluice::app::gateway
