/*
 * The job section (docs/wire-protocol.md section 6.8) at the end of HELLO,
 * WELCOME and JOIN: round trips with and without the host section or
 * extension before it, and every malformed form refused (each length
 * between, a bad mark or count, a value of 0 or above the bound); and
 * how a member adopts the job's values (nexar__params_job_adopt).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include "base/param.h"
#include "wire/wire_int.h"

static uint8_t buf[1 << 16];
static nexar__roster_entry_t roster[8];
static uint32_t ids[8];
static const nexar__job_t job = {NEXAR__JOB_VALUES, {1024, 4096, 8192, 0}};

static void fill_roster(uint32_t n, int hosts) {
  memset(roster, 0, sizeof roster);
  for (uint32_t i = 0; i < n; i++) {
    roster[i].addr.family = 4;
    roster[i].addr.port = (uint16_t)(1000 + i);
    roster[i].addr.ip[0] = 10;
    roster[i].addr.ip[3] = (uint8_t)i;
    memset(roster[i].fingerprint, (int)(0x30 + i), NEXAR__FP_BYTES);
    roster[i].host.key = hosts ? 0x1000u + i : 0;
    roster[i].host.pid = hosts ? 100u + i : 0;
  }
}

static void assert_job(const nexar__job_t *j) {
  assert_int_equal(j->n, NEXAR__JOB_VALUES);
  for (uint32_t i = 0; i < NEXAR__JOB_VALUES; i++)
    assert_true(j->v[i] == job.v[i]);
}

/* The job section ends |body| (|len| bytes) whose decoder is |dec|, which
 * accepts it as is and without it (|without|): every length between but
 * |other| (0: none; a HELLO cut there reads as one with a host extension),
 * a byte more, a bad mark, another count (3: the section before
 * NEXAR_MESH_LAZY_MIN joined it) and values above the bound are refused. */
static void refuse_forms(int (*dec)(const uint8_t *, size_t), uint8_t *body,
                         size_t len, size_t without, size_t other) {
  assert_int_equal(dec(body, len), 0);
  assert_int_equal(dec(body, without), 0);
  for (size_t k = without + 1; k < len; k++)
    assert_int_equal(dec(body, k), k == other ? 0 : NEXAR_ERR_PROTO);
  body[len] = 0;
  assert_int_equal(dec(body, len + 1), NEXAR_ERR_PROTO);
  uint8_t *x = body + len - JOB_BYTES;
  static const size_t at[] = {0, 2, 2, 3, 3 + 8 * (NEXAR__JOB_VALUES - 1)};
  static const uint64_t bad[] = {0xffff, 3, 5, NEXAR__JOB_VALUE_MAX + 1,
                                 NEXAR__JOB_VALUE_MAX + 1};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    uint8_t keep[8];
    memcpy(keep, x + at[i], 8);
    if (at[i] == 0)
      nexar__put_u16(x, (uint16_t)bad[i]);
    else if (at[i] == 2)
      x[2] = (uint8_t)bad[i];
    else
      nexar__put_u64(x + at[i], bad[i]);
    assert_int_equal(dec(body, len), NEXAR_ERR_PROTO);
    memcpy(x + at[i], keep, 8);
  }
  assert_int_equal(dec(body, len), 0);
}

static int hello_dec(const uint8_t *b, size_t n) {
  nexar__seed_hello_t h;
  return nexar__seed_hello_decode(&h, b, n);
}
static int welcome_dec(const uint8_t *b, size_t n) {
  nexar__seed_welcome_t w;
  return nexar__seed_welcome_decode(&w, b, n);
}
static int join_dec(const uint8_t *b, size_t n) {
  nexar__seed_join_t j;
  return nexar__seed_join_decode(&j, b, n);
}

