/*
 * compare-weights: compares two files of raw little-endian float32 values,
 * such as the parameter files written by ddp_digits --weights-out.
 *
 *   compare-weights A B [tol]
 *
 * The difference is measured relative to the scale of the weights, not of
 * each element:
 *
 *   rel = max_i |a_i - b_i| / max(max_i |a_i|, max_i |b_i|)
 *
 * An element-wise relative difference |a - b| / max(|a|, |b|) would blow up
 * for weights that happen to be close to zero, where a few float32 rounding
 * steps already make a large relative change without mattering to the model.
 * Two all-zero files compare equal; a NaN or infinity in either file counts
 * as an infinite difference.
 *
 * Prints the result and exits 0 when rel <= tol (default 1e-5), 1 when it is
 * larger, 2 on a usage or I/O error (including files of different lengths or
 * a length that is not a multiple of 4 bytes).
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TOL 1e-5

/* Reads the whole of |path| as little-endian float32 values into a new
 * array. Returns the number of values, or (size_t)-1 after printing why. */
static size_t read_floats(const char *path, float **out) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "compare-weights: cannot open %s: %s\n", path,
            strerror(errno));
    return (size_t)-1;
  }
  size_t cap = 1024, n = 0;
  float *v = malloc(cap * sizeof *v);
  unsigned char b[4];
  size_t got;
  while (v != NULL && (got = fread(b, 1, sizeof b, f)) == sizeof b) {
    if (n == cap) {
      cap *= 2;
      float *nv = realloc(v, cap * sizeof *v);
      if (nv == NULL) {
        free(v);
        v = NULL;
        break;
      }
      v = nv;
    }
    /* Assemble the value from bytes so that the host's byte order does not
     * matter. */
    uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                 (uint32_t)b[3] << 24;
    memcpy(&v[n++], &u, sizeof u);
  }
  int err = ferror(f);
  fclose(f);
  if (v == NULL) {
    fprintf(stderr, "compare-weights: out of memory reading %s\n", path);
    return (size_t)-1;
  }
  if (err) {
    fprintf(stderr, "compare-weights: cannot read %s\n", path);
    free(v);
    return (size_t)-1;
  }
  if (got != 0) {
    fprintf(stderr,
            "compare-weights: %s: length is not a multiple of 4 bytes\n", path);
    free(v);
    return (size_t)-1;
  }
  *out = v;
  return n;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr,
            "usage: compare-weights A B [tol]\n"
            "Compares two raw little-endian float32 files; exits 0 when\n"
            "max|a-b| / max(max|a|, max|b|) <= tol (default %g), 1 when\n"
            "larger, 2 on usage or I/O errors.\n",
            DEFAULT_TOL);
    return 2;
  }
  double tol = DEFAULT_TOL;
  if (argc == 4) {
    char *end;
    errno = 0;
    tol = strtod(argv[3], &end);
    if (errno != 0 || end == argv[3] || *end != '\0' || !(tol >= 0.0) ||
        !isfinite(tol)) {
      fprintf(stderr, "compare-weights: bad tolerance '%s'\n", argv[3]);
      return 2;
    }
  }

  float *a = NULL, *b = NULL;
  size_t na = read_floats(argv[1], &a);
  if (na == (size_t)-1) return 2;
  size_t nb = read_floats(argv[2], &b);
  if (nb == (size_t)-1) {
    free(a);
    return 2;
  }
  if (na != nb) {
    fprintf(stderr, "compare-weights: %s has %zu values, %s has %zu\n", argv[1],
            na, argv[2], nb);
    free(a);
    free(b);
    return 2;
  }

  double max_diff = 0.0, scale = 0.0;
  size_t worst = 0;
  int nonfinite = 0;
  for (size_t i = 0; i < na; i++) {
    double x = a[i], y = b[i];
    if (!isfinite(x) || !isfinite(y)) {
      nonfinite = 1;
      worst = i;
      break;
    }
    double d = fabs(x - y);
    if (d > max_diff) {
      max_diff = d;
      worst = i;
    }
    if (fabs(x) > scale) scale = fabs(x);
    if (fabs(y) > scale) scale = fabs(y);
  }
  double rel = nonfinite ? INFINITY : scale > 0.0 ? max_diff / scale : 0.0;
  if (nonfinite)
    printf("values %zu  non-finite value at index %zu  rel inf  tol %g\n", na,
           worst, tol);
  else
    printf(
        "values %zu  max_abs_diff %.3e (index %zu)  scale %.6g  "
        "rel %.3e  tol %g\n",
        na, max_diff, worst, scale, rel, tol);
  free(a);
  free(b);
  return rel <= tol ? 0 : 1;
}
