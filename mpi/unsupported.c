/*
 * The MPI functions outside the layer's scope (docs/mpi.md): one-sided
 * windows, MPI-IO, dynamic processes, inter-communicators, external32
 * packing and a few rare type constructors. Each exists so that programs
 * link, and returns MPI_ERR_UNSUPPORTED_OPERATION through MPI_COMM_WORLD's
 * error handler with a message naming the function.
 */
#include "mpi_int.h"

/* clang-format off */
int MPI_Type_create_darray(int size, int rank, int ndims, const int array_of_gsizes[], const int array_of_distribs[], const int array_of_dargs[], const int array_of_psizes[], int order, MPI_Datatype oldtype, MPI_Datatype *newtype) { return nxm_unsupported("MPI_Type_create_darray"); }
int MPI_Type_create_f90_integer(int r, MPI_Datatype *newtype) { return nxm_unsupported("MPI_Type_create_f90_integer"); }
int MPI_Type_create_f90_real(int p, int r, MPI_Datatype *newtype) { return nxm_unsupported("MPI_Type_create_f90_real"); }
int MPI_Type_create_f90_complex(int p, int r, MPI_Datatype *newtype) { return nxm_unsupported("MPI_Type_create_f90_complex"); }
int MPI_Pack_external(const char datarep[], const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, MPI_Aint outsize, MPI_Aint *position) { return nxm_unsupported("MPI_Pack_external"); }
int MPI_Unpack_external(const char datarep[], const void *inbuf, MPI_Aint insize, MPI_Aint *position, void *outbuf, int outcount, MPI_Datatype datatype) { return nxm_unsupported("MPI_Unpack_external"); }
int MPI_Pack_external_size(const char datarep[], int incount, MPI_Datatype datatype, MPI_Aint *size) { return nxm_unsupported("MPI_Pack_external_size"); }
int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag, MPI_Comm *newintercomm) { return nxm_unsupported("MPI_Intercomm_create"); }
int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm) { return nxm_unsupported("MPI_Intercomm_merge"); }
int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win) { return nxm_unsupported("MPI_Win_create"); }
int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) { return nxm_unsupported("MPI_Win_allocate"); }
int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) { return nxm_unsupported("MPI_Win_allocate_shared"); }
int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win) { return nxm_unsupported("MPI_Win_create_dynamic"); }
int MPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint *size, int *disp_unit, void *baseptr) { return nxm_unsupported("MPI_Win_shared_query"); }
int MPI_Win_attach(MPI_Win win, void *base, MPI_Aint size) { return nxm_unsupported("MPI_Win_attach"); }
int MPI_Win_detach(MPI_Win win, const void *base) { return nxm_unsupported("MPI_Win_detach"); }
int MPI_Win_free(MPI_Win *win) { return nxm_unsupported("MPI_Win_free"); }
int MPI_Win_get_group(MPI_Win win, MPI_Group *group) { return nxm_unsupported("MPI_Win_get_group"); }
int MPI_Win_set_info(MPI_Win win, MPI_Info info) { return nxm_unsupported("MPI_Win_set_info"); }
int MPI_Win_get_info(MPI_Win win, MPI_Info *info_used) { return nxm_unsupported("MPI_Win_get_info"); }
int MPI_Win_fence(int assert, MPI_Win win) { return nxm_unsupported("MPI_Win_fence"); }
int MPI_Win_start(MPI_Group group, int assert, MPI_Win win) { return nxm_unsupported("MPI_Win_start"); }
int MPI_Win_complete(MPI_Win win) { return nxm_unsupported("MPI_Win_complete"); }
int MPI_Win_post(MPI_Group group, int assert, MPI_Win win) { return nxm_unsupported("MPI_Win_post"); }
int MPI_Win_wait(MPI_Win win) { return nxm_unsupported("MPI_Win_wait"); }
int MPI_Win_test(MPI_Win win, int *flag) { return nxm_unsupported("MPI_Win_test"); }
int MPI_Win_lock(int lock_type, int rank, int assert, MPI_Win win) { return nxm_unsupported("MPI_Win_lock"); }
int MPI_Win_lock_all(int assert, MPI_Win win) { return nxm_unsupported("MPI_Win_lock_all"); }
int MPI_Win_unlock(int rank, MPI_Win win) { return nxm_unsupported("MPI_Win_unlock"); }
int MPI_Win_unlock_all(MPI_Win win) { return nxm_unsupported("MPI_Win_unlock_all"); }
int MPI_Win_flush(int rank, MPI_Win win) { return nxm_unsupported("MPI_Win_flush"); }
int MPI_Win_flush_all(MPI_Win win) { return nxm_unsupported("MPI_Win_flush_all"); }
int MPI_Win_flush_local(int rank, MPI_Win win) { return nxm_unsupported("MPI_Win_flush_local"); }
int MPI_Win_flush_local_all(MPI_Win win) { return nxm_unsupported("MPI_Win_flush_local_all"); }
int MPI_Win_sync(MPI_Win win) { return nxm_unsupported("MPI_Win_sync"); }
int MPI_Win_set_name(MPI_Win win, const char *win_name) { return nxm_unsupported("MPI_Win_set_name"); }
int MPI_Win_get_name(MPI_Win win, char *win_name, int *resultlen) { return nxm_unsupported("MPI_Win_get_name"); }
int MPI_Win_create_keyval(MPI_Win_copy_attr_function *win_copy_attr_fn, MPI_Win_delete_attr_function *win_delete_attr_fn, int *win_keyval, void *extra_state) { return nxm_unsupported("MPI_Win_create_keyval"); }
int MPI_Win_free_keyval(int *win_keyval) { return nxm_unsupported("MPI_Win_free_keyval"); }
int MPI_Win_set_attr(MPI_Win win, int win_keyval, void *attribute_val) { return nxm_unsupported("MPI_Win_set_attr"); }
int MPI_Win_get_attr(MPI_Win win, int win_keyval, void *attribute_val, int *flag) { return nxm_unsupported("MPI_Win_get_attr"); }
int MPI_Win_delete_attr(MPI_Win win, int win_keyval) { return nxm_unsupported("MPI_Win_delete_attr"); }
int MPI_Win_create_errhandler(MPI_Win_errhandler_function *win_errhandler_fn, MPI_Errhandler *errhandler) { return nxm_unsupported("MPI_Win_create_errhandler"); }
int MPI_Win_get_errhandler(MPI_Win win, MPI_Errhandler *errhandler) { return nxm_unsupported("MPI_Win_get_errhandler"); }
int MPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler errhandler) { return nxm_unsupported("MPI_Win_set_errhandler"); }
int MPI_Win_call_errhandler(MPI_Win win, int errorcode) { return nxm_unsupported("MPI_Win_call_errhandler"); }
int MPI_Put(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win) { return nxm_unsupported("MPI_Put"); }
int MPI_Get(void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win) { return nxm_unsupported("MPI_Get"); }
int MPI_Accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) { return nxm_unsupported("MPI_Accumulate"); }
int MPI_Get_accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr, int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) { return nxm_unsupported("MPI_Get_accumulate"); }
int MPI_Fetch_and_op(const void *origin_addr, void *result_addr, MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Op op, MPI_Win win) { return nxm_unsupported("MPI_Fetch_and_op"); }
int MPI_Compare_and_swap(const void *origin_addr, const void *compare_addr, void *result_addr, MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Win win) { return nxm_unsupported("MPI_Compare_and_swap"); }
int MPI_Rput(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request *request) { return nxm_unsupported("MPI_Rput"); }
int MPI_Rget(void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request *request) { return nxm_unsupported("MPI_Rget"); }
int MPI_Raccumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win, MPI_Request *request) { return nxm_unsupported("MPI_Raccumulate"); }
int MPI_Rget_accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr, int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win, MPI_Request *request) { return nxm_unsupported("MPI_Rget_accumulate"); }
int MPI_Comm_spawn(const char *command, char *argv[], int maxprocs, MPI_Info info, int root, MPI_Comm comm, MPI_Comm *intercomm, int array_of_errcodes[]) { return nxm_unsupported("MPI_Comm_spawn"); }
int MPI_Comm_spawn_multiple(int count, char *array_of_commands[], char **array_of_argv[], const int array_of_maxprocs[], const MPI_Info array_of_info[], int root, MPI_Comm comm, MPI_Comm *intercomm, int array_of_errcodes[]) { return nxm_unsupported("MPI_Comm_spawn_multiple"); }
int MPI_Comm_get_parent(MPI_Comm *parent) { return nxm_unsupported("MPI_Comm_get_parent"); }
int MPI_Comm_accept(const char *port_name, MPI_Info info, int root, MPI_Comm comm, MPI_Comm *newcomm) { return nxm_unsupported("MPI_Comm_accept"); }
int MPI_Comm_connect(const char *port_name, MPI_Info info, int root, MPI_Comm comm, MPI_Comm *newcomm) { return nxm_unsupported("MPI_Comm_connect"); }
int MPI_Comm_join(int fd, MPI_Comm *intercomm) { return nxm_unsupported("MPI_Comm_join"); }
int MPI_Open_port(MPI_Info info, char *port_name) { return nxm_unsupported("MPI_Open_port"); }
int MPI_Close_port(const char *port_name) { return nxm_unsupported("MPI_Close_port"); }
int MPI_Publish_name(const char *service_name, MPI_Info info, const char *port_name) { return nxm_unsupported("MPI_Publish_name"); }
int MPI_Unpublish_name(const char *service_name, MPI_Info info, const char *port_name) { return nxm_unsupported("MPI_Unpublish_name"); }
int MPI_Lookup_name(const char *service_name, MPI_Info info, char *port_name) { return nxm_unsupported("MPI_Lookup_name"); }
int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh) { return nxm_unsupported("MPI_File_open"); }
int MPI_File_close(MPI_File *fh) { return nxm_unsupported("MPI_File_close"); }
int MPI_File_delete(const char *filename, MPI_Info info) { return nxm_unsupported("MPI_File_delete"); }
int MPI_File_set_size(MPI_File fh, MPI_Offset size) { return nxm_unsupported("MPI_File_set_size"); }
int MPI_File_preallocate(MPI_File fh, MPI_Offset size) { return nxm_unsupported("MPI_File_preallocate"); }
int MPI_File_get_size(MPI_File fh, MPI_Offset *size) { return nxm_unsupported("MPI_File_get_size"); }
int MPI_File_get_group(MPI_File fh, MPI_Group *group) { return nxm_unsupported("MPI_File_get_group"); }
int MPI_File_get_amode(MPI_File fh, int *amode) { return nxm_unsupported("MPI_File_get_amode"); }
int MPI_File_set_info(MPI_File fh, MPI_Info info) { return nxm_unsupported("MPI_File_set_info"); }
int MPI_File_get_info(MPI_File fh, MPI_Info *info_used) { return nxm_unsupported("MPI_File_get_info"); }
int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype, const char *datarep, MPI_Info info) { return nxm_unsupported("MPI_File_set_view"); }
int MPI_File_get_view(MPI_File fh, MPI_Offset *disp, MPI_Datatype *etype, MPI_Datatype *filetype, char *datarep) { return nxm_unsupported("MPI_File_get_view"); }
int MPI_File_read_at(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype, MPI_Status *status) { return nxm_unsupported("MPI_File_read_at"); }
int MPI_File_read_at_all(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype, MPI_Status *status) { return nxm_unsupported("MPI_File_read_at_all"); }
int MPI_File_write_at(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status) { return nxm_unsupported("MPI_File_write_at"); }
int MPI_File_write_at_all(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status) { return nxm_unsupported("MPI_File_write_at_all"); }
int MPI_File_iread_at(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype, MPI_Request *request) { return nxm_unsupported("MPI_File_iread_at"); }
int MPI_File_iwrite_at(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype, MPI_Request *request) { return nxm_unsupported("MPI_File_iwrite_at"); }
int MPI_File_iread_at_all(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype, MPI_Request *request) { return nxm_unsupported("MPI_File_iread_at_all"); }
int MPI_File_iwrite_at_all(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype, MPI_Request *request) { return nxm_unsupported("MPI_File_iwrite_at_all"); }
int MPI_File_read(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Status *status) { return nxm_unsupported("MPI_File_read"); }
int MPI_File_read_all(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Status *status) { return nxm_unsupported("MPI_File_read_all"); }
int MPI_File_write(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status) { return nxm_unsupported("MPI_File_write"); }
int MPI_File_write_all(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status) { return nxm_unsupported("MPI_File_write_all"); }
int MPI_File_iread(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Request *request) { return nxm_unsupported("MPI_File_iread"); }
int MPI_File_iwrite(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Request *request) { return nxm_unsupported("MPI_File_iwrite"); }
int MPI_File_iread_all(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Request *request) { return nxm_unsupported("MPI_File_iread_all"); }
int MPI_File_iwrite_all(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Request *request) { return nxm_unsupported("MPI_File_iwrite_all"); }
int MPI_File_seek(MPI_File fh, MPI_Offset offset, int whence) { return nxm_unsupported("MPI_File_seek"); }
int MPI_File_get_position(MPI_File fh, MPI_Offset *offset) { return nxm_unsupported("MPI_File_get_position"); }
int MPI_File_get_byte_offset(MPI_File fh, MPI_Offset offset, MPI_Offset *disp) { return nxm_unsupported("MPI_File_get_byte_offset"); }
int MPI_File_read_shared(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Status *status) { return nxm_unsupported("MPI_File_read_shared"); }
int MPI_File_write_shared(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status) { return nxm_unsupported("MPI_File_write_shared"); }
int MPI_File_iread_shared(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Request *request) { return nxm_unsupported("MPI_File_iread_shared"); }
int MPI_File_iwrite_shared(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Request *request) { return nxm_unsupported("MPI_File_iwrite_shared"); }
int MPI_File_read_ordered(MPI_File fh, void *buf, int count, MPI_Datatype datatype, MPI_Status *status) { return nxm_unsupported("MPI_File_read_ordered"); }
int MPI_File_write_ordered(MPI_File fh, const void *buf, int count, MPI_Datatype datatype, MPI_Status *status) { return nxm_unsupported("MPI_File_write_ordered"); }
int MPI_File_seek_shared(MPI_File fh, MPI_Offset offset, int whence) { return nxm_unsupported("MPI_File_seek_shared"); }
int MPI_File_get_position_shared(MPI_File fh, MPI_Offset *offset) { return nxm_unsupported("MPI_File_get_position_shared"); }
int MPI_File_read_at_all_begin(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype datatype) { return nxm_unsupported("MPI_File_read_at_all_begin"); }
int MPI_File_read_at_all_end(MPI_File fh, void *buf, MPI_Status *status) { return nxm_unsupported("MPI_File_read_at_all_end"); }
int MPI_File_write_at_all_begin(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype) { return nxm_unsupported("MPI_File_write_at_all_begin"); }
int MPI_File_write_at_all_end(MPI_File fh, const void *buf, MPI_Status *status) { return nxm_unsupported("MPI_File_write_at_all_end"); }
int MPI_File_read_all_begin(MPI_File fh, void *buf, int count, MPI_Datatype datatype) { return nxm_unsupported("MPI_File_read_all_begin"); }
int MPI_File_read_all_end(MPI_File fh, void *buf, MPI_Status *status) { return nxm_unsupported("MPI_File_read_all_end"); }
int MPI_File_write_all_begin(MPI_File fh, const void *buf, int count, MPI_Datatype datatype) { return nxm_unsupported("MPI_File_write_all_begin"); }
int MPI_File_write_all_end(MPI_File fh, const void *buf, MPI_Status *status) { return nxm_unsupported("MPI_File_write_all_end"); }
int MPI_File_read_ordered_begin(MPI_File fh, void *buf, int count, MPI_Datatype datatype) { return nxm_unsupported("MPI_File_read_ordered_begin"); }
int MPI_File_read_ordered_end(MPI_File fh, void *buf, MPI_Status *status) { return nxm_unsupported("MPI_File_read_ordered_end"); }
int MPI_File_write_ordered_begin(MPI_File fh, const void *buf, int count, MPI_Datatype datatype) { return nxm_unsupported("MPI_File_write_ordered_begin"); }
int MPI_File_write_ordered_end(MPI_File fh, const void *buf, MPI_Status *status) { return nxm_unsupported("MPI_File_write_ordered_end"); }
int MPI_File_get_type_extent(MPI_File fh, MPI_Datatype datatype, MPI_Aint *extent) { return nxm_unsupported("MPI_File_get_type_extent"); }
int MPI_File_set_atomicity(MPI_File fh, int flag) { return nxm_unsupported("MPI_File_set_atomicity"); }
int MPI_File_get_atomicity(MPI_File fh, int *flag) { return nxm_unsupported("MPI_File_get_atomicity"); }
int MPI_File_sync(MPI_File fh) { return nxm_unsupported("MPI_File_sync"); }
int MPI_File_create_errhandler(MPI_File_errhandler_function *file_errhandler_fn, MPI_Errhandler *errhandler) { return nxm_unsupported("MPI_File_create_errhandler"); }
int MPI_File_get_errhandler(MPI_File file, MPI_Errhandler *errhandler) { return nxm_unsupported("MPI_File_get_errhandler"); }
int MPI_File_set_errhandler(MPI_File file, MPI_Errhandler errhandler) { return nxm_unsupported("MPI_File_set_errhandler"); }
int MPI_File_call_errhandler(MPI_File fh, int errorcode) { return nxm_unsupported("MPI_File_call_errhandler"); }
int MPI_Register_datarep(const char *datarep, MPI_Datarep_conversion_function *read_conversion_fn, MPI_Datarep_conversion_function *write_conversion_fn, MPI_Datarep_extent_function *dtype_file_extent_fn, void *extra_state) { return nxm_unsupported("MPI_Register_datarep"); }
/* The tools interface: it works, and exposes no variables or categories
 * (every count is 0, every index is out of range). */
