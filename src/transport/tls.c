/*
 * TLS 1.3 for QUIC with GnuTLS: a locally generated identity, sessions
 * pinned to the roster's certificate fingerprints, and MACs bound to the
 * TLS session through an exporter (RFC 5705 / RFC 8446 section 7.5).
 */
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <nettle/curve25519.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "transport/quic.h"

/* TLS 1.3 only, AES-128-GCM first (about 7x faster than ChaCha20 here). */
static const char kPriority[] =
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"
    "-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:%DISABLE_TLS13_COMPAT_MODE";
static const char kExporterLabel[] = "EXPORTER-nexar-auth";

int nexar__ct_equal(const uint8_t *a, const uint8_t *b, size_t n) {
  volatile uint8_t acc = 0;
  for (size_t i = 0; i < n; i++) acc |= (uint8_t)(a[i] ^ b[i]);
  return acc == 0;
}

void nexar__mac(const uint8_t key[32], const char *label,
                const uint8_t exporter[32], uint8_t out[32]) {
  /* HMAC over label || exporter, fed in two parts (no copy, any label). */
  gnutls_hmac_hd_t h;
  if (gnutls_hmac_init(&h, GNUTLS_MAC_SHA256, key, 32) < 0) {
    memset(out, 0, 32); /* matches no peer's MAC */
    return;
  }
  gnutls_hmac(h, label, strlen(label));
  gnutls_hmac(h, exporter, 32);
  gnutls_hmac_deinit(h, out);
}

int nexar__identity_init(nexar__identity_t *id) {
  gnutls_x509_privkey_t key = NULL;
  gnutls_x509_crt_t crt = NULL;
  int rc = NEXAR_ERR_TRANSPORT;
  memset(id, 0, sizeof(*id));
  if (gnutls_certificate_allocate_credentials(&id->cred) < 0) goto fail;
  if (gnutls_x509_privkey_init(&key) < 0 ||
      gnutls_x509_privkey_generate(
          key, GNUTLS_PK_ECDSA,
          GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0) < 0)
    goto fail;
  if (gnutls_x509_crt_init(&crt) < 0) goto fail;
  /* The relay key (RFC 7748 X25519): a random clamped scalar and its
   * public point, published in the certificate as a URI. */
  gnutls_rnd(GNUTLS_RND_KEY, id->relay_sk, sizeof(id->relay_sk));
  id->relay_sk[0] &= 248;
  id->relay_sk[31] &= 127;
  id->relay_sk[31] |= 64;
  curve25519_mul_g(id->relay_pk, id->relay_sk);
  char uri[sizeof(NEXAR__RELAY_KEY_URI) + 64];
  int ul = snprintf(uri, sizeof(uri), "%s", NEXAR__RELAY_KEY_URI);
  for (int i = 0; i < 32; i++)
    ul += snprintf(uri + ul, sizeof(uri) - (size_t)ul, "%02x", id->relay_pk[i]);
  uint8_t serial[16];
  gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial));
  serial[0] &= 0x7f;
  time_t now = time(NULL);
  /* Short-lived: the certificate only lives as long as this process. */
  if (gnutls_x509_crt_set_version(crt, 3) < 0 ||
      gnutls_x509_crt_set_serial(crt, serial, sizeof(serial)) < 0 ||
      gnutls_x509_crt_set_activation_time(crt, now - 3600) < 0 ||
      gnutls_x509_crt_set_expiration_time(crt, now + 30 * 86400) < 0 ||
      gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0,
                                    "nexar", 5) < 0 ||
      gnutls_x509_crt_set_key(crt, key) < 0 ||
      gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE) < 0 ||
      gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_URI, uri,
                                           (unsigned)ul, GNUTLS_FSAN_SET) < 0 ||
      gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0) < 0)
    goto fail;
  size_t derlen = sizeof(id->cert);
  if (gnutls_x509_crt_export(crt, GNUTLS_X509_FMT_DER, id->cert, &derlen) < 0)
    goto fail;
  id->cert_len = (uint16_t)derlen;
  gnutls_hash_fast(GNUTLS_DIG_SHA256, id->cert, derlen, id->fingerprint);
  if (gnutls_certificate_set_x509_key(id->cred, &crt, 1, key) < 0) goto fail;
  rc = 0;
