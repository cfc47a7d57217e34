# The Python binding (docs/python.md), run with the binding's interpreter
# (/usr/bin/python3 unless configured otherwise) from the build tree.
set(NEXAR_PY_ENV ${CMAKE_COMMAND} -E env
  PYTHONPATH=${PROJECT_BINARY_DIR}/bindings/python ${NEXAR_SAN_ENV})
# Every buffer collective and p2p call bit-exact against numpy, objects,
# split/dup, requests, RPC to Python handlers, bad input, the GIL.
foreach(np 1 2 4)
  add_test(NAME test_python_np${np} COMMAND ${NEXAR_PY_ENV}
    $<TARGET_FILE:nexar-run> -n ${np} -t 150 -- ${Python3_EXECUTABLE}
    ${CMAKE_CURRENT_SOURCE_DIR}/python/test_nexar.py)
  math(EXPR t "180 * ${NEXAR_TEST_TIMEOUT_MULTIPLIER}")
  set_tests_properties(test_python_np${np} PROPERTIES TIMEOUT ${t})
endforeach()
# A peer killed mid-job: PeerFailedError within the heartbeat timeout.
add_test(NAME test_python_fail COMMAND ${NEXAR_PY_ENV} NEXAR_HEARTBEAT_MS=200
  NEXAR_HEARTBEAT_TIMEOUT_MS=2000 $<TARGET_FILE:nexar-run> -n 2 -t 60
  --tolerate-kill -- ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/python/test_fail.py)
set_tests_properties(test_python_fail PROPERTIES TIMEOUT 90)
# Elastic: a process joins at a checkpoint, then a member leaves.
add_test(NAME test_python_elastic COMMAND ${NEXAR_PY_ENV}
  $<TARGET_FILE:nexar-run> -n 2 --max-world 3 -t 90 -- ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_SOURCE_DIR}/python/test_elastic.py)
set_tests_properties(test_python_elastic PROPERTIES TIMEOUT 120)
# `cmake --install` into a scratch prefix gives an importable package (the
# script sets PYTHONPATH to the installed package; the environment brings
# the sanitizer runtimes in a sanitized build).
add_test(NAME test_python_install COMMAND ${NEXAR_PY_ENV} bash
  ${CMAKE_CURRENT_SOURCE_DIR}/python/test_install.sh ${CMAKE_COMMAND}
  ${PROJECT_BINARY_DIR} ${Python3_EXECUTABLE} ${NEXAR_PYTHON_INSTALL_DIR})
set_tests_properties(test_python_install PROPERTIES TIMEOUT 120)
# The example of docs/python.md and the README.
add_test(NAME test_python_example COMMAND ${NEXAR_PY_ENV}
  $<TARGET_FILE:nexar-run> -n 2 -t 60 -- ${Python3_EXECUTABLE}
  ${PROJECT_SOURCE_DIR}/examples/python_allreduce.py)
set_tests_properties(test_python_example PROPERTIES TIMEOUT 90)
