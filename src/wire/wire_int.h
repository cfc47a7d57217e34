/*
 * Private to src/wire: sizes of the seed bodies and the helpers their
 * encoders and decoders share (wire.c, wire_elastic.c).
 */
#ifndef NEXAR_WIRE_INT_H
#define NEXAR_WIRE_INT_H

#include <stdbool.h>

#include "wire/wire.h"

/* Size of an address on the wire: family, port, 16 address bytes. */
#define WADDR_BYTES 19u
/* Size of one roster entry in a WELCOME body. */
#define ENTRY_BYTES (WADDR_BYTES + NEXAR__FP_BYTES)
/* Fixed part of a HELLO body, before the host bytes. */
#define HELLO_FIXED \
  (NEXAR__MAC_BYTES + 4u + 4u + 1u + WADDR_BYTES + NEXAR__FP_BYTES + 4u + 1u)
/* Fixed part of the HELLO identity extension: u16 cert_len, u8 topo_len. */
#define HELLO_EXT_FIXED 3u
/* One host id in a host section: u64 key, u32 pid, nonce. */
#define HOST_BYTES (8u + 4u + NEXAR__NONCE_BYTES)
/* The HELLO host extension: u64 key, nonce. */
#define HELLO_HOST_BYTES (8u + NEXAR__NONCE_BYTES)
/* First two bytes of a WELCOME host section. */
#define HOST_MARK 0xffffu
/* Fixed part of a WELCOME body, before the entries. */
#define WELCOME_FIXED 8u
/* Fixed part of a REJECT body, before the reason bytes. */
#define REJECT_FIXED 6u
/* Bound on ranks and world sizes carried in HELLO. */
#define RANK_LIMIT (1 << 24)
/* Bits of the HELLO flags byte: has_addr, join. */
#define HELLO_FLAGS 3u
/* Fixed parts of the elastic bodies, before their lists. */
#define ADMIT_FIXED (NEXAR__MAC_BYTES + 8u + 4u + 4u + 4u)
#define ADMITTED_FIXED 8u
#define JOINER_BYTES (4u + ENTRY_BYTES)
#define JOIN_FIXED 24u
/* The job section (HELLO, WELCOME, JOIN): u16 JOB_MARK, u8 n, n u64. Its
 * length tells it from the host section or extension before it (no host
 * section of any world size is that long). */
#define JOB_MARK 0xfffeu
#define JOB_BYTES (3u + 8u * NEXAR__JOB_VALUES)
_Static_assert(JOB_BYTES % HOST_BYTES != 0 &&
                   (JOB_BYTES - 2u) % HOST_BYTES != 0 &&
                   JOB_BYTES != HELLO_HOST_BYTES,
               "a job section is told from a host section by its length");

int nexar__wire_frame_begin(uint8_t *out, size_t cap, uint8_t type,
                            size_t body_len);
/* Job sections (wire_job.c). Length of |job|'s section: 0 when absent
 * (NULL or n 0), JOB_BYTES when valid, NEXAR_ERR_INVALID_ARG otherwise. */
int nexar__wire_job_len(const nexar__job_t *job);
/* Writes the JOB_BYTES of |job|'s section (valid, present) at |p|. */
void nexar__wire_job_put(uint8_t *p, const nexar__job_t *job);
/* The |r| bytes at |p| that end a body: nothing, an optional section of
 * |sect| bytes, a job section, or both in that order. Reads the job
 * section into |job| (n 0 without one) and returns the length of the
 * other section (0 or |sect|), or NEXAR_ERR_PROTO (another length, a bad
 * mark, count or value). */
int64_t nexar__wire_job_split(const uint8_t *p, size_t r, size_t sect,
                              nexar__job_t *job);
int nexar__wire_waddr_valid(const nexar__waddr_t *a);
int nexar__wire_hosts_known(const uint8_t *sec, uint32_t n);
int nexar__wire_hosts_sent(const nexar__roster_entry_t *e, uint32_t n,
                           size_t stride);
void nexar__wire_hosts_put(uint8_t *p, const nexar__roster_entry_t *e,
                           uint32_t n, size_t stride);
void nexar__wire_entries_put(uint8_t *p, const nexar__roster_entry_t *e,
                             uint32_t n);
int nexar__wire_entry_get(nexar__roster_entry_t *e, const uint8_t *p,
                          const uint8_t *hosts, uint32_t i);
int nexar__wire_entries_valid(const uint8_t *p, uint32_t n);
int nexar__wire_ids_valid(const uint8_t *p, uint32_t n, uint32_t limit);

#endif
