# md_install_docs.cmake - the docs and man pages `cmake --install` lays out (included by the top
# CMakeLists.txt after GNUInstallDirs and MDC_INSTALL_TRACESDIR):
#   share/doc/mdc/    the pages a driver author starts from, every page they link to, links out of
#                     docs/ pointed at the installed skeleton, corpus and headers
#                     (cmake/md_docs_stage.cmake, staged in <build>/doc at build time);
#   share/man/man1/   mdc.1 and mdc-COMMAND.1 for each command, by help2man from --help
#                     (cmake/md_man_pages.cmake, in <build>/man/man1), when help2man is found
#                     (scripts/deps.sh installs it) and the build is not sanitized.
# Test installed_docs installs into a scratch prefix and follows every link of the installed
# pages, and checks a man page per command, holding every option its --help lists.

set(MD_DOC_ROOTS driver-guide.md contract.md mdc-cli.md)
file(GLOB md_doc_pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
set(md_doc_map
  examples/driver_skeleton=${CMAKE_INSTALL_DATADIR}/mdc/examples/driver_skeleton
  conformance/traces=${MDC_INSTALL_TRACESDIR}
  runtime/include/md=${CMAKE_INSTALL_INCLUDEDIR}/md)
string(REPLACE ";" "\\;" md_doc_map_arg "${md_doc_map}")
string(REPLACE ";" "\\;" md_doc_roots_arg "${MD_DOC_ROOTS}")
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/doc/.staged
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${CMAKE_BINARY_DIR}/doc
          -DROOTS=${md_doc_roots_arg} -DDOCDIR=${CMAKE_INSTALL_DOCDIR} -DMAP=${md_doc_map_arg}
          -P ${PROJECT_SOURCE_DIR}/cmake/md_docs_stage.cmake
  COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_BINARY_DIR}/doc/.staged
  DEPENDS ${md_doc_pages} ${PROJECT_SOURCE_DIR}/cmake/md_docs_stage.cmake
  COMMENT "docs for install: ${MD_DOC_ROOTS} and the pages they link to" VERBATIM)
add_custom_target(md_docs ALL DEPENDS ${CMAKE_BINARY_DIR}/doc/.staged)
install(DIRECTORY ${CMAKE_BINARY_DIR}/doc/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")

find_program(MD_HELP2MAN help2man)
set(MD_MAN_PAGES OFF)
if(MD_HELP2MAN AND NOT MD_SANITIZE AND NOT CMAKE_CROSSCOMPILING)
  set(MD_MAN_PAGES ON)
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/man/.made
    COMMAND ${CMAKE_COMMAND} -DMDC=$<TARGET_FILE:mdc> -DHELP2MAN=${MD_HELP2MAN}
            -DOUT=${CMAKE_BINARY_DIR}/man/man1 -DVERSION=${PROJECT_VERSION}
            -P ${PROJECT_SOURCE_DIR}/cmake/md_man_pages.cmake
    COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_BINARY_DIR}/man/.made
    DEPENDS mdc ${PROJECT_SOURCE_DIR}/cmake/md_man_pages.cmake
    COMMENT "man pages: help2man on mdc --help and each command's --help" VERBATIM)
  add_custom_target(md_man ALL DEPENDS ${CMAKE_BINARY_DIR}/man/.made)
  install(DIRECTORY ${CMAKE_BINARY_DIR}/man/man1 DESTINATION ${CMAKE_INSTALL_MANDIR} FILES_MATCHING PATTERN "*.1")
elseif(NOT MD_SANITIZE)
  message(STATUS "man pages: none (no help2man; scripts/deps.sh installs it)")
endif()

# Tests of what a reader gets. mdc_installed (a fixture): `cmake --install` into
# <build>/installed/mdc, used by installed_docs (links, man pages: cmake/tests/installed_docs.cmake)
# and skeleton_gate_installed (the guide's gate followed on the installed tree, green then red on
# a broken build: cmake/tests/skeleton_gate.py, with HOME=<build>/installed). docs_current: the
# counts and options the docs state are the build's (conformance/tests/test_docs.py). Not under
# sanitizers, like install_kit: outside programs cannot load a sanitized build.
if(MD_BUILD_TESTS AND NOT MD_SANITIZE)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  set(md_installed ${CMAKE_BINARY_DIR}/installed)
  add_test(NAME mdc_install COMMAND ${CMAKE_COMMAND} --install ${CMAKE_BINARY_DIR} --prefix ${md_installed}/mdc)
  add_test(NAME mdc_install_cleanup COMMAND ${CMAKE_COMMAND} -E rm -rf ${md_installed})
  set_tests_properties(mdc_install PROPERTIES FIXTURES_SETUP mdc_installed LABELS "install;docs")
  set_tests_properties(mdc_install_cleanup PROPERTIES FIXTURES_CLEANUP mdc_installed LABELS "install;docs")
  add_test(NAME installed_docs COMMAND ${CMAKE_COMMAND} -DPREFIX=${md_installed}/mdc
           -DDOCDIR=${CMAKE_INSTALL_DOCDIR} -DMANDIR=${CMAKE_INSTALL_MANDIR} -DBINDIR=${CMAKE_INSTALL_BINDIR}
           -DMAN=${MD_MAN_PAGES} -P ${PROJECT_SOURCE_DIR}/cmake/tests/installed_docs.cmake)
  add_test(NAME skeleton_gate_installed
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/cmake/tests/skeleton_gate.py --home ${md_installed})
  set_tests_properties(installed_docs skeleton_gate_installed PROPERTIES
                       FIXTURES_REQUIRED mdc_installed LABELS "install;docs" TIMEOUT 600)
  set_tests_properties(skeleton_gate_installed PROPERTIES RESOURCE_LOCK md_installed_home)
  add_test(NAME docs_current
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/conformance/tests/test_docs.py
                   --src ${PROJECT_SOURCE_DIR} --mdc $<TARGET_FILE:mdc> --skeleton $<TARGET_FILE:md_driver_skeleton>
                   --ctest ${CMAKE_CTEST_COMMAND} --cmake ${CMAKE_COMMAND})
  set_tests_properties(docs_current PROPERTIES LABELS "docs" TIMEOUT 600)
endif()
