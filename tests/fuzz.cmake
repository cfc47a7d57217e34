# libFuzzer harnesses (tests/fuzz_*.c; docs/testing.md, "Decoders and
# fuzzing"), compiled by clang with libFuzzer, ASan and UBSan whatever the
# project's compiler is, and their corpus replays (tests/corpus/<name>,
# grown/ included) as tests of the default run. NEXAR_FUZZ: AUTO builds
# them when a clang that links -fsanitize=fuzzer is found, ON requires it,
# OFF skips them. `make fuzz` runs each for FUZZ_SECONDS (scripts/fuzz.sh).
set(NEXAR_FUZZ AUTO CACHE STRING "libFuzzer harnesses: AUTO, ON or OFF")
if(NEXAR_FUZZ STREQUAL "OFF")
  return()
endif()
if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  set(NEXAR_CLANG ${CMAKE_C_COMPILER})
else()
  find_program(NEXAR_CLANG NAMES clang clang-16 clang-15 clang-14
               DOC "clang for the libFuzzer harnesses")
endif()
set(_fz_flags -std=gnu11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined
              -fno-sanitize-recover=undefined)
set(_fz_ok FALSE)
if(NEXAR_CLANG)
  set(_fz_probe ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe.c)
  file(WRITE ${_fz_probe} "#include <stddef.h>\n#include <stdint.h>\n"
       "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) "
       "{ (void)d; (void)n; return 0; }\n")
  execute_process(COMMAND ${NEXAR_CLANG} ${_fz_flags} ${_fz_probe}
                          -o ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe
                  RESULT_VARIABLE _fz_rc OUTPUT_QUIET ERROR_QUIET)
  if(_fz_rc EQUAL 0)
    set(_fz_ok TRUE)
  endif()
endif()
if(NOT _fz_ok)
  if(NEXAR_FUZZ STREQUAL "ON")
    message(FATAL_ERROR "NEXAR_FUZZ=ON needs clang with libFuzzer (apt-get install clang)")
  endif()
  message(STATUS "nexar: no clang with libFuzzer: fuzz harnesses and corpus replays not built")
  return()
endif()
message(STATUS "nexar: libFuzzer harnesses with ${NEXAR_CLANG}")

set(_wire ${PROJECT_SOURCE_DIR}/src/wire/wire.c
          ${PROJECT_SOURCE_DIR}/src/wire/wire_elastic.c
          ${PROJECT_SOURCE_DIR}/src/wire/wire_ctl.c
          ${PROJECT_SOURCE_DIR}/src/wire/wire_inspect.c
          ${PROJECT_SOURCE_DIR}/src/wire/wire_job.c)
# fuzz_wire: header, seed frame header, each seed body decoder.
# fuzz_seed: the seed exchange as each side reads it (frame splitting,
# HELLO/ADMIT at the seed, PROOF/WELCOME/JOIN/ADMITTED/REJECT at a worker).
# fuzz_ctl: the FAILED, AGREE and MISMATCH payloads.
# fuzz_shm: the shared-memory ring a same-host peer writes, and the
# segment header it offers.
set(_src_wire ${_wire})
set(_src_seed ${_wire})
set(_src_ctl ${_wire})
set(_src_shm ${PROJECT_SOURCE_DIR}/src/transport/shm_ring.c)
# The headers the harnesses' sources include (a change rebuilds them).
file(GLOB _fz_hdrs ${PROJECT_SOURCE_DIR}/include/*.h
     ${PROJECT_SOURCE_DIR}/src/wire/*.h ${PROJECT_SOURCE_DIR}/src/base/*.h
     ${PROJECT_SOURCE_DIR}/src/transport/shm_ring.h)
add_custom_target(fuzzers)
foreach(t wire seed ctl shm)
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/fuzz_${t})
  set(_in ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_${t}.c ${_src_${t}})
  add_custom_command(OUTPUT ${_out}
    COMMAND ${NEXAR_CLANG} ${_fz_flags} -I${PROJECT_SOURCE_DIR}/include
            -I${PROJECT_BINARY_DIR}/include -I${PROJECT_SOURCE_DIR}/src
            ${_in} -o ${_out}
    DEPENDS ${_in} ${_fz_hdrs}
    COMMENT "libFuzzer harness fuzz_${t}" VERBATIM)
  add_custom_target(fuzz_${t}_bin ALL DEPENDS ${_out})
  add_dependencies(fuzzers fuzz_${t}_bin)
  # Replays the corpus once (no fuzzing): a regression test.
  add_test(NAME fuzz_${t}_corpus
           COMMAND ${_out} -runs=0 ${CMAKE_CURRENT_SOURCE_DIR}/corpus/${t})
  set_tests_properties(fuzz_${t}_corpus PROPERTIES TIMEOUT 120)
endforeach()