static void test_hello_job(void **state) {
  (void)state;
  for (int host = 0; host < 2; host++) {
    nexar__seed_hello_t h, d;
    memset(&h, 0, sizeof h);
    h.rank = -1;
    h.pid = 7;
    strcpy(h.host, "node");
    h.cert_len = 40;
    strcpy(h.topo, "kregular:2");
    h.host_key = host ? 0xabcdu : 0;
    h.job = job;
    int n = nexar__seed_hello_encode(&h, buf, sizeof buf);
    size_t id_len = HELLO_FIXED + 4 + HELLO_EXT_FIXED + 40 + 10;
    size_t ext = host ? HELLO_HOST_BYTES : 0;
    assert_int_equal(n,
                     (int)(NEXAR__SEED_FRAME_HDR + id_len + ext + JOB_BYTES));
    uint8_t *b = buf + NEXAR__SEED_FRAME_HDR;
    assert_int_equal(nexar__seed_hello_decode(&d, b, (size_t)n - 8), 0);
    assert_job(&d.job);
    assert_true(d.host_key == h.host_key);
    assert_string_equal(d.topo, "kregular:2");
    assert_int_equal(nexar__seed_hello_decode(&d, b, id_len + ext), 0);
    assert_int_equal(d.job.n, 0);
    refuse_forms(hello_dec, b, (size_t)n - 8, id_len + ext,
                 host ? 0 : id_len + HELLO_HOST_BYTES);
  }
  /* Encoder: a job without the identity extension, a count or value out
   * of bounds. */
  nexar__seed_hello_t h;
  memset(&h, 0, sizeof h);
  h.rank = -1;
  h.job = job;
  assert_int_equal(nexar__seed_hello_encode(&h, buf, sizeof buf),
                   NEXAR_ERR_INVALID_ARG);
  h.cert_len = 40;
  h.job.n = 2;
  assert_int_equal(nexar__seed_hello_encode(&h, buf, sizeof buf),
                   NEXAR_ERR_INVALID_ARG);
  h.job = job;
  h.job.v[1] = NEXAR__JOB_VALUE_MAX + 1;
  assert_int_equal(nexar__seed_hello_encode(&h, buf, sizeof buf),
                   NEXAR_ERR_INVALID_ARG);
}

static void test_welcome_job(void **state) {
  (void)state;
  enum { WS = 5 };
  static uint8_t der[WS][30];
  const uint8_t *pc[WS];
  uint16_t cl[WS];
  for (int i = 0; i < WS; i++) {
    memset(der[i], i, sizeof der[i]);
    pc[i] = der[i];
    cl[i] = (uint16_t)(10 + i);
  }
  for (int k = 0; k < 4; k++) {
    int certs = k & 1, hosts = k >> 1;
    fill_roster(WS, hosts);
    int n = nexar__seed_welcome_encode_job(2, WS, roster, certs ? pc : NULL,
                                           certs ? cl : NULL, &job, buf,
                                           sizeof buf);
    size_t base = WELCOME_FIXED + WS * ENTRY_BYTES;
    for (int i = 0; certs && i < WS; i++) base += 2u + cl[i];
    if (hosts) base += 2u + WS * HOST_BYTES;
    assert_int_equal(n, (int)(NEXAR__SEED_FRAME_HDR + base + JOB_BYTES));
    uint8_t *b = buf + NEXAR__SEED_FRAME_HDR;
    nexar__seed_welcome_t w;
    assert_int_equal(nexar__seed_welcome_decode(&w, b, (size_t)n - 8), 0);
    assert_job(&w.job);
    assert_true((w.hosts != NULL) == (hosts != 0));
    assert_true((w.certs != NULL) == (certs != 0));
    nexar__roster_entry_t e;
    assert_int_equal(nexar__welcome_entry(&w, WS - 1, &e), 0);
    assert_true(e.host.key == roster[WS - 1].host.key);
    refuse_forms(welcome_dec, b, (size_t)n - 8, base, 0);
  }
  /* No job: the same bytes as before the section existed. */
  fill_roster(WS, 0);
  nexar__job_t none = {0};
  assert_int_equal(
      nexar__seed_welcome_encode_job(2, WS, roster, NULL, NULL, &none, buf,
                                     sizeof buf),
      (int)(NEXAR__SEED_FRAME_HDR + WELCOME_FIXED + WS * ENTRY_BYTES));
  nexar__job_t bad = job;
  bad.v[3] = NEXAR__JOB_VALUE_MAX + 1;
  assert_int_equal(nexar__seed_welcome_encode_job(2, WS, roster, NULL, NULL,
                                                  &bad, buf, sizeof buf),
                   NEXAR_ERR_INVALID_ARG);
}

