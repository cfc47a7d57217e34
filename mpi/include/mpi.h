/*
 * mpi.h of nexar's MPI layer (libnexar-mpi): the MPI 3.1 C interface.
 *
 * Handles are pointers to incomplete struct types; the predefined handles
 * are small constants below 0x1000 cast to the handle type, numbered as the
 * MPI 5.0 standard ABI numbers them, so that a later build against that ABI
 * keeps every handle value (docs/mpi.md). Objects a program creates are
 * heap objects with a magic field checked on every use.
 *
 * What the layer implements and what it only declares (returning
 * MPI_ERR_UNSUPPORTED_OPERATION): docs/mpi.md.
 */
#ifndef NEXAR_MPI_H
#define NEXAR_MPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPI_VERSION 3
#define MPI_SUBVERSION 1
#define NEXAR_MPI 1

typedef intptr_t MPI_Aint;
typedef int64_t MPI_Offset;
typedef int64_t MPI_Count;
typedef int MPI_Fint;

/* MPI_SOURCE, MPI_TAG, MPI_ERROR and five private ints (the byte count
 * and the cancelled flag). */
typedef struct MPI_Status {
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
  int mpi_private[5];
} MPI_Status;

typedef struct nexar_mpi_op *MPI_Op;
typedef struct nexar_mpi_comm *MPI_Comm;
typedef struct nexar_mpi_group *MPI_Group;
typedef struct nexar_mpi_win *MPI_Win;
typedef struct nexar_mpi_file *MPI_File;
typedef struct nexar_mpi_message *MPI_Message;
typedef struct nexar_mpi_info *MPI_Info;
typedef struct nexar_mpi_errhandler *MPI_Errhandler;
typedef struct nexar_mpi_request *MPI_Request;
typedef struct nexar_mpi_datatype *MPI_Datatype;

#define MPI_OP_NULL ((MPI_Op)0x20)
#define MPI_SUM ((MPI_Op)0x21)
#define MPI_MIN ((MPI_Op)0x22)
#define MPI_MAX ((MPI_Op)0x23)
#define MPI_PROD ((MPI_Op)0x24)
#define MPI_BAND ((MPI_Op)0x28)
#define MPI_BOR ((MPI_Op)0x29)
#define MPI_BXOR ((MPI_Op)0x2a)
#define MPI_LAND ((MPI_Op)0x30)
#define MPI_LOR ((MPI_Op)0x31)
#define MPI_LXOR ((MPI_Op)0x32)
#define MPI_MINLOC ((MPI_Op)0x38)
#define MPI_MAXLOC ((MPI_Op)0x39)
#define MPI_REPLACE ((MPI_Op)0x3c)
#define MPI_NO_OP ((MPI_Op)0x3d)

#define MPI_COMM_NULL ((MPI_Comm)0x100)
#define MPI_COMM_WORLD ((MPI_Comm)0x101)
#define MPI_COMM_SELF ((MPI_Comm)0x102)
#define MPI_GROUP_NULL ((MPI_Group)0x108)
#define MPI_GROUP_EMPTY ((MPI_Group)0x109)
#define MPI_WIN_NULL ((MPI_Win)0x110)
#define MPI_FILE_NULL ((MPI_File)0x118)
#define MPI_MESSAGE_NULL ((MPI_Message)0x128)
#define MPI_MESSAGE_NO_PROC ((MPI_Message)0x129)
#define MPI_INFO_NULL ((MPI_Info)0x130)
#define MPI_INFO_ENV ((MPI_Info)0x131)
#define MPI_ERRHANDLER_NULL ((MPI_Errhandler)0x140)
#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)0x141)
#define MPI_ERRORS_RETURN ((MPI_Errhandler)0x142)
#define MPI_REQUEST_NULL ((MPI_Request)0x180)

