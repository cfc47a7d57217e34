/*
 * Wire codec of the job section (docs/wire-protocol.md section 6.8): the
 * settings every member must share, at the end of HELLO, WELCOME and JOIN.
 */
#include "wire/wire_int.h"

int nexar__wire_job_len(const nexar__job_t *job) {
  if (!job || !job->n) return 0;
  if (job->n != NEXAR__JOB_VALUES) return NEXAR_ERR_INVALID_ARG;
  for (uint32_t i = 0; i < NEXAR__JOB_VALUES; i++)
    if (job->v[i] > NEXAR__JOB_VALUE_MAX) return NEXAR_ERR_INVALID_ARG;
  return (int)JOB_BYTES;
}

void nexar__wire_job_put(uint8_t *p, const nexar__job_t *job) {
  nexar__put_u16(p, JOB_MARK);
  p[2] = job->n;
  for (uint32_t i = 0; i < NEXAR__JOB_VALUES; i++)
    nexar__put_u64(p + 3 + 8 * i, job->v[i]);
}

int64_t nexar__wire_job_split(const uint8_t *p, size_t r, size_t sect,
                              nexar__job_t *job) {
  job->n = 0;
  if (r == 0 || r == sect) return (int64_t)r;
  if (r != JOB_BYTES && r != sect + JOB_BYTES) return NEXAR_ERR_PROTO;
  const uint8_t *x = p + r - JOB_BYTES;
  if (nexar__get_u16(x) != JOB_MARK || x[2] != NEXAR__JOB_VALUES)
    return NEXAR_ERR_PROTO;
  nexar__job_t d = {.n = NEXAR__JOB_VALUES};
  for (uint32_t i = 0; i < NEXAR__JOB_VALUES; i++) {
    d.v[i] = nexar__get_u64(x + 3 + 8 * i);
    if (d.v[i] > NEXAR__JOB_VALUE_MAX) return NEXAR_ERR_PROTO;
  }
  *job = d;
  return (int64_t)(r - JOB_BYTES);
}
