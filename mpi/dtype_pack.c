/*
 * Packing datatypes into contiguous buffers and back (for nexar, which
 * sends contiguous bytes), MPI_Pack / MPI_Unpack, status element counts,
 * addresses, and the decoding of derived types (envelope, contents).
 */
#include <stdlib.h>
#include <string.h>

#include "mpi_int.h"

void nxm_pack(const void *buf, size_t count, const nxm_dtype_t *t, void *out) {
  char *o = out;
  if (t->contig) {
    memcpy(o, buf, count * (size_t)t->size);
    return;
  }
  for (size_t i = 0; i < count; i++) {
    const char *base = (const char *)buf + (MPI_Aint)i * t->extent;
    for (size_t k = 0; k < t->nblocks; k++) {
      memcpy(o, base + t->blocks[k].disp, (size_t)t->blocks[k].len);
      o += t->blocks[k].len;
    }
  }
}

void nxm_unpack(const void *in, size_t bytes, size_t count,
                const nxm_dtype_t *t, void *buf) {
  const char *p = in;
  size_t left = bytes;
  if (left > count * (size_t)t->size) left = count * (size_t)t->size;
  if (t->contig) {
    memcpy(buf, p, left);
    return;
  }
  for (size_t i = 0; i < count && left > 0; i++) {
    char *base = (char *)buf + (MPI_Aint)i * t->extent;
    for (size_t k = 0; k < t->nblocks && left > 0; k++) {
      size_t n = (size_t)t->blocks[k].len;
      if (n > left) n = left;
      memcpy(base + t->blocks[k].disp, p, n);
      p += n;
      left -= n;
    }
  }
}

int nxm_view_make(const void *buf, size_t count, const nxm_dtype_t *t, int pack,
                  nxm_view_t *v) {
  v->bytes = count * (size_t)t->size;
  v->tmp = NULL;
  if (t->contig) {
    v->ptr = (void *)buf;
    return MPI_SUCCESS;
  }
  v->tmp = malloc(v->bytes ? v->bytes : 1);
  if (!v->tmp) return MPI_ERR_NO_MEM;
  if (pack) nxm_pack(buf, count, t, v->tmp);
  v->ptr = v->tmp;
  return MPI_SUCCESS;
}

void nxm_view_free(nxm_view_t *v) {
  free(v->tmp);
  v->tmp = NULL;
  v->ptr = NULL;
}

/* ---- Status */

void nxm_status_set(MPI_Status *st, int source, int tag, int error,
                    size_t bytes) {
  if (!st) return;
  st->MPI_SOURCE = source;
  st->MPI_TAG = tag;
  st->MPI_ERROR = error;
  uint64_t b = bytes;
  memcpy(&st->mpi_private[0], &b, sizeof b);
  st->mpi_private[2] = 0;
}

size_t nxm_status_bytes(const MPI_Status *st) {
  uint64_t b;
  memcpy(&b, &st->mpi_private[0], sizeof b);
  return (size_t)b;
}

void nxm_status_empty(MPI_Status *st) {
  nxm_status_set(st, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_SUCCESS, 0);
}

int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count) {
  nxm_dtype_t *t = nxm_dtype_get(datatype);
  if (!t) return nxm_err(NULL, MPI_ERR_TYPE, "MPI_Get_count", "invalid");
  if (!status || !count)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Get_count", "NULL");
  size_t b = nxm_status_bytes(status);
  if (t->size == 0)
    *count = 0;
  else if (b % (size_t)t->size || b / (size_t)t->size > 0x7fffffff)
    *count = MPI_UNDEFINED;
  else
    *count = (int)(b / (size_t)t->size);
  return MPI_SUCCESS;
}

int MPI_Get_elements_x(const MPI_Status *status, MPI_Datatype datatype,
                       MPI_Count *count) {
  nxm_dtype_t *t = nxm_dtype_get(datatype);
  if (!t) return nxm_err(NULL, MPI_ERR_TYPE, "MPI_Get_elements", "invalid");
  if (!status || !count)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Get_elements", "NULL");
  size_t b = nxm_status_bytes(status);
  if (t->basic && t->basic->size)
    *count = b % (size_t)t->basic->size ? MPI_UNDEFINED
                                        : (MPI_Count)(b / t->basic->size);
  else
    *count = t->size && b % (size_t)t->size == 0
                 ? (MPI_Count)(b / (size_t)t->size)
                 : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

int MPI_Get_elements(const MPI_Status *status, MPI_Datatype datatype,
                     int *count) {
  MPI_Count c = 0;
  int rc = MPI_Get_elements_x(status, datatype, &c);
  if (rc == MPI_SUCCESS) *count = c > 0x7fffffff ? MPI_UNDEFINED : (int)c;
  return rc;
}

int MPI_Status_set_elements_x(MPI_Status *status, MPI_Datatype datatype,
                              MPI_Count count) {
  nxm_dtype_t *t = nxm_dtype_get(datatype);
  if (!t || !status || count < 0)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Status_set_elements", "bad args");
  size_t each = t->basic ? (size_t)t->basic->size : (size_t)t->size;
  int cancelled = status->mpi_private[2];
  nxm_status_set(status, status->MPI_SOURCE, status->MPI_TAG, status->MPI_ERROR,
                 (size_t)count * each);
  status->mpi_private[2] = cancelled;
  return MPI_SUCCESS;
}

int MPI_Status_set_elements(MPI_Status *status, MPI_Datatype datatype,
                            int count) {
  return MPI_Status_set_elements_x(status, datatype, count);
}

int MPI_Status_set_cancelled(MPI_Status *status, int flag) {
  if (!status)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Status_set_cancelled", "NULL");
  status->mpi_private[2] = flag != 0;
  return MPI_SUCCESS;
}

int MPI_Test_cancelled(const MPI_Status *status, int *flag) {
  if (!status || !flag)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Test_cancelled", "NULL");
  *flag = status->mpi_private[2] != 0;
  return MPI_SUCCESS;
}

/* ---- MPI_Pack and friends: the packed form is the typemap's data bytes
 * in order (this layer's only data representation). */

int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm,
                  int *size) {
  (void)comm;
  nxm_dtype_t *t;
  size_t bytes;
  int cls = nxm_dtype_check(datatype, incount, &t, &bytes);
  if (cls != MPI_SUCCESS)
    return nxm_err(NULL, cls, "MPI_Pack_size", "bad count or datatype");
  if (!size || bytes > 0x7fffffff)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Pack_size", "size");
  *size = (int)bytes;
  return MPI_SUCCESS;
}

int MPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype,
             void *outbuf, int outsize, int *position, MPI_Comm comm) {
  (void)comm;
  nxm_dtype_t *t;
  size_t bytes;
  int cls = nxm_dtype_check(datatype, incount, &t, &bytes);
  if (cls != MPI_SUCCESS)
    return nxm_err(NULL, cls, "MPI_Pack", "bad count or datatype");
  if (!position || *position < 0 || outsize < 0 ||
      (size_t)*position + bytes > (size_t)outsize)
    return nxm_err(NULL, MPI_ERR_TRUNCATE, "MPI_Pack", "%zu bytes do not fit",
                   bytes);
  nxm_pack(inbuf, (size_t)incount, t, (char *)outbuf + *position);
  *position += (int)bytes;
  return MPI_SUCCESS;
}

int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf,
               int outcount, MPI_Datatype datatype, MPI_Comm comm) {
  (void)comm;
  nxm_dtype_t *t;
  size_t bytes;
  int cls = nxm_dtype_check(datatype, outcount, &t, &bytes);
  if (cls != MPI_SUCCESS)
    return nxm_err(NULL, cls, "MPI_Unpack", "bad count or datatype");
  if (!position || *position < 0 || insize < 0 ||
      (size_t)*position + bytes > (size_t)insize)
    return nxm_err(NULL, MPI_ERR_TRUNCATE, "MPI_Unpack",
                   "%zu bytes are not there", bytes);
  nxm_unpack((const char *)inbuf + *position, bytes, (size_t)outcount, t,
             outbuf);
  *position += (int)bytes;
  return MPI_SUCCESS;
}

int MPI_Get_address(const void *location, MPI_Aint *address) {
  if (!address) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Get_address", "NULL");
  *address = (MPI_Aint)location;
  return MPI_SUCCESS;
}

int MPI_Address(void *location, MPI_Aint *address) {
  return MPI_Get_address(location, address);
}

MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp) {
  return (MPI_Aint)((uintptr_t)base + (uintptr_t)disp);
}

MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2) {
  return (MPI_Aint)((uintptr_t)addr1 - (uintptr_t)addr2);
}

/* ---- Decoding */

int MPI_Type_get_envelope(MPI_Datatype datatype, int *num_integers,
                          int *num_addresses, int *num_datatypes,
                          int *combiner) {
  nxm_dtype_t *t = nxm_dtype_get(datatype);
  if (!t)
    return nxm_err(NULL, MPI_ERR_TYPE, "MPI_Type_get_envelope", "invalid");
  if (!num_integers || !num_addresses || !num_datatypes || !combiner)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Type_get_envelope", "NULL");
  *num_integers = t->nints;
  *num_addresses = t->naddrs;
  *num_datatypes = t->kind == NXM_DT_PREDEF ? 0 : t->ntypes;
  *combiner = t->combiner;
  return MPI_SUCCESS;
}

int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers,
                          int max_addresses, int max_datatypes,
                          int array_of_integers[],
                          MPI_Aint array_of_addresses[],
                          MPI_Datatype array_of_datatypes[]) {
  const char *fn = "MPI_Type_get_contents";
  nxm_dtype_t *t = nxm_dtype_get(datatype);
  if (!t) return nxm_err(NULL, MPI_ERR_TYPE, fn, "invalid");
  if (t->kind == NXM_DT_PREDEF)
    return nxm_err(NULL, MPI_ERR_TYPE, fn, "%s is predefined", t->name);
  if (max_integers < t->nints || max_addresses < t->naddrs ||
      max_datatypes < t->ntypes || (t->nints && !array_of_integers) ||
      (t->naddrs && !array_of_addresses) || (t->ntypes && !array_of_datatypes))
    return nxm_err(NULL, MPI_ERR_ARG, fn, "arrays too small");
  if (t->nints)
    memcpy(array_of_integers, t->ints, (size_t)t->nints * sizeof(int));
  if (t->naddrs)
    memcpy(array_of_addresses, t->addrs, (size_t)t->naddrs * sizeof(MPI_Aint));
  for (int i = 0; i < t->ntypes; i++) {
    nxm_dtype_t *c = nxm_dtype_get(t->types[i]);
    if (c) nxm_dtype_ref(c);
    array_of_datatypes[i] = t->types[i];
  }
  return MPI_SUCCESS;
}