#define MPI_DATATYPE_NULL ((MPI_Datatype)0x200)
#define MPI_AINT ((MPI_Datatype)0x201)
#define MPI_COUNT ((MPI_Datatype)0x202)
#define MPI_OFFSET ((MPI_Datatype)0x203)
#define MPI_PACKED ((MPI_Datatype)0x207)
#define MPI_SHORT ((MPI_Datatype)0x208)
#define MPI_INT ((MPI_Datatype)0x209)
#define MPI_LONG ((MPI_Datatype)0x20a)
#define MPI_LONG_LONG ((MPI_Datatype)0x20b)
#define MPI_LONG_LONG_INT MPI_LONG_LONG
#define MPI_UNSIGNED_SHORT ((MPI_Datatype)0x20c)
#define MPI_UNSIGNED ((MPI_Datatype)0x20d)
#define MPI_UNSIGNED_LONG ((MPI_Datatype)0x20e)
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)0x20f)
#define MPI_FLOAT ((MPI_Datatype)0x210)
#define MPI_C_FLOAT_COMPLEX ((MPI_Datatype)0x212)
#define MPI_C_COMPLEX MPI_C_FLOAT_COMPLEX
#define MPI_CXX_FLOAT_COMPLEX ((MPI_Datatype)0x213)
#define MPI_DOUBLE ((MPI_Datatype)0x214)
#define MPI_C_DOUBLE_COMPLEX ((MPI_Datatype)0x216)
#define MPI_CXX_DOUBLE_COMPLEX ((MPI_Datatype)0x217)
#define MPI_LONG_DOUBLE ((MPI_Datatype)0x220)
#define MPI_C_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x224)
#define MPI_CXX_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x225)
#define MPI_FLOAT_INT ((MPI_Datatype)0x228)
#define MPI_DOUBLE_INT ((MPI_Datatype)0x229)
#define MPI_LONG_INT ((MPI_Datatype)0x22a)
#define MPI_2INT ((MPI_Datatype)0x22b)
#define MPI_SHORT_INT ((MPI_Datatype)0x22c)
#define MPI_LONG_DOUBLE_INT ((MPI_Datatype)0x22d)
#define MPI_C_BOOL ((MPI_Datatype)0x238)
#define MPI_CXX_BOOL ((MPI_Datatype)0x239)
#define MPI_WCHAR ((MPI_Datatype)0x23c)
#define MPI_INT8_T ((MPI_Datatype)0x240)
#define MPI_UINT8_T ((MPI_Datatype)0x241)
#define MPI_CHAR ((MPI_Datatype)0x243)
#define MPI_SIGNED_CHAR ((MPI_Datatype)0x244)
#define MPI_UNSIGNED_CHAR ((MPI_Datatype)0x245)
#define MPI_BYTE ((MPI_Datatype)0x247)
#define MPI_INT16_T ((MPI_Datatype)0x248)
#define MPI_UINT16_T ((MPI_Datatype)0x249)
#define MPI_INT32_T ((MPI_Datatype)0x250)
#define MPI_UINT32_T ((MPI_Datatype)0x251)
#define MPI_INT64_T ((MPI_Datatype)0x258)
#define MPI_UINT64_T ((MPI_Datatype)0x259)
#define MPI_C_FLOAT16 ((MPI_Datatype)0x2a0) /* extension: IEEE binary16 */
#define MPI_LB ((MPI_Datatype)0x2b0)        /* removed in MPI 3.0 */
#define MPI_UB ((MPI_Datatype)0x2b1)        /* removed in MPI 3.0 */

