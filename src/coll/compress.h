/*
 * Compressed allreduce (compress.c): the selection rules, shared with the
 * tests. The public API is in include/nexar.h ("Compressed allreduce").
 */
#ifndef NEXAR_COMPRESS_H
#define NEXAR_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

/* Bins of the radix select's histogram (16 bits of the key per pass). */
#define NEXAR__TOPK_BINS 65536u

/*
 * Top-k selection: writes to idx[0..k) the indices of the k elements of
 * acc[0..count) with the largest magnitude, in increasing index order.
 * Order: the float's bits with the sign cleared, as an unsigned integer
 * (magnitude order for numbers; NaN above infinity), ties to the lower
 * index, so the set is unique. |hist| has NEXAR__TOPK_BINS entries of
 * scratch. 1 <= k <= count <= UINT32_MAX. Radix select over the 31-bit key,
 * two 16-bit digits (three passes over acc, no sort).
 */
void nexar__topk_select(const float *acc, size_t count, size_t k,
                        uint32_t *hist, uint32_t *idx);

/*
 * Random-k selection: the k indices (increasing) that every rank derives
 * from (seed, step): Knuth's selection sampling (TAOCP vol. 2, 3.4.2,
 * algorithm S) with uniforms (x >> 11) x 2^-53 from splitmix64 (Steele,
 * Lea & Flood 2014) whose state starts at seed ^ (step x
 * 0x9e3779b97f4a7c15). 1 <= k <= count <= UINT32_MAX.
 */
void nexar__randk_select(uint64_t seed, uint64_t step, size_t count, size_t k,
                         uint32_t *idx);

#endif /* NEXAR_COMPRESS_H */