fail:
  if (crt) gnutls_x509_crt_deinit(crt);
  if (key) gnutls_x509_privkey_deinit(key);
  if (rc < 0) {
    if (id->cred) gnutls_certificate_free_credentials(id->cred);
    id->cred = NULL;
  }
  return rc;
}

void nexar__identity_fini(nexar__identity_t *id) {
  if (id->cred) gnutls_certificate_free_credentials(id->cred);
  id->cred = NULL;
  gnutls_memset(id->relay_sk, 0, sizeof(id->relay_sk));
}

static int hex_nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

int nexar__cert_relay_key(const uint8_t *der, size_t len, const uint8_t fp[32],
                          uint8_t pub[32]) {
  uint8_t got[32];
  gnutls_x509_crt_t crt = NULL;
  int rc = NEXAR_ERR_PROTO;
  if (!der || !len || len > NEXAR__CERT_MAX) return NEXAR_ERR_PROTO;
  gnutls_hash_fast(GNUTLS_DIG_SHA256, der, len, got);
  if (memcmp(got, fp, 32) != 0) return NEXAR_ERR_AUTH;
  gnutls_datum_t d = {(unsigned char *)der, (unsigned)len};
  if (gnutls_x509_crt_init(&crt) < 0) return NEXAR_ERR_NOMEM;
  if (gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_DER) < 0) goto out;
  const size_t pl = sizeof(NEXAR__RELAY_KEY_URI) - 1;
  for (unsigned i = 0; i < 16; i++) {
    char san[160];
    size_t sl = sizeof(san) - 1;
    unsigned crit;
    int t = gnutls_x509_crt_get_subject_alt_name(crt, i, san, &sl, &crit);
    if (t == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE) break;
    if (t != GNUTLS_SAN_URI || sl != pl + 64 ||
        memcmp(san, NEXAR__RELAY_KEY_URI, pl) != 0)
      continue;
    int ok = 1;
    for (int k = 0; k < 32; k++) {
      int hi = hex_nibble(san[pl + 2 * k]),
          lo = hex_nibble(san[pl + 2 * k + 1]);
      if (hi < 0 || lo < 0) {
        ok = 0;
        break;
      }
      pub[k] = (uint8_t)((hi << 4) | lo);
    }
    if (ok) rc = 0;
    break;
  }
out:
  gnutls_x509_crt_deinit(crt);
  return rc;
}

static const char kPairSalt[] = "nexar pair v1";
static const char kRelayLabel[] = "nexar relay v1";

static int expand(const gnutls_datum_t *prk, uint32_t from, uint32_t to,
                  uint8_t out[32]) {
  uint8_t info[sizeof(kRelayLabel) - 1 + 8];
  memcpy(info, kRelayLabel, sizeof(kRelayLabel) - 1);
  nexar__put_u32(info + sizeof(kRelayLabel) - 1, from);
  nexar__put_u32(info + sizeof(kRelayLabel) + 3, to);
  gnutls_datum_t i = {info, sizeof(info)};
  return gnutls_hkdf_expand(GNUTLS_MAC_SHA256, prk, &i, out, 32) < 0
             ? NEXAR_ERR_TRANSPORT
             : 0;
}