/* Error classes (the layer's error codes are its classes). */
enum {
  MPI_SUCCESS = 0,
  MPI_ERR_BUFFER = 1,
  MPI_ERR_COUNT = 2,
  MPI_ERR_TYPE = 3,
  MPI_ERR_TAG = 4,
  MPI_ERR_COMM = 5,
  MPI_ERR_RANK = 6,
  MPI_ERR_REQUEST = 7,
  MPI_ERR_ROOT = 8,
  MPI_ERR_GROUP = 9,
  MPI_ERR_OP = 10,
  MPI_ERR_TOPOLOGY = 11,
  MPI_ERR_DIMS = 12,
  MPI_ERR_ARG = 13,
  MPI_ERR_UNKNOWN = 14,
  MPI_ERR_TRUNCATE = 15,
  MPI_ERR_OTHER = 16,
  MPI_ERR_INTERN = 17,
  MPI_ERR_PENDING = 18,
  MPI_ERR_IN_STATUS = 19,
  MPI_ERR_ACCESS = 20,
  MPI_ERR_AMODE = 21,
  MPI_ERR_ASSERT = 22,
  MPI_ERR_BAD_FILE = 23,
  MPI_ERR_BASE = 24,
  MPI_ERR_CONVERSION = 25,
  MPI_ERR_DISP = 26,
  MPI_ERR_DUP_DATAREP = 27,
  MPI_ERR_FILE_EXISTS = 28,
  MPI_ERR_FILE_IN_USE = 29,
  MPI_ERR_FILE = 30,
  MPI_ERR_INFO_KEY = 31,
  MPI_ERR_INFO_NOKEY = 32,
  MPI_ERR_INFO_VALUE = 33,
  MPI_ERR_INFO = 34,
  MPI_ERR_IO = 35,
  MPI_ERR_KEYVAL = 36,
  MPI_ERR_LOCKTYPE = 37,
  MPI_ERR_NAME = 38,
  MPI_ERR_NO_MEM = 39,
  MPI_ERR_NOT_SAME = 40,
  MPI_ERR_NO_SPACE = 41,
  MPI_ERR_NO_SUCH_FILE = 42,
  MPI_ERR_PORT = 43,
  MPI_ERR_PROC_ABORTED = 44,
  MPI_ERR_QUOTA = 45,
  MPI_ERR_READ_ONLY = 46,
  MPI_ERR_RMA_ATTACH = 47,
  MPI_ERR_RMA_CONFLICT = 48,
  MPI_ERR_RMA_RANGE = 49,
  MPI_ERR_RMA_SHARED = 50,
  MPI_ERR_RMA_SYNC = 51,
  MPI_ERR_RMA_FLAVOR = 52,
  MPI_ERR_SERVICE = 53,
  MPI_ERR_SESSION = 54,
  MPI_ERR_SIZE = 55,
  MPI_ERR_SPAWN = 56,
  MPI_ERR_UNSUPPORTED_DATAREP = 57,
  MPI_ERR_UNSUPPORTED_OPERATION = 58,
  MPI_ERR_VALUE_TOO_LARGE = 59,
  MPI_ERR_WIN = 60,
  MPI_ERR_ERRHANDLER = 61,
  /* User-level failure mitigation (ULFM) classes. */
  MPI_ERR_PROC_FAILED = 75,
  MPI_ERR_PROC_FAILED_PENDING = 76,
  MPI_ERR_REVOKED = 77,
  MPI_T_ERR_CANNOT_INIT = 1000,
  MPI_T_ERR_NOT_ACCESSIBLE = 1001,
  MPI_T_ERR_NOT_INITIALIZED = 1002,
  MPI_T_ERR_NOT_SUPPORTED = 1003,
  MPI_T_ERR_MEMORY = 1004,
  MPI_T_ERR_INVALID = 1005,
  MPI_T_ERR_INVALID_INDEX = 1006,
  MPI_T_ERR_INVALID_ITEM = 1007,
  MPI_T_ERR_INVALID_SESSION = 1008,
  MPI_T_ERR_INVALID_HANDLE = 1009,
  MPI_T_ERR_INVALID_NAME = 1010,
  MPI_T_ERR_OUT_OF_HANDLES = 1011,
  MPI_T_ERR_OUT_OF_SESSIONS = 1012,
  MPI_T_ERR_CVAR_SET_NOT_NOW = 1013,
  MPI_T_ERR_CVAR_SET_NEVER = 1014,
  MPI_T_ERR_PVAR_NO_WRITE = 1015,
  MPI_T_ERR_PVAR_NO_STARTSTOP = 1016,
  MPI_T_ERR_PVAR_NO_ATOMIC = 1017,
  MPI_ERR_LASTCODE = 0x3fff
};
#define MPIX_ERR_PROC_FAILED MPI_ERR_PROC_FAILED
#define MPIX_ERR_PROC_FAILED_PENDING MPI_ERR_PROC_FAILED_PENDING
#define MPIX_ERR_REVOKED MPI_ERR_REVOKED

#define MPI_BOTTOM ((void *)0)
#define MPI_IN_PLACE ((void *)1)
#define MPI_ARGV_NULL ((char **)0)
#define MPI_ARGVS_NULL ((char ***)0)
#define MPI_ERRCODES_IGNORE ((int *)0)
#define MPI_STATUS_IGNORE ((MPI_Status *)0)
#define MPI_STATUSES_IGNORE ((MPI_Status *)0)
#define MPI_UNWEIGHTED ((int *)4)
#define MPI_WEIGHTS_EMPTY ((int *)5)

