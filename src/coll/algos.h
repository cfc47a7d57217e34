/*
 * Helpers shared by the collective algorithm builders (algos_*.c): segmented
 * transfers and the ring reduce-scatter that both reduce_scatter and the
 * large-message reduce use.
 */
#ifndef NEXAR_ALGOS_H
#define NEXAR_ALGOS_H

#include "coll/sched.h"

/* Elements in one pipeline segment: NEXAR_SEG_BYTES, at least one. */
static inline uint64_t nexar__seg_elems(const nexar__sched_t *s) {
  uint64_t e = (uint64_t)s->comm->ctx->prm.seg_bytes / s->a.es;
  return e ? e : 1;
}

/* Sends (|send|) or receives |cnt| elements at |buf| + |off| bytes to or
 * from |peer| as one message per segment (one empty message when |cnt| is
 * 0). Both ends cut the same way, so lengths and step ids agree. */
static inline void nexar__xfer_segs(nexar__sched_t *s, bool send, int buf,
                                    uint64_t off, uint64_t cnt, int peer) {
  uint64_t seg = nexar__seg_elems(s), es = s->a.es;
  for (uint64_t o = 0; o == 0 || o < cnt; o += seg) {
    uint64_t c = cnt - o < seg ? cnt - o : seg;
    if (send)
      nexar__sched_send(s, buf, off + o * es, c * es, peer);
    else
      nexar__sched_recv(s, buf, off + o * es, c * es, peer);
  }
}
/* Receives |cnt| elements from |peer| segment by segment (cut as
 * nexar__xfer_segs cuts) into scratch at |tmp| bytes, and combines each
 * segment as it lands: dst[dst_off + o] = dst[..] op src[src_off + o]. */
static inline void nexar__recv_reduce_segs(nexar__sched_t *s, int peer,
                                           uint64_t cnt, uint64_t tmp, int dst,
                                           uint64_t dst_off, int src,
                                           uint64_t src_off) {
  uint64_t seg = nexar__seg_elems(s), es = s->a.es;
  /* Combining what lands with what dst holds: fold it in as it arrives. */
  bool direct =
      src == NEXAR__BUF_TMP && src_off == tmp && es <= NEXAR__FOLD_MAX_ES;
  for (uint64_t o = 0; o == 0 || o < cnt; o += seg) {
    uint64_t b = (cnt - o < seg ? cnt - o : seg) * es, at = o * es;
    if (direct && b) {
      nexar__sched_recv_fold(s, dst, dst_off + at, b, peer, false);
      continue;
    }
    nexar__sched_recv(s, NEXAR__BUF_TMP, tmp + at, b, peer);
    nexar__sched_reduce(s, dst, dst_off + at, src, src_off + at, b);
  }
}
/* The same where the rank's own operand is not in dst yet but at |own| +
 * |own_off| (an out-of-place call's send buffer): dst[dst_off + o] =
 * own[own_off + o] op incoming, folded as it lands, so the input is never
 * copied into dst first; elements too large to fold take the copy. */
static inline void nexar__recv_reduce_own_segs(nexar__sched_t *s, int peer,
                                               uint64_t cnt, uint64_t tmp,
                                               int dst, uint64_t dst_off,
                                               int own, uint64_t own_off) {
  uint64_t seg = nexar__seg_elems(s), es = s->a.es;
  if (es > NEXAR__FOLD_MAX_ES) {
    nexar__sched_copy(s, dst, dst_off, own, own_off, cnt * es);
    nexar__recv_reduce_segs(s, peer, cnt, tmp, dst, dst_off, NEXAR__BUF_TMP,
                            tmp);
    return;
  }
  for (uint64_t o = 0; o == 0 || o < cnt; o += seg) {
    uint64_t b = (cnt - o < seg ? cnt - o : seg) * es, at = o * es;
    if (b)
      nexar__sched_recv_fold_own(s, dst, dst_off + at, own, own_off + at, b,
                                 peer, false);
    else
      nexar__sched_recv(s, NEXAR__BUF_TMP, tmp, 0, peer);
  }
}
#define nexar__send_segs(s, buf, off, cnt, peer) \
  nexar__xfer_segs((s), true, (buf), (off), (cnt), (peer))
#define nexar__recv_segs(s, buf, off, cnt, peer) \
  nexar__xfer_segs((s), false, (buf), (off), (cnt), (peer))

/*
 * Ring reduce-scatter (Patarasuk & Yuan 2009) of the comm size blocks laid
 * out contiguously in rank order at |in_buf| + |in_off| bytes, block b
 * being cnt[b] elements. Rank r ends with block r combined over all ranks
 * (not finalized); its location is returned in *res_buf / *res_off. Defined
 * in algos_all.c.
 */
void nexar__ring_reduce_scatter(nexar__sched_t *s, int in_buf, uint64_t in_off,
                                const size_t *cnt, int *res_buf,
                                uint64_t *res_off);

#endif /* NEXAR_ALGOS_H */