int nexar__pair_keys(const nexar__identity_t *id, uint32_t me, uint32_t peer,
                     const uint8_t pub[32], uint8_t tx[32], uint8_t rx[32]) {
  uint8_t shared[32], prk[32];
  int rc = NEXAR_ERR_AUTH;
  curve25519_mul(shared, id->relay_sk, pub);
  uint8_t acc = 0;
  for (int i = 0; i < 32; i++) acc |= shared[i];
  if (!acc) goto out; /* low-order point: no contribution from |peer| */
  gnutls_datum_t ikm = {shared, 32};
  gnutls_datum_t salt = {(unsigned char *)kPairSalt, sizeof(kPairSalt) - 1};
  rc = NEXAR_ERR_TRANSPORT;
  if (gnutls_hkdf_extract(GNUTLS_MAC_SHA256, &ikm, &salt, prk) < 0) goto out;
  gnutls_datum_t p = {prk, 32};
  NEXAR__CHECK_GOTO(expand(&p, me, peer, tx), rc, out);
  NEXAR__CHECK_GOTO(expand(&p, peer, me, rx), rc, out);
  rc = 0;
out:
  gnutls_memset(shared, 0, sizeof(shared));
  gnutls_memset(prk, 0, sizeof(prk));
  return rc;
}

void nexar__relay_tag(const uint8_t key[32], uint32_t origin, uint32_t dest,
                      const uint8_t hdr[NEXAR__HDR_BYTES],
                      const uint8_t hash[32], uint8_t tag[32]) {
  uint8_t msg[sizeof(kRelayLabel) - 1 + 8 + NEXAR__HDR_BYTES + 32];
  size_t o = sizeof(kRelayLabel) - 1;
  memcpy(msg, kRelayLabel, o);
  nexar__put_u32(msg + o, origin);
  nexar__put_u32(msg + o + 4, dest);
  memcpy(msg + o + 8, hdr, NEXAR__HDR_BYTES);
  memcpy(msg + o + 8 + NEXAR__HDR_BYTES, hash, 32);
  gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, 32, msg, sizeof(msg), tag);
}

/* Fingerprint (SHA-256 of the DER) of the peer's leaf certificate. */
static int peer_fingerprint(gnutls_session_t s, uint8_t fp[32]) {
  unsigned n = 0;
  const gnutls_datum_t *certs = gnutls_certificate_get_peers(s, &n);
  if (!certs || n < 1) return -1;
  gnutls_hash_fast(GNUTLS_DIG_SHA256, certs[0].data, certs[0].size, fp);
  return 0;
}

static nexar__link_t *session_conn(gnutls_session_t s) {
  ngtcp2_crypto_conn_ref *ref = gnutls_session_get_ptr(s);
  return ref->user_data;
}

/* Whether the session negotiated ALPN |want|. */
static bool negotiated(gnutls_session_t s, const char *want) {
  gnutls_datum_t alpn;
  return gnutls_alpn_get_selected_protocol(s, &alpn) == 0 &&
         alpn.size == strlen(want) && memcmp(alpn.data, want, alpn.size) == 0;
}

/* Certificate check for mesh connections: the client pins the fingerprint
 * the roster gives for the rank it dials; the server maps the client's
 * fingerprint to a rank through the roster. Returns 0 to accept. */
static int verify_mesh(gnutls_session_t s) {
  nexar__link_t *c = session_conn(s);
  uint8_t fp[32];
  if (peer_fingerprint(s, fp) < 0) {
    NEXAR__WARN(NEXAR__SUB_TLS, "rank %d: peer %s presented no certificate",
                c->ep->local_rank, c->remote_str);
    return -1;
  }
  if (!c->is_server) {
    if (!nexar__quic(c)->pin_set ||
        !nexar__ct_equal(fp, nexar__quic(c)->pin, 32)) {
      NEXAR__WARN(NEXAR__SUB_TLS,
                  "rank %d: rank %d at %s presented a certificate that is "
                  "not the one the seed registered for it",
                  c->ep->local_rank, c->peer, c->remote_str);
      return -1;
    }
    return 0;
  }
  if (!nexar__quic(c)->is_rpc && negotiated(s, NEXAR__ALPN_OBSERVE)) {
    /* Never a member, whatever its certificate: only an observer's frames
     * are read from it (cluster/observe.c). */
    if (!c->ep->ops->verify_observer || c->ep->ops->verify_observer(c->ep) < 0)
      return -1;
    c->role = NEXAR__ROLE_OBSERVE;
    return 0;
  }
  int peer = c->ep->ops->verify_client(c->ep, fp);
  if (peer < 0) {
    NEXAR__WARN(NEXAR__SUB_TLS,
                "rank %d: refused %s: its certificate belongs to no member "
                "of this cluster",
                c->ep->local_rank, c->remote_str);
    return -1;
  }
  c->peer = peer;
  return 0;
}