#define MPI_BSEND_OVERHEAD 512
#define MPI_MAX_DATAREP_STRING 128
#define MPI_MAX_ERROR_STRING 512
#define MPI_MAX_INFO_KEY 256
#define MPI_MAX_INFO_VAL 1024
#define MPI_MAX_LIBRARY_VERSION_STRING 8192
#define MPI_MAX_OBJECT_NAME 128
#define MPI_MAX_PORT_NAME 1024
#define MPI_MAX_PROCESSOR_NAME 256

enum {
  MPI_MODE_APPEND = 1,
  MPI_MODE_CREATE = 2,
  MPI_MODE_DELETE_ON_CLOSE = 4,
  MPI_MODE_EXCL = 8,
  MPI_MODE_RDONLY = 16,
  MPI_MODE_RDWR = 32,
  MPI_MODE_SEQUENTIAL = 64,
  MPI_MODE_UNIQUE_OPEN = 128,
  MPI_MODE_WRONLY = 256,
  MPI_MODE_NOCHECK = 1024,
  MPI_MODE_NOPRECEDE = 2048,
  MPI_MODE_NOPUT = 4096,
  MPI_MODE_NOSTORE = 8192,
  MPI_MODE_NOSUCCEED = 16384
};

enum {
  MPI_ANY_SOURCE = -1,
  MPI_PROC_NULL = -2,
  MPI_ROOT = -3,
  MPI_ANY_TAG = -31,
  MPI_KEYVAL_INVALID = -127,
  MPI_DISPLACEMENT_CURRENT = -255,
  MPI_UNDEFINED = -32766
};

enum {
  MPI_THREAD_SINGLE = 0,
  MPI_THREAD_FUNNELED = 1,
  MPI_THREAD_SERIALIZED = 2,
  MPI_THREAD_MULTIPLE = 7,
  MPI_ORDER_C = 12,
  MPI_ORDER_FORTRAN = 15,
  MPI_DISTRIBUTE_NONE = 16,
  MPI_DISTRIBUTE_BLOCK = 17,
  MPI_DISTRIBUTE_CYCLIC = 18,
  MPI_DISTRIBUTE_DFLT_DARG = 19,
  MPI_LOCK_SHARED = 21,
  MPI_LOCK_EXCLUSIVE = 22,
  MPI_WIN_UNIFIED = 31,
  MPI_WIN_SEPARATE = 32,
  MPI_WIN_FLAVOR_ALLOCATE = 41,
  MPI_WIN_FLAVOR_CREATE = 42,
  MPI_WIN_FLAVOR_DYNAMIC = 43,
  MPI_WIN_FLAVOR_SHARED = 44,
  MPI_IDENT = 101,
  MPI_CONGRUENT = 102,
  MPI_SIMILAR = 103,
  MPI_UNEQUAL = 104,
  MPI_GRAPH = 201,
  MPI_DIST_GRAPH = 202,
  MPI_CART = 203,
  MPI_COMBINER_NAMED = 301,
  MPI_COMBINER_DUP = 302,
  MPI_COMBINER_CONTIGUOUS = 303,
  MPI_COMBINER_VECTOR = 304,
  MPI_COMBINER_HVECTOR = 305,
  MPI_COMBINER_INDEXED = 306,
  MPI_COMBINER_HINDEXED = 307,
  MPI_COMBINER_INDEXED_BLOCK = 308,
  MPI_COMBINER_HINDEXED_BLOCK = 309,
  MPI_COMBINER_STRUCT = 310,
  MPI_COMBINER_SUBARRAY = 311,
  MPI_COMBINER_DARRAY = 312,
  MPI_COMBINER_F90_REAL = 313,
  MPI_COMBINER_F90_COMPLEX = 314,
  MPI_COMBINER_F90_INTEGER = 315,
  MPI_COMBINER_RESIZED = 316,
  MPI_COMM_TYPE_SHARED = 401,
  MPI_TYPECLASS_INTEGER = 501,
  MPI_TYPECLASS_REAL = 502,
  MPI_TYPECLASS_COMPLEX = 503,
  MPI_SEEK_SET = 601,
  MPI_SEEK_CUR = 602,
  MPI_SEEK_END = 603
};

