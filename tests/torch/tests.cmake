# The torch.distributed backend (docs/torch.md), with the binding's
# interpreter and environment from the build tree (NEXAR_PY_ENV of
# python/tests.cmake, sanitizer runtimes preloaded in a sanitizer build).
# A script exits 77 (skipped) when torch cannot be imported.
set(NEXAR_TORCH_ENV ${NEXAR_PY_ENV})
math(EXPR _torch_t "240 * ${NEXAR_TEST_TIMEOUT_MULTIPLIER}")
# Every operation bit-exact, bad input, a mismatch across ranks: world size
# 2 under nexar-run, 4 under torchrun (the store rendezvous).
add_test(NAME test_torch_backend_np2 COMMAND ${NEXAR_TORCH_ENV}
  $<TARGET_FILE:nexar-run> -n 2 -t 200 -- ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_SOURCE_DIR}/torch/test_backend.py)
add_test(NAME test_torch_backend_np4 COMMAND ${NEXAR_TORCH_ENV}
  ${Python3_EXECUTABLE} -m torch.distributed.run --standalone --nproc_per_node 4
  --redirects 1 --tee 1 ${CMAKE_CURRENT_SOURCE_DIR}/torch/test_backend.py --keep-groups)
# DDP on the digits: nexar under nexar-run and torchrun, gloo under torchrun.
add_test(NAME test_torch_ddp COMMAND ${NEXAR_TORCH_ENV} ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_SOURCE_DIR}/torch/test_ddp.py $<TARGET_FILE:nexar-run>
  ${PROJECT_SOURCE_DIR}/examples/torch_ddp.py ${CMAKE_CURRENT_BINARY_DIR}/torch_ddp)
set_tests_properties(test_torch_backend_np2 test_torch_backend_np4 test_torch_ddp
  PROPERTIES TIMEOUT ${_torch_t} SKIP_RETURN_CODE 77)
