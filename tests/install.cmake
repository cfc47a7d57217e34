# Installation tests (docs/installing.md).
add_test(NAME test_exports COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_exports.sh
         $<TARGET_FILE:nexar> ${PROJECT_SOURCE_DIR}/include/nexar.h)
set_tests_properties(test_exports PROPERTIES TIMEOUT 30)
add_test(NAME test_install COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_install.sh
         ${CMAKE_COMMAND} ${PROJECT_BINARY_DIR} ${CMAKE_C_COMPILER})
math(EXPR t "120 * ${NEXAR_TEST_TIMEOUT_MULTIPLIER}")
set_tests_properties(test_install PROPERTIES TIMEOUT ${t})