/* Server: refuse a client that does not offer our ALPN (a mesh endpoint
 * that takes observers offers theirs too). */
static int alpn_hook(gnutls_session_t s, unsigned htype, unsigned when,
                     unsigned incoming, const gnutls_datum_t *msg) {
  nexar__link_t *c = session_conn(s);
  if (c->role == NEXAR__ROLE_SEED) return negotiated(s, NEXAR__ALPN_SEED) - 1;
  if (nexar__quic(c)->is_rpc) return negotiated(s, NEXAR__ALPN_RPC) - 1;
  bool ok = negotiated(s, NEXAR__ALPN_MESH) ||
            (c->ep->ops->verify_observer && negotiated(s, NEXAR__ALPN_OBSERVE));
  return ok ? 0 : -1;
}

int nexar__tls_session(nexar__quic_t *q, const char *alpn) {
  nexar__link_t *c = &q->l;
  gnutls_session_t s;
  unsigned flags = (c->is_server ? GNUTLS_SERVER : GNUTLS_CLIENT) |
                   GNUTLS_NO_END_OF_EARLY_DATA;
  if (gnutls_init(&s, flags) < 0) return NEXAR_ERR_NOMEM;
  nexar__quic(c)->tls = s;
  if (gnutls_priority_set_direct(s, kPriority, NULL) < 0)
    return NEXAR_ERR_TRANSPORT;
  int r = c->is_server ? ngtcp2_crypto_gnutls_configure_server_session(s)
                       : ngtcp2_crypto_gnutls_configure_client_session(s);
  if (r != 0) return NEXAR_ERR_TRANSPORT;
  nexar__quic(c)->ref.user_data = c;
  gnutls_session_set_ptr(s, &nexar__quic(c)->ref);
  if (gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, c->ep->id.cred) < 0)
    return NEXAR_ERR_TRANSPORT;
  gnutls_datum_t proto[2] = {{(unsigned char *)alpn, (unsigned)strlen(alpn)},
                             {(unsigned char *)NEXAR__ALPN_OBSERVE,
                              (unsigned)strlen(NEXAR__ALPN_OBSERVE)}};
  if (c->is_server) {
    gnutls_handshake_set_hook_function(s, GNUTLS_HANDSHAKE_CLIENT_HELLO,
                                       GNUTLS_HOOK_POST, alpn_hook);
    bool observers = c->role == NEXAR__ROLE_MESH &&
                     c->ep->ops->verify_observer && !q->is_rpc;
    gnutls_alpn_set_protocols(
        s, proto, observers ? 2 : 1,
        GNUTLS_ALPN_MANDATORY | GNUTLS_ALPN_SERVER_PRECEDENCE);
  } else {
    gnutls_alpn_set_protocols(s, proto, 1, GNUTLS_ALPN_MANDATORY);
    gnutls_server_name_set(s, GNUTLS_NAME_DNS, "nexar", 5);
  }
  if (c->role != NEXAR__ROLE_SEED) {
    /* Mutual authentication: both sides present and check certificates. */
    if (c->is_server)
      gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_function(s, verify_mesh);
  }
  /* Seed connections authenticate both sides with MACs over the exporter
   * (see docs/wire-protocol.md); the certificate is not what is trusted. */
  return 0;
}

int nexar__tls_exporter(nexar__link_t *c, uint8_t out[32]) {
  if (gnutls_prf_rfc5705(nexar__quic(c)->tls, sizeof(kExporterLabel) - 1,
                         kExporterLabel, 0, NULL, 32, (char *)out) < 0)
    return NEXAR_ERR_TRANSPORT;
  return 0;
}
