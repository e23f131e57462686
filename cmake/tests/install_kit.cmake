# install_kit.cmake - the `install_kit` test: mdc installed like a library is enough to build
# and judge a driver (docs/driver-guide.md, "Installing mdc").
#   cmake -DBUILD=<build dir> -DSRC=<source dir> -DWORK=<scratch dir> -DCC=<C compiler>
#         -DBINDIR=bin -DLIBDIR=lib -DINCLUDEDIR=include -DDATADIR=share -DDOCDIR=share/doc/mdc
#         -P install_kit.cmake
# 1. `cmake --install BUILD --prefix WORK/prefix`; every promised file is there, mdc's RUNPATH
#    is relative to itself and `mdc --version` names the installed driver and recorder;
# 2. the installed skeleton sources build with find_package(mdc) (a CMake project) and with a
#    plain `cc $(pkg-config --cflags mdc-driver)`; a program links mdc::reference_driver and
#    runs; mdc-driver.pc links nothing (a driver needs only its headers), and
#    mdc-reference-driver.pc links the reference driver;
# 3. the installed mdc replays the installed basic traces: every one passes on both skeletons
#    and on the reference driver it finds itself.
foreach(v BUILD SRC WORK CC BINDIR LIBDIR INCLUDEDIR DATADIR DOCDIR)
  if(NOT ${v})
    message(FATAL_ERROR "install_kit: -D${v}=... is required")
  endif()
endforeach()

# Runs a command; stops the test with its output when it fails. RUN_OUT holds its stdout.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "install_kit: `${cmd}` exited ${rc}\n--- stdout\n${out}\n--- stderr\n${err}")
  endif()
  set(RUN_OUT "${out}" PARENT_SCOPE)
endfunction()

# Replays the installed basic traces against a driver (empty: mdc's own reference driver) and
# requires every one of them to pass.
function(replay_basic what)
  set(driver)
  if(ARGN)
    set(driver --driver ${ARGN})
  endif()
  run(${P}/${BINDIR}/mdc replay --no-db --json --quiet ${driver} ${P}/${DATADIR}/mdc/traces/basic)
  string(JSON cases GET "${RUN_OUT}" cases)
  string(JSON passed GET "${RUN_OUT}" passed)
  string(JSON name GET "${RUN_OUT}" driver)
  if(NOT cases EQUAL N_BASIC OR NOT passed EQUAL N_BASIC)
    message(FATAL_ERROR "install_kit: ${what} (${name}): ${passed} of ${cases} basic traces passed, want all ${N_BASIC}\n${RUN_OUT}")
  endif()
  message(STATUS "install_kit: ${what} (${name}): ${passed} of ${cases} basic traces pass")
endfunction()

file(REMOVE_RECURSE ${WORK})
set(P ${WORK}/prefix)

# 1. install
run(${CMAKE_COMMAND} --install ${BUILD} --prefix ${P})
foreach(f ${BINDIR}/mdc ${LIBDIR}/libmd_driver.so ${LIBDIR}/mdc/libmdc_record.so
          ${INCLUDEDIR}/md/driver.h ${INCLUDEDIR}/md/status.h ${LIBDIR}/pkgconfig/mdc-driver.pc
          ${LIBDIR}/pkgconfig/mdc-reference-driver.pc
          ${LIBDIR}/cmake/mdc/mdcConfig.cmake ${LIBDIR}/cmake/mdc/mdcConfigVersion.cmake
          ${DATADIR}/mdc/traces/README.md ${DATADIR}/mdc/examples/driver_skeleton/driver_skeleton.c
          ${DATADIR}/mdc/examples/driver_skeleton/CMakeLists.txt ${DOCDIR}/contract.md ${DOCDIR}/driver-guide.md)
  if(NOT EXISTS ${P}/${f})
    message(FATAL_ERROR "install_kit: ${P}/${f} was not installed")
  endif()
endforeach()
foreach(f ${INCLUDEDIR}/md/config.h ${INCLUDEDIR}/md/loader.h ${DATADIR}/mdc/traces/gen)
  if(EXISTS ${P}/${f})
    message(FATAL_ERROR "install_kit: ${P}/${f} is installed, but nothing installed implements or needs it")
  endif()
