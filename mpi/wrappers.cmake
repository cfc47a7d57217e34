# The wrapper scripts (mpi/mpicc.sh.in, mpi/mpiexec.sh.in), the headers,
# the library and nexar-mpi.pc, for the build tree and the install tree:
#   build:   build/mpi/bin/{nexar-mpicc,nexar-mpicxx,nexar-mpiexec,mpicc,
#            mpicxx,mpic++,mpiexec,mpirun} (build-tree headers, library and
#            nexar-run)
#   install: bin/{nexar-mpicc,nexar-mpicxx,nexar-mpiexec},
#            libexec/nexar/mpi/bin/{mpicc,mpicxx,mpic++,mpiexec,mpirun},
#            include/nexar/mpi/{mpi.h,mpi_proto.h}, lib/libnexar-mpi.so,
#            lib/pkgconfig/nexar-mpi.pc
# Installed scripts find the prefix from their own location, so an
# installed tree may be moved (cmake --install --prefix, DESTDIR).
# The C++ wrapper matters even for C packages: autotools packages such as
# OSU link with $CXX (libtool --tag=CXX), and a system mpicxx found first on
# PATH would link them against another MPI.
set(NXM_GEN ${CMAKE_CURRENT_BINARY_DIR}/gen)
# A sanitized library (NEXAR_SANITIZE) needs sanitized programs: the ASan
# runtime must come first.
set(NXM_SAN "")
if(NEXAR_SANITIZE)
  set(NXM_SAN " -fsanitize=address,undefined -fno-omit-frame-pointer")
endif()
set(NXM_LIBEXEC ${CMAKE_INSTALL_LIBEXECDIR}/nexar/mpi/bin)

# nxm_wrappers(KIND DIR PREFIX_CODE INCDIR LIBDIR RUN NAMES...): writes
# mpicc-like and mpiexec-like scripts into ${NXM_GEN}/DIR; NAMES pairs a
# template (mpicc / mpiexec) with a file name.
function(nxm_wrappers kind dir prefix_code incdir libdir run)
  set(NXM_WRAPPER_KIND ${kind})
  set(NXM_PREFIX_CODE "${prefix_code}")
  set(NXM_INCDIR "${incdir}")
  set(NXM_LIBDIR "${libdir}")
  set(NXM_RUN "${run}")
  set(names ${ARGN})
  while(names)
    list(POP_FRONT names template name)
    set(NXM_NAME ${name})
    set(NXM_LANG C)
    set(NXM_ENV1 NEXAR_MPICC_CC)
    set(NXM_ENV2 MPICC_CC)
    set(NXM_DEFAULT_CC cc)
    if(template STREQUAL mpicxx)
      set(template mpicc)
      set(NXM_LANG C++)
      set(NXM_ENV1 NEXAR_MPICXX_CXX)
      set(NXM_ENV2 MPICXX_CXX)
      set(NXM_DEFAULT_CC c++)
    endif()
    configure_file(${CMAKE_CURRENT_SOURCE_DIR}/${template}.sh.in
                   ${NXM_GEN}/${dir}/${name} @ONLY)
  endwhile()
endfunction()

nxm_wrappers(build build "" ${CMAKE_CURRENT_SOURCE_DIR}/include
  ${CMAKE_CURRENT_BINARY_DIR}/lib ${PROJECT_BINARY_DIR}/tools/nexar-run
  mpicc nexar-mpicc mpicxx nexar-mpicxx mpiexec nexar-mpiexec mpicc mpicc
  mpicxx mpicxx mpicxx mpic++ mpiexec mpiexec mpiexec mpirun)
file(COPY ${NXM_GEN}/build/ DESTINATION ${CMAKE_CURRENT_BINARY_DIR}/bin
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                      GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

# The prefix, seen from a script in bin/ and in libexec/nexar/mpi/bin/.
file(RELATIVE_PATH nxm_up_bin /p/${CMAKE_INSTALL_BINDIR} /p)
file(RELATIVE_PATH nxm_up_libexec /p/${NXM_LIBEXEC} /p)
set(nxm_find [=[prefix=$(cd "$(dirname "$(readlink -f "$0")")/@UP@" && pwd)]=])
string(REPLACE @UP@ ${nxm_up_bin} nxm_find_bin "${nxm_find}")
string(REPLACE @UP@ ${nxm_up_libexec} nxm_find_libexec "${nxm_find}")
set(nxm_inc "\$prefix/${CMAKE_INSTALL_INCLUDEDIR}/nexar/mpi")
set(nxm_lib "\$prefix/${CMAKE_INSTALL_LIBDIR}")
set(nxm_run "\$prefix/${CMAKE_INSTALL_BINDIR}/nexar-run")
nxm_wrappers(install install-bin "${nxm_find_bin}" ${nxm_inc} ${nxm_lib}
  ${nxm_run} mpicc nexar-mpicc mpicxx nexar-mpicxx mpiexec nexar-mpiexec)
nxm_wrappers(install install-libexec "${nxm_find_libexec}" ${nxm_inc}
  ${nxm_lib} ${nxm_run} mpicc mpicc mpicxx mpicxx mpicxx mpic++ mpiexec
  mpiexec mpiexec mpirun)

file(RELATIVE_PATH nxm_up_pc /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" nxm_up_pc "${nxm_up_pc}")
set(NXM_PC_PREFIX "\${pcfiledir}/${nxm_up_pc}")
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/nexar-mpi.pc.in
               ${NXM_GEN}/nexar-mpi.pc @ONLY)

install(TARGETS nexar-mpi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/mpi.h include/mpi_proto.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/nexar/mpi)
install(PROGRAMS ${NXM_GEN}/install-bin/nexar-mpicc
                 ${NXM_GEN}/install-bin/nexar-mpicxx
                 ${NXM_GEN}/install-bin/nexar-mpiexec
        DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS ${NXM_GEN}/install-libexec/mpicc
                 ${NXM_GEN}/install-libexec/mpicxx
                 ${NXM_GEN}/install-libexec/mpic++
                 ${NXM_GEN}/install-libexec/mpiexec
                 ${NXM_GEN}/install-libexec/mpirun
        DESTINATION ${NXM_LIBEXEC})
install(FILES ${NXM_GEN}/nexar-mpi.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
