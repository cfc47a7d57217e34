# The test list: one line per test (name, timeout in seconds, sources).
nexar_test(test_wire 60 test_wire.c)
nexar_test(test_reduce 120 test_reduce.c)
# End-to-end DDP training at world sizes 1 and 4, compared weight for weight.
add_test(NAME test_ddp COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_ddp.sh
  $<TARGET_FILE:nexar-run> $<TARGET_FILE:ddp_digits>
  $<TARGET_FILE:compare-weights>)
set_tests_properties(test_ddp PROPERTIES TIMEOUT 400)
add_test(NAME test_launch COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_launch.sh $<TARGET_FILE:nexar-run>)
set_tests_properties(test_launch PROPERTIES TIMEOUT 60)
# nexar-perf over every OP at tiny sizes, results checked (#wrong 0), JSON.
add_test(NAME test_perf COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_perf.sh
  $<TARGET_FILE:nexar-run> $<TARGET_FILE:nexar-perf>)
math(EXPR t "120 * ${NEXAR_TEST_TIMEOUT_MULTIPLIER}")
set_tests_properties(test_perf PROPERTIES TIMEOUT ${t})
nexar_test(test_p2p 300 test_p2p.c)
nexar_test(test_coll 300 test_coll.c)
nexar_test(test_coll_algos 300 test_coll_algos.c)
nexar_test(test_lanes 180 test_lanes.c)
nexar_test(test_security 120 test_security.c)
nexar_test(test_backpressure 120 test_backpressure.c)
nexar_test(test_mismatch 300 test_mismatch.c)
