# What `cmake --install` puts under the prefix, and the CPack .deb
# (docs/installing.md):
#   include/nexar.h, include/nexar_version.h
#   lib/libnexar.so.X.Y.Z, libnexar.so.X, libnexar.so, libnexar.a
#   lib/pkgconfig/nexar.pc
#   lib/cmake/nexar/{nexarConfig,nexarConfigVersion,nexarTargets*}.cmake
#   bin/nexar-seed, nexar-run, nexar-perf, nexar-inspect and share/man/man1/
#   their pages
#   bin/nexar-trace (python3: merges flight-recorder dumps)
include(CMakePackageConfigHelpers)

set(NEXAR_TOOLS nexar-seed nexar-run nexar-perf nexar-inspect)
set(NEXAR_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/nexar)

install(TARGETS nexar nexar_static EXPORT nexarTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${NEXAR_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS tools/nexar-trace DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/nexar.h ${PROJECT_BINARY_DIR}/include/nexar_version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# pkg-config: the prefix is the one given at install time
# (`cmake --install --prefix`, or /usr in the .deb), written in when
# installing; the rest is filled in here.
set(NEXAR_PC_PREFIX "@NEXAR_PC_PREFIX@")
configure_file(cmake/nexar.pc.in nexar.pc.in @ONLY)
install(CODE "
  file(READ \"${PROJECT_BINARY_DIR}/nexar.pc.in\" pc)
  string(REPLACE \"@NEXAR_PC_PREFIX@\" \"\${CMAKE_INSTALL_PREFIX}\" pc \"\${pc}\")
  file(WRITE \"${PROJECT_BINARY_DIR}/nexar.pc\" \"\${pc}\")")
install(FILES ${PROJECT_BINARY_DIR}/nexar.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(EXPORT nexarTargets NAMESPACE nexar:: DESTINATION ${NEXAR_CMAKEDIR})
configure_package_config_file(cmake/nexarConfig.cmake.in nexarConfig.cmake
                              INSTALL_DESTINATION ${NEXAR_CMAKEDIR})
write_basic_package_version_file(nexarConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/nexarConfig.cmake
              ${PROJECT_BINARY_DIR}/nexarConfigVersion.cmake
        DESTINATION ${NEXAR_CMAKEDIR})

# Man pages, made from each tool's --help and --version by help2man.
find_program(NEXAR_HELP2MAN help2man)
if(NEXAR_HELP2MAN)
  set(NEXAR_MAN_nexar-seed "seed of a nexar cluster: admits workers, assigns ranks")
  set(NEXAR_MAN_nexar-run "start a nexar seed and N processes of a program on this host")
  set(NEXAR_MAN_nexar-perf "benchmark a nexar operation over a sweep of sizes")
  set(NEXAR_MAN_nexar-inspect "print what every rank of a running nexar job is doing")
  set(pages)
  foreach(t ${NEXAR_TOOLS})
    add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/man/${t}.1
      COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
      COMMAND ${NEXAR_HELP2MAN} --no-info --section=1 --source=nexar
              "--name=${NEXAR_MAN_${t}}" --output=${PROJECT_BINARY_DIR}/man/${t}.1
              $<TARGET_FILE:${t}>
      DEPENDS ${t} VERBATIM)
    list(APPEND pages ${PROJECT_BINARY_DIR}/man/${t}.1)
  endforeach()
  add_custom_target(nexar_man ALL DEPENDS ${pages})
  install(FILES ${pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(WARNING "nexar: help2man not found: no man pages (scripts/install-deps.sh)")
endif()

# `cpack -G DEB` (make deb): one package with the library, headers, CMake
# and pkg-config files, tools and man pages; dependencies by dpkg-shlibdeps.
set(CPACK_PACKAGE_NAME nexar)
set(CPACK_PACKAGE_VENDOR nexar)
set(CPACK_PACKAGE_CONTACT "nexar developers <nexar@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "distributed communication runtime over QUIC (p2p, collectives, RPC)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
# Beside the shared libraries dpkg-shlibdeps finds: what nexar.pc and
# nexarConfig.cmake read (pkg-config and the .pc files of the private
# dependencies); libunistring-dev for `pkg-config --static` (GnuTLS's .pc
# names -lunistring, which libgnutls28-dev does not pull in).
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "pkg-config, libngtcp2-dev, libngtcp2-crypto-gnutls-dev, libgnutls28-dev, nettle-dev")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libunistring-dev")
include(CPack)
