/*
 * Reduction kernels: element-wise combination of two buffers for every
 * (datatype, op) pair nexar supports. Vectorized with runtime dispatch
 * (AVX-512 / AVX2 where the CPU has them, portable C otherwise); every path
 * gives bit-identical results, NaN included.
 *
 * Semantics:
 * - SUM, PROD on integers wrap (two's complement); on floats IEEE.
 * - MIN, MAX on floats: if either operand is NaN the result is NaN (the
 *   canonical quiet NaN of the type); -0.0 and +0.0 compare equal and the
 *   left operand (inout) wins.
 * - AVG reduces as SUM; nexar__reduce_finalize divides by the number of
 *   contributions (integers: truncation toward zero; floats: IEEE division,
 *   float16/bfloat16 in float32 then rounded).
 * - BAND, BOR, BXOR: integer types only.
 * - float16 and bfloat16 are widened to float32, combined, and rounded back
 *   to nearest-even in every step.
 */
#ifndef NEXAR_REDUCE_H
#define NEXAR_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "nexar.h"

/* NEXAR_OK when (dtype, op) is supported; NEXAR_ERR_INVALID_ARG for an out
 * of range dtype or op; NEXAR_ERR_UNSUPPORTED for a reserved dtype (fp8) or
 * a bitwise op on a float type. */
int nexar__reduce_check(nexar_dtype_t dtype, nexar_op_t op);

/* inout[i] = inout[i] op in[i] for i < count. The pair must have passed
 * nexar__reduce_check. Buffers may be unaligned; they must not overlap
 * unless equal. */
void nexar__reduce(void *inout, const void *in, size_t count,
                   nexar_dtype_t dtype, nexar_op_t op);

/* out[i] = a[i] op b[i] (out may equal a or b). */
void nexar__reduce3(void *out, const void *a, const void *b, size_t count,
                    nexar_dtype_t dtype, nexar_op_t op);

/* Final step of an op after |n| contributions were combined: divides by n
 * for AVG, nothing for the other ops. */
void nexar__reduce_finalize(void *buf, size_t count, nexar_dtype_t dtype,
                            nexar_op_t op, int n);

/* Conversions, round to nearest even; NaN stays NaN (quiet). */
float nexar__f16_to_f32(uint16_t h);
uint16_t nexar__f32_to_f16(float f);
float nexar__bf16_to_f32(uint16_t b);
uint16_t nexar__f32_to_bf16(float f);

/* Name of the kernel family chosen at run time ("avx512", "avx2",
 * "portable"); NEXAR_REDUCE_ISA=portable|avx2|avx512 forces one. */
const char *nexar__reduce_isa(void);

#endif /* NEXAR_REDUCE_H */
