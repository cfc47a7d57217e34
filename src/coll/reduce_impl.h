/*
 * Private interface between the reduction dispatcher (reduce.c) and the
 * vectorized kernel families (reduce_avx2.c, reduce_avx512.c). Only those
 * files and the reduction tests include it.
 *
 * A vector kernel computes out[i] = a[i] op b[i] for a prefix of the range
 * and returns how many elements it handled (a multiple of its vector
 * width); the dispatcher finishes the tail with the portable kernel. Doing
 * the tail in one place keeps every family bit-identical to the portable
 * code without each file carrying its own scalar copy.
 */
#ifndef NEXAR_REDUCE_IMPL_H
#define NEXAR_REDUCE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "coll/reduce.h"

/* The vector families only exist on x86; elsewhere their source files
 * compile to nothing and the dispatcher always picks the portable code. */
#if defined(__x86_64__) || defined(__i386__)
#define NEXAR__REDUCE_X86 1
#else
#define NEXAR__REDUCE_X86 0
#endif

/* Canonical quiet NaNs produced by every float path. */
#define NEXAR__QNAN_F16 0x7e00u
#define NEXAR__QNAN_BF16 0x7fc0u
#define NEXAR__QNAN_F32 0x7fc00000u
#define NEXAR__QNAN_F64 0x7ff8000000000000ull

/* Handles a prefix of [0, n) and returns its length. out may equal a or b;
 * no pointer needs any alignment. */
typedef size_t (*nexar__reduce_vfn)(void *out, const void *a, const void *b,
                                    size_t n);

/* One kernel family. A NULL entry means "not vectorized": the portable
 * kernel does the whole range. AVG entries are the SUM kernels. */
struct nexar__reduce_family {
  const char *name;
  nexar__reduce_vfn fn[NEXAR_NUM_DTYPES][NEXAR_NUM_OPS];
};

#if NEXAR__REDUCE_X86
extern const struct nexar__reduce_family nexar__reduce_family_avx2;
extern const struct nexar__reduce_family nexar__reduce_family_avx512;
#endif

/* Forces the kernel family as NEXAR_REDUCE_ISA would ("portable", "avx2",
 * "avx512"; an unknown name means the best one the CPU has). A family the
 * CPU lacks falls back to the best one below it. NULL restores the default
 * choice (NEXAR_REDUCE_ISA, else the best). Returns the name of the family
 * now in use. Meant for tests and benchmarks: callers must not run
 * reductions on other threads at the same time if they need a stable
 * answer. */
const char *nexar__reduce_force_isa(const char *name);

#endif /* NEXAR_REDUCE_IMPL_H */