/* Predefined attribute keys (MPI_Comm_get_attr on MPI_COMM_WORLD). */
enum {
  MPI_TAG_UB = 0x1,
  MPI_IO = 0x2,
  MPI_HOST = 0x3,
  MPI_WTIME_IS_GLOBAL = 0x4,
  MPI_APPNUM = 0x5,
  MPI_LASTUSEDCODE = 0x6,
  MPI_UNIVERSE_SIZE = 0x7,
  MPI_WIN_BASE = 0x8,
  MPI_WIN_DISP_UNIT = 0x9,
  MPI_WIN_SIZE = 0xa,
  MPI_WIN_CREATE_FLAVOR = 0xb,
  MPI_WIN_MODEL = 0xc
};

/* Callback types. */
typedef void MPI_User_function(void *invec, void *inoutvec, int *len,
                               MPI_Datatype *datatype);
typedef int MPI_Comm_copy_attr_function(MPI_Comm oldcomm, int comm_keyval,
                                        void *extra_state,
                                        void *attribute_val_in,
                                        void *attribute_val_out, int *flag);
typedef int MPI_Comm_delete_attr_function(MPI_Comm comm, int comm_keyval,
                                          void *attribute_val,
                                          void *extra_state);
typedef int MPI_Type_copy_attr_function(MPI_Datatype oldtype, int type_keyval,
                                        void *extra_state,
                                        void *attribute_val_in,
                                        void *attribute_val_out, int *flag);
typedef int MPI_Type_delete_attr_function(MPI_Datatype datatype,
                                          int type_keyval, void *attribute_val,
                                          void *extra_state);
typedef int MPI_Win_copy_attr_function(MPI_Win oldwin, int win_keyval,
                                       void *extra_state,
                                       void *attribute_val_in,
                                       void *attribute_val_out, int *flag);
typedef int MPI_Win_delete_attr_function(MPI_Win win, int win_keyval,
                                         void *attribute_val,
                                         void *extra_state);
typedef void MPI_Comm_errhandler_function(MPI_Comm *comm, int *error_code, ...);
typedef void MPI_Win_errhandler_function(MPI_Win *win, int *error_code, ...);
typedef void MPI_File_errhandler_function(MPI_File *file, int *error_code, ...);
typedef MPI_Comm_errhandler_function MPI_Comm_errhandler_fn;
typedef MPI_Win_errhandler_function MPI_Win_errhandler_fn;
typedef MPI_File_errhandler_function MPI_File_errhandler_fn;
typedef int MPI_Grequest_query_function(void *extra_state, MPI_Status *status);
typedef int MPI_Grequest_free_function(void *extra_state);
typedef int MPI_Grequest_cancel_function(void *extra_state, int complete);
typedef int MPI_Datarep_extent_function(MPI_Datatype datatype, MPI_Aint *extent,
                                        void *extra_state);
typedef int MPI_Datarep_conversion_function(void *userbuf,
                                            MPI_Datatype datatype, int count,
                                            void *filebuf, MPI_Offset position,
                                            void *extra_state);
/* Deprecated (MPI-1) attribute callbacks. */
typedef int MPI_Copy_function(MPI_Comm oldcomm, int keyval, void *extra_state,
                              void *attribute_val_in, void *attribute_val_out,
                              int *flag);
typedef int MPI_Delete_function(MPI_Comm comm, int keyval, void *attribute_val,
                                void *extra_state);

/* Predefined callbacks: small constants the layer recognises. */
#define MPI_NULL_COPY_FN ((MPI_Copy_function *)0x0)
#define MPI_DUP_FN ((MPI_Copy_function *)0x1)
#define MPI_NULL_DELETE_FN ((MPI_Delete_function *)0x0)
#define MPI_COMM_NULL_COPY_FN ((MPI_Comm_copy_attr_function *)0x0)
#define MPI_COMM_DUP_FN ((MPI_Comm_copy_attr_function *)0x1)
#define MPI_COMM_NULL_DELETE_FN ((MPI_Comm_delete_attr_function *)0x0)
#define MPI_TYPE_NULL_COPY_FN ((MPI_Type_copy_attr_function *)0x0)
#define MPI_TYPE_DUP_FN ((MPI_Type_copy_attr_function *)0x1)
#define MPI_TYPE_NULL_DELETE_FN ((MPI_Type_delete_attr_function *)0x0)
#define MPI_WIN_NULL_COPY_FN ((MPI_Win_copy_attr_function *)0x0)
#define MPI_WIN_DUP_FN ((MPI_Win_copy_attr_function *)0x1)
#define MPI_WIN_NULL_DELETE_FN ((MPI_Win_delete_attr_function *)0x0)
#define MPI_CONVERSION_FN_NULL ((MPI_Datarep_conversion_function *)0x0)