static int g_t_init;
int MPI_T_init_thread(int required, int *provided) { if (provided) *provided = required > MPI_THREAD_MULTIPLE ? MPI_THREAD_MULTIPLE : required; g_t_init++; return MPI_SUCCESS; }
int MPI_T_finalize(void) { if (g_t_init <= 0) return MPI_T_ERR_NOT_INITIALIZED; g_t_init--; return MPI_SUCCESS; }
static int t_count(int *n) { if (g_t_init <= 0) return MPI_T_ERR_NOT_INITIALIZED; if (n) *n = 0; return MPI_SUCCESS; }
int MPI_T_cvar_get_num(int *num_cvar) { return t_count(num_cvar); }
int MPI_T_pvar_get_num(int *num_pvar) { return t_count(num_pvar); }
int MPI_T_category_get_num(int *num_cat) { return t_count(num_cat); }
int MPI_T_category_changed(int *stamp) { return t_count(stamp); }
int MPI_T_enum_get_info(MPI_T_enum enumtype, int *num, char *name, int *name_len) { return MPI_T_ERR_INVALID_HANDLE; }
int MPI_T_enum_get_item(MPI_T_enum enumtype, int index, int *value, char *name, int *name_len) { return MPI_T_ERR_INVALID_HANDLE; }
int MPI_T_cvar_get_info(int cvar_index, char *name, int *name_len, int *verbosity, MPI_Datatype *datatype, MPI_T_enum *enumtype, char *desc, int *desc_len, int *bind, int *scope) { return MPI_T_ERR_INVALID_INDEX; }
int MPI_T_cvar_get_index(const char *name, int *cvar_index) { return MPI_T_ERR_INVALID_NAME; }
int MPI_T_cvar_handle_alloc(int cvar_index, void *obj_handle, MPI_T_cvar_handle *handle, int *count) { return MPI_T_ERR_INVALID_INDEX; }
int MPI_T_cvar_handle_free(MPI_T_cvar_handle *handle) { return MPI_T_ERR_INVALID_HANDLE; }
int MPI_T_cvar_read(MPI_T_cvar_handle handle, void *buf) { return MPI_T_ERR_INVALID_HANDLE; }
int MPI_T_cvar_write(MPI_T_cvar_handle handle, const void *buf) { return MPI_T_ERR_INVALID_HANDLE; }
int MPI_T_pvar_get_info(int pvar_index, char *name, int *name_len, int *verbosity, int *var_class, MPI_Datatype *datatype, MPI_T_enum *enumtype, char *desc, int *desc_len, int *bind, int *readonly, int *continuous, int *atomic) { return MPI_T_ERR_INVALID_INDEX; }
int MPI_T_pvar_get_index(const char *name, int var_class, int *pvar_index) { return MPI_T_ERR_INVALID_NAME; }
int MPI_T_pvar_session_create(MPI_T_pvar_session *session) { return MPI_T_ERR_OUT_OF_SESSIONS; }
int MPI_T_pvar_session_free(MPI_T_pvar_session *session) { return MPI_T_ERR_INVALID_SESSION; }
int MPI_T_pvar_handle_alloc(MPI_T_pvar_session session, int pvar_index, void *obj_handle, MPI_T_pvar_handle *handle, int *count) { return MPI_T_ERR_INVALID_INDEX; }
int MPI_T_pvar_handle_free(MPI_T_pvar_session session, MPI_T_pvar_handle *handle) { return MPI_T_ERR_INVALID_HANDLE; }
int MPI_T_pvar_start(MPI_T_pvar_session session, MPI_T_pvar_handle handle) { return MPI_T_ERR_INVALID_HANDLE; }
int MPI_T_pvar_stop(MPI_T_pvar_session session, MPI_T_pvar_handle handle) { return MPI_T_ERR_INVALID_HANDLE; }
int MPI_T_pvar_read(MPI_T_pvar_session session, MPI_T_pvar_handle handle, void *buf) { return MPI_T_ERR_INVALID_HANDLE; }
int MPI_T_pvar_write(MPI_T_pvar_session session, MPI_T_pvar_handle handle, const void *buf) { return MPI_T_ERR_INVALID_HANDLE; }
int MPI_T_pvar_reset(MPI_T_pvar_session session, MPI_T_pvar_handle handle) { return MPI_T_ERR_INVALID_HANDLE; }
int MPI_T_pvar_readreset(MPI_T_pvar_session session, MPI_T_pvar_handle handle, void *buf) { return MPI_T_ERR_INVALID_HANDLE; }
int MPI_T_category_get_info(int cat_index, char *name, int *name_len, char *desc, int *desc_len, int *num_cvars, int *num_pvars, int *num_categories) { return MPI_T_ERR_INVALID_INDEX; }
int MPI_T_category_get_index(const char *name, int *cat_index) { return MPI_T_ERR_INVALID_NAME; }
int MPI_T_category_get_cvars(int cat_index, int len, int indices[]) { return MPI_T_ERR_INVALID_INDEX; }
int MPI_T_category_get_pvars(int cat_index, int len, int indices[]) { return MPI_T_ERR_INVALID_INDEX; }
int MPI_T_category_get_categories(int cat_index, int len, int indices[]) { return MPI_T_ERR_INVALID_INDEX; }
/* clang-format on */
