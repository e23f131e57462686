# md_man_pages.cmake - the man pages of mdc, made at build time from its own --help by help2man
# (cmake/md_install_docs.cmake), so a page and --help cannot disagree:
#   cmake -DMDC=<mdc> -DHELP2MAN=<help2man> -DOUT=<dir>/man1 -DVERSION=0.1.0 -P md_man_pages.cmake
# mdc(1) from `mdc --help`, and mdc-COMMAND(1) from `mdc COMMAND --help` for every command that
# `mdc --help` lists (its description is the page's NAME line): a new command gets its page with
# nothing to add here. A command whose --help fails is warned about and gets no page; the test
# installed_docs then names it.
cmake_minimum_required(VERSION 3.20)
foreach(v MDC HELP2MAN OUT VERSION)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "md_man_pages: -D${v}=... is required")
  endif()
endforeach()

execute_process(COMMAND ${MDC} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "md_man_pages: `${MDC} --help` exited ${rc}")
endif()
file(REMOVE_RECURSE ${OUT})
get_filename_component(work ${OUT} DIRECTORY)
set(bin ${work}/bin)
file(REMOVE_RECURSE ${bin})
file(MAKE_DIRECTORY ${OUT} ${bin})

# "  replay [options] PATH...          replay traces against a driver": the command, then its
# description after the last run of two or more spaces (the whole line when there is none).
string(REPLACE "\n" ";" lines "${help}")
set(commands)
foreach(line IN LISTS lines)
  if(line MATCHES "^  ([a-z][a-z-]*) " AND NOT CMAKE_MATCH_1 IN_LIST commands)
    set(c ${CMAKE_MATCH_1})
    list(APPEND commands ${c})
    string(STRIP "${line}" desc_${c})
    if(line MATCHES "^  [a-z].*  +([^ ].*)$")
      set(desc_${c} "${CMAKE_MATCH_1}")
    endif()
  endif()
endforeach()

# help2man runs PROGRAM --help: here a script running "mdc [COMMAND] --help" that writes its
# "usage:" as "Usage:" and a second usage line as "or:", the words help2man makes the SYNOPSIS
# of; the text is --help's.
function(wrapper name args)
  file(WRITE ${bin}/${name} "#!/bin/sh\nout=$('${MDC}' ${args} \"$@\" 2>&1); rc=$?\n"
                            "printf '%s\\n' \"$out\" | sed -e 's/^usage:/Usage:/' -e '2s/^ \\{5,\\}mdc /  or: mdc /'\nexit $rc\n")
  file(CHMOD ${bin}/${name} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE)
endfunction()
function(page name program description see_also)
  file(WRITE ${bin}/${name}.h2m "[SEE ALSO]\n${see_also}\n")
  execute_process(COMMAND ${HELP2MAN} --no-info --no-discard-stderr --section=1 --version-string=${VERSION}
                          "--source=mdc ${VERSION}" "--name=${description}" --include=${bin}/${name}.h2m
                          --output=${OUT}/${name}.1 ${program}
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    file(REMOVE ${OUT}/${name}.1)
    message(WARNING "md_man_pages: no page ${name}(1): help2man exited ${rc}: ${err}")
  endif()
endfunction()

set(see_main)
foreach(c ${commands})
  list(APPEND see_main "mdc-${c}(1)")
endforeach()
list(JOIN see_main ", " see_main)
set(docs "The guides, in the docdir of mdc's install (e.g. /usr/local/share/doc/mdc): driver-guide.md, mdc-cli.md, contract.md.")
wrapper(mdc "")
page(mdc ${bin}/mdc "conformance and fuzzing harness for memory-domain GPU drivers" "${see_main}\n.PP\n${docs}")
foreach(c ${commands})
  wrapper(mdc-${c} ${c})
  page(mdc-${c} ${bin}/mdc-${c} "${desc_${c}}" "mdc(1)\n.PP\n${docs}")
endforeach()
list(JOIN commands " " commands)
message(STATUS "man pages: mdc ${commands}")
