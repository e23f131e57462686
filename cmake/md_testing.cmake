# md_testing.cmake - registering Criterion test executables with CTest.
#
# md_criterion_test(<target>): adds the test, labels files whose name contains "concurrency"
# for the ThreadSanitizer suite, and under MD_SANITIZE=thread starts the binary through
# scripts/criterion-tsan.sh (Criterion's sandbox sometimes cannot start under TSan).
function(md_criterion_test target)
  if(MD_SANITIZE MATCHES "thread")
    add_test(NAME ${target} COMMAND ${PROJECT_SOURCE_DIR}/scripts/criterion-tsan.sh $<TARGET_FILE:${target}> --jobs 2)
  else()
    add_test(NAME ${target} COMMAND ${target} --jobs 2)
  endif()
  if(target MATCHES "concurrency")
    set_tests_properties(${target} PROPERTIES LABELS "concurrency")
  endif()
endfunction()
