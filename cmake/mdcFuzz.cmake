# mdcFuzz.cmake - mdc_fuzz_driver(): a driver built for fuzzing with coverage of its own code
# (docs/fuzzing.md "Instrumenting a driver"). Installed beside mdcConfig.cmake and included by it,
# so a driver's project has it after find_package(mdc).
#
#   mdc_fuzz_driver(<target> [ENGINE afl|libfuzzer|gcov])
#
# adds to a driver's shared library the instrumentation the fuzz targets count as coverage:
#   afl        (default) for `mdc fuzz` (AFL++): nothing more when the compiler is afl-clang-fast or
#              afl-clang-lto (it instruments everything); with clang, -fsanitize-coverage=trace-pc-guard
#              (the AFL++ runtime in the fuzz target implements its callbacks)
#   libfuzzer  for the libFuzzer targets (OSS-Fuzz, ClusterFuzzLite): -fsanitize=fuzzer-no-link
# and in both cases -g -fno-omit-frame-pointer, and -Wl,-z,undefs last on its link line: the
# coverage callbacks (and a sanitizer's runtime) are defined by the fuzz target that loads the
# driver, so a --no-undefined of the driver's own must not refuse them. gcc cannot instrument
# for either engine: a configure error says so.
#   gcov       not fuzzed: the yardstick `mdc fuzz --driver-coverage SO` replays a campaign's queue
#              through (gcc: --coverage -O0 -g, compiled and linked; gcov reads its .gcno notes
#              beside the objects, so the build tree must stay where it was built). gcc only:
#              clang's --coverage data is not gcc's gcov format.
#
# Without editing a driver's CMakeLists.txt: -DMDC_FUZZ_ENGINE=afl (or libfuzzer, gcov) on the cmake
# command line makes find_package(mdc) instrument every target of the directory that calls it
# (the same flags, added before its targets are made). Other build systems: the flags above
# (docs/fuzzing.md lists them).

# The compile flags of ENGINE for the C compiler in use; a fatal error when it cannot.
function(mdc__fuzz_flags engine out)
  if(NOT engine)
    set(engine afl)
  endif()
  if(engine STREQUAL "gcov")
    if(NOT CMAKE_C_COMPILER_ID STREQUAL "GNU")
      message(FATAL_ERROR "mdc_fuzz_driver: ENGINE gcov needs gcc (gcov reads gcc's --coverage data), not "
              "${CMAKE_C_COMPILER_ID} (${CMAKE_C_COMPILER}): configure with -DCMAKE_C_COMPILER=gcc")
    endif()
    set(${out} --coverage -O0 -g PARENT_SCOPE)
    return()
  endif()
  set(afl_cc FALSE)
  if(CMAKE_C_COMPILER MATCHES "afl-clang|afl-cc")
    set(afl_cc TRUE)
  endif()
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "mdc_fuzz_driver: ENGINE ${engine} needs clang or afl-clang-fast, not "
            "${CMAKE_C_COMPILER_ID} (${CMAKE_C_COMPILER}): configure with -DCMAKE_C_COMPILER=afl-clang-fast "
            "(or clang)")
  endif()
  if(engine STREQUAL "afl")
    if(afl_cc)
      set(flags "")
    else()
      set(flags -fsanitize-coverage=trace-pc-guard)
    endif()
  elseif(engine STREQUAL "libfuzzer")
    set(flags -fsanitize=fuzzer-no-link)
  else()
    message(FATAL_ERROR "mdc_fuzz_driver: ENGINE '${engine}': want afl, libfuzzer or gcov")
  endif()
  list(APPEND flags -g -fno-omit-frame-pointer)
  set(${out} ${flags} PARENT_SCOPE)
endfunction()

function(mdc_fuzz_driver target)
  cmake_parse_arguments(PARSE_ARGV 1 MDC_FD "" "ENGINE" "")
  if(NOT TARGET ${target})
    message(FATAL_ERROR "mdc_fuzz_driver: '${target}' is not a target")
  endif()
  set(engine ${MDC_FD_ENGINE})
  if(NOT engine AND MDC_FUZZ_ENGINE)
    set(engine ${MDC_FUZZ_ENGINE})
  endif()
  mdc__fuzz_flags("${engine}" flags)
  target_compile_options(${target} PRIVATE ${flags})
  if(engine STREQUAL "gcov")
    target_link_options(${target} PRIVATE --coverage)
  endif()
  # A link item, not a link option: it comes after the target's own options (-Wl,--no-undefined).
  target_link_libraries(${target} PRIVATE -Wl,-z,undefs)
endfunction()

# -DMDC_FUZZ_ENGINE=afl|libfuzzer|gcov: every target made after find_package(mdc), in its directory.
if(MDC_FUZZ_ENGINE)
  mdc__fuzz_flags("${MDC_FUZZ_ENGINE}" mdc__flags)
  add_compile_options(${mdc__flags})
  if(MDC_FUZZ_ENGINE STREQUAL "gcov")
    add_link_options(--coverage)
  endif()
  string(APPEND CMAKE_C_STANDARD_LIBRARIES " -Wl,-z,undefs")
  message(STATUS "mdc: instrumenting this project's targets for ${MDC_FUZZ_ENGINE} (MDC_FUZZ_ENGINE): ${mdc__flags}")
  unset(mdc__flags)
endif()
