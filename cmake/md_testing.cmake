# md_testing.cmake - Criterion test executables and their CTest registration.
#
# md_test_executable(<target> <sources>...): an executable linked with Criterion. A target whose
# name contains "concurrency" or "async" (executions on the driver's and the device's worker
# threads) is in the ThreadSanitizer suite (label "concurrency"); under
# MD_SANITIZE=thread it is built against runtime/tests/tsan_runner instead, because Criterion
# 2.4.1 cannot start under TSan (see tsan_runner/criterion/criterion.h).
function(md_test_executable target)
  add_executable(${target} ${ARGN})
  if(MD_SANITIZE MATCHES "thread" AND target MATCHES "concurrency|async")
    target_link_libraries(${target} PRIVATE md_tsan_runner)
  else()
    target_link_libraries(${target} PRIVATE PkgConfig::CRITERION)
  endif()
  add_test(NAME ${target} COMMAND ${target} --jobs 2)
  if(target MATCHES "concurrency|async")
    set_tests_properties(${target} PROPERTIES LABELS "concurrency")
  endif()
endfunction()