/* Tools interface (MPI_T) handle types; the layer exposes no variables. */
typedef struct nexar_mpi_t_enum *MPI_T_enum;
typedef struct nexar_mpi_t_cvar_handle *MPI_T_cvar_handle;
typedef struct nexar_mpi_t_pvar_handle *MPI_T_pvar_handle;
typedef struct nexar_mpi_t_pvar_session *MPI_T_pvar_session;
#define MPI_T_ENUM_NULL ((MPI_T_enum)0)
#define MPI_T_CVAR_HANDLE_NULL ((MPI_T_cvar_handle)0)
#define MPI_T_PVAR_HANDLE_NULL ((MPI_T_pvar_handle)0)
#define MPI_T_PVAR_ALL_HANDLES ((MPI_T_pvar_handle)1)
#define MPI_T_PVAR_SESSION_NULL ((MPI_T_pvar_session)0)
enum {
  MPI_T_VERBOSITY_USER_BASIC = 0x09,
  MPI_T_VERBOSITY_USER_DETAIL = 0x0a,
  MPI_T_VERBOSITY_USER_ALL = 0x0c,
  MPI_T_VERBOSITY_TUNER_BASIC = 0x11,
  MPI_T_VERBOSITY_TUNER_DETAIL = 0x12,
  MPI_T_VERBOSITY_TUNER_ALL = 0x14,
  MPI_T_VERBOSITY_MPIDEV_BASIC = 0x21,
  MPI_T_VERBOSITY_MPIDEV_DETAIL = 0x22,
  MPI_T_VERBOSITY_MPIDEV_ALL = 0x24,
  MPI_T_BIND_NO_OBJECT = 0x1,
  MPI_T_BIND_MPI_COMM = 0x2,
  MPI_T_BIND_MPI_DATATYPE = 0x3,
  MPI_T_BIND_MPI_ERRHANDLER = 0x4,
  MPI_T_BIND_MPI_FILE = 0x5,
  MPI_T_BIND_MPI_GROUP = 0x6,
  MPI_T_BIND_MPI_OP = 0x7,
  MPI_T_BIND_MPI_REQUEST = 0x8,
  MPI_T_BIND_MPI_WIN = 0x9,
  MPI_T_BIND_MPI_MESSAGE = 0xa,
  MPI_T_BIND_MPI_INFO = 0xb,
  MPI_T_SCOPE_CONSTANT = 0x1,
  MPI_T_SCOPE_READONLY = 0x2,
  MPI_T_SCOPE_LOCAL = 0x3,
  MPI_T_SCOPE_GROUP = 0x4,
  MPI_T_SCOPE_GROUP_EQ = 0x5,
  MPI_T_SCOPE_ALL = 0x6,
  MPI_T_SCOPE_ALL_EQ = 0x7,
  MPI_T_PVAR_CLASS_STATE = 0x1,
  MPI_T_PVAR_CLASS_LEVEL = 0x2,
  MPI_T_PVAR_CLASS_SIZE = 0x3,
  MPI_T_PVAR_CLASS_PERCENTAGE = 0x4,
  MPI_T_PVAR_CLASS_HIGHWATERMARK = 0x5,
  MPI_T_PVAR_CLASS_LOWWATERMARK = 0x6,
  MPI_T_PVAR_CLASS_COUNTER = 0x7,
  MPI_T_PVAR_CLASS_AGGREGATE = 0x8,
  MPI_T_PVAR_CLASS_TIMER = 0x9,
  MPI_T_PVAR_CLASS_GENERIC = 0xa
};

#include "mpi_proto.h"

#ifdef __cplusplus
}
#endif
#endif /* NEXAR_MPI_H */