static void test_join_job(void **state) {
  (void)state;
  enum { NIDS = 6, NM = 4 };
  for (int hosts = 0; hosts < 2; hosts++) {
    fill_roster(NIDS, hosts);
    for (uint32_t i = 0; i < NM; i++) ids[i] = NIDS - NM + i;
    nexar__seed_join_t j = {.id = NIDS - 1,
                            .nids = NIDS,
                            .comm_id = 9,
                            .epoch = 2,
                            .nmembers = NM,
                            .job = job},
                       d;
    int n = nexar__seed_join_encode(&j, roster, ids, buf, sizeof buf);
    size_t base = JOIN_FIXED + NIDS * ENTRY_BYTES + 4 * NM;
    if (hosts) base += NIDS * HOST_BYTES;
    assert_int_equal(n, (int)(NEXAR__SEED_FRAME_HDR + base + JOB_BYTES));
    uint8_t *b = buf + NEXAR__SEED_FRAME_HDR;
    assert_int_equal(nexar__seed_join_decode(&d, b, (size_t)n - 8), 0);
    assert_job(&d.job);
    assert_true((d.hosts != NULL) == (hosts != 0));
    refuse_forms(join_dec, b, (size_t)n - 8, base, 0);
    j.job.n = 1;
    assert_int_equal(nexar__seed_join_encode(&j, roster, ids, buf, sizeof buf),
                     NEXAR_ERR_INVALID_ARG);
  }
}

static void test_adopt(void **state) {
  (void)state;
  static nexar__params_t p, keep;
  char err[256];
  assert_int_equal(nexar__params_load(&p, NULL, err, sizeof err), 0);
  p.relay_window_bytes = 2048;
  keep = p;
  /* Nothing to adopt. */
  nexar__job_t none = {0};
  assert_int_equal(nexar__params_job_adopt(&p, &none, 3, 0, err, sizeof err),
                   0);
  assert_memory_equal(&p, &keep, sizeof p);
  /* Out of a setting's range (within the wire's bounds): refused, naming
   * it, nothing changed. */
  nexar__job_t bad = job;
  bad.v[0] = 1u << 25; /* NEXAR_EAGER_BYTES is at most 2^24 */
  assert_int_equal(nexar__params_job_adopt(&p, &bad, 3, 0, err, sizeof err),
                   NEXAR_ERR_PROTO);
  assert_non_null(strstr(err, "NEXAR_EAGER_BYTES=33554432"));
  bad = job;
  bad.v[2] = 1024; /* NEXAR_SEG_BYTES is at least 4096 */
  assert_int_equal(nexar__params_job_adopt(&p, &bad, 3, 0, err, sizeof err),
                   NEXAR_ERR_PROTO);
  assert_non_null(strstr(err, "NEXAR_SEG_BYTES"));
  bad = job;
  bad.v[3] = (1u << 20) + 1; /* NEXAR_MESH_LAZY_MIN is at most 2^20 */
  assert_int_equal(nexar__params_job_adopt(&p, &bad, 3, 0, err, sizeof err),
                   NEXAR_ERR_PROTO);
  assert_non_null(strstr(err, "NEXAR_MESH_LAZY_MIN"));
  bad = job;
  bad.v[0] = 0; /* the wire carries 0; NEXAR_EAGER_BYTES is at least 1024 */
  assert_int_equal(nexar__params_job_adopt(&p, &bad, 3, 0, err, sizeof err),
                   NEXAR_ERR_PROTO);
  assert_memory_equal(&p, &keep, sizeof p);
  /* Adopted; the relay window raised to the eager size. */
  nexar__job_t j = {NEXAR__JOB_VALUES, {8192, 65536, 1 << 20, 2}};
  assert_int_equal(nexar__params_job_adopt(&p, &j, 3, 0, err, sizeof err), 0);
  assert_int_equal(p.eager_bytes, 8192);
  assert_int_equal(p.relay_credit_bytes, 65536);
  assert_int_equal(p.seg_bytes, 1 << 20);
  assert_int_equal(p.mesh_lazy_min, 2);
  assert_int_equal(p.relay_window_bytes, 8192);
  /* What a HELLO carries is what was adopted. */
  nexar__job_t got;
  nexar__params_job_get(&p, &got);
  assert_int_equal(got.n, NEXAR__JOB_VALUES);
  assert_memory_equal(got.v, j.v, sizeof j.v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hello_job),
      cmocka_unit_test(test_welcome_job),
      cmocka_unit_test(test_join_job),
      cmocka_unit_test(test_adopt),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
