# Installation tests (docs/installing.md) and host names in addresses.
add_test(NAME test_exports COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_exports.sh
         $<TARGET_FILE:nexar> ${PROJECT_SOURCE_DIR}/include/nexar.h)
set_tests_properties(test_exports PROPERTIES TIMEOUT 30)
set(consumer_flags "")
if(NEXAR_SANITIZE)
  set(consumer_flags "-fsanitize=address,undefined")
endif()
add_test(NAME test_install COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_install.sh
         ${CMAKE_COMMAND} ${PROJECT_BINARY_DIR} ${CMAKE_C_COMPILER} "${consumer_flags}")
math(EXPR t "120 * ${NEXAR_TEST_TIMEOUT_MULTIPLIER}")
set_tests_properties(test_install PROPERTIES TIMEOUT ${t})
# NEXAR_SEED by host name (docs/configuration.md).
add_test(NAME test_hostname COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_hostname.sh
         $<TARGET_FILE:nexar-seed> $<TARGET_FILE:split>)
set_tests_properties(test_hostname PROPERTIES TIMEOUT 90)
# The .deb: contents, dependencies resolved by apt-get's simulation, tools run.
# NEXAR_TEST_PY_ENV: what the Python import needs in a sanitized build
# (cpack and dpkg must not get it).
string(REPLACE ";" " " _san "${NEXAR_SAN_ENV}")
add_test(NAME test_deb COMMAND ${CMAKE_COMMAND} -E env "NEXAR_TEST_PY_ENV=${_san}"
         bash ${CMAKE_CURRENT_SOURCE_DIR}/test_deb.sh
         ${CMAKE_CPACK_COMMAND} ${PROJECT_BINARY_DIR})
math(EXPR t "180 * ${NEXAR_TEST_TIMEOUT_MULTIPLIER}")
set_tests_properties(test_deb PROPERTIES TIMEOUT ${t})