endforeach()
file(GLOB_RECURSE src_traces RELATIVE ${SRC}/conformance/traces ${SRC}/conformance/traces/*.jsonl)
file(GLOB_RECURSE inst_traces RELATIVE ${P}/${DATADIR}/mdc/traces ${P}/${DATADIR}/mdc/traces/*.jsonl)
list(LENGTH src_traces n_src)
list(LENGTH inst_traces n_inst)
if(NOT n_src EQUAL n_inst)
  message(FATAL_ERROR "install_kit: ${n_inst} traces installed, ${n_src} in the corpus")
endif()
file(GLOB basic ${P}/${DATADIR}/mdc/traces/basic/*.jsonl)
list(LENGTH basic N_BASIC)
if(N_BASIC EQUAL 0)
  message(FATAL_ERROR "install_kit: no basic traces installed")
endif()
file(RELATIVE_PATH bin_to_lib ${P}/${BINDIR} ${P}/${LIBDIR})
file(READ_ELF ${P}/${BINDIR}/mdc RUNPATH runpath)
if(NOT runpath STREQUAL "$ORIGIN/${bin_to_lib}")
  message(FATAL_ERROR "install_kit: the installed mdc's RUNPATH is '${runpath}', want '$ORIGIN/${bin_to_lib}'")
endif()
run(${P}/${BINDIR}/mdc --version)
foreach(pair "reference driver|${LIBDIR}/libmd_driver.so" "recorder|${LIBDIR}/mdc/libmdc_record.so")
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 label)
  list(GET pair 1 rel)
  if(NOT RUN_OUT MATCHES "${label}: ([^\n]+)")
    message(FATAL_ERROR "install_kit: mdc --version names no ${label}:\n${RUN_OUT}")
  endif()
  file(REAL_PATH "${CMAKE_MATCH_1}" got)
  file(REAL_PATH "${P}/${rel}" want)
  if(NOT got STREQUAL want)
    message(FATAL_ERROR "install_kit: the installed mdc uses ${label} ${got}, want ${want}")
  endif()
endforeach()

# 2. build against the installed tree: find_package, a program using the reference driver, pkg-config
set(skel ${P}/${DATADIR}/mdc/examples/driver_skeleton)
run(${CMAKE_COMMAND} -S ${skel} -B ${WORK}/fp -DCMAKE_PREFIX_PATH=${P} -DCMAKE_C_COMPILER=${CC}
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK}/fp)
run(${CMAKE_COMMAND} -S ${SRC}/cmake/tests/install_consumer -B ${WORK}/consumer -DCMAKE_PREFIX_PATH=${P}
    -DCMAKE_C_COMPILER=${CC})
run(${CMAKE_COMMAND} --build ${WORK}/consumer)
run(${WORK}/consumer/mdc_consumer)
message(STATUS "install_kit: consumer: ${RUN_OUT}")

set(pc ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${P}/${LIBDIR}/pkgconfig pkg-config)
run(${pc} --cflags mdc-driver)
string(STRIP "${RUN_OUT}" cflags)
separate_arguments(cflags UNIX_COMMAND "${cflags}")
run(${pc} --variable=includedir mdc-driver)
string(STRIP "${RUN_OUT}" pc_include)
file(REAL_PATH "${pc_include}" pc_include)
file(REAL_PATH "${P}/${INCLUDEDIR}" want_include)
if(NOT pc_include STREQUAL want_include)
  message(FATAL_ERROR "install_kit: mdc-driver.pc's includedir is ${pc_include}, want ${want_include}")
endif()
run(${pc} --libs mdc-driver)
if(RUN_OUT MATCHES "-l")
  message(FATAL_ERROR "install_kit: pkg-config --libs mdc-driver gives '${RUN_OUT}': a driver built with it would link a library")
endif()
run(${pc} --libs mdc-reference-driver)
if(NOT RUN_OUT MATCHES "-lmd_driver")
  message(FATAL_ERROR "install_kit: pkg-config --libs mdc-reference-driver gives '${RUN_OUT}', no -lmd_driver")
endif()
file(MAKE_DIRECTORY ${WORK}/pc)
run(${CC} -std=c11 -Wall -Wextra -Werror -O2 -shared -fPIC ${cflags} ${skel}/driver_skeleton.c
    -Wl,--no-undefined -o ${WORK}/pc/libskeleton_pc.so)

# 3. judge
replay_basic("skeleton built with find_package" ${WORK}/fp/libmd_driver_skeleton.so)
replay_basic("skeleton built with pkg-config" ${WORK}/pc/libskeleton_pc.so)
replay_basic("installed reference driver")
file(REMOVE_RECURSE ${WORK})
