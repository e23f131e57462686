# md_docs_stage.cmake - the docs `cmake --install` puts in share/doc/mdc, staged in the build
# (cmake/md_install_docs.cmake runs it whenever a page changes):
#   cmake -DSRC=<source dir> -DOUT=<staging dir> -DROOTS=<pages in docs/> -DDOCDIR=share/doc/mdc
#         -DMAP=<repo folder>=<install folder>;... -P md_docs_stage.cmake
# Starting from ROOTS, every docs/ page a staged page links to is staged too, so no installed link
# leads to a page that is not installed. A link to a file outside docs/ is rewritten to where the
# install puts it, per MAP (e.g. examples/driver_skeleton=share/mdc/examples/driver_skeleton);
# one MAP does not cover is left as it is, and the test installed_docs, which follows every link
# of the installed tree, names it. Links with a scheme (https:) and anchors (#x) are kept.
cmake_minimum_required(VERSION 3.20)
foreach(v SRC OUT ROOTS DOCDIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "md_docs_stage: -D${v}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(queue ${ROOTS})
set(staged)
while(queue)
  list(POP_FRONT queue page)
  if(page IN_LIST staged)
    continue()
  endif()
  list(APPEND staged ${page})
  file(READ ${SRC}/docs/${page} text)
  # [text](target) with a relative target: not "scheme:", not "#anchor" only. "](" becomes
  # "LINK(" first: a ']' in a list element would stop CMake splitting the list there.
  string(REPLACE "](" "LINK(" scan "${text}")
  string(REGEX MATCHALL "LINK\\([^)# \t:]+[)#]" links "${scan}")
  list(REMOVE_DUPLICATES links)
  foreach(l ${links})
    string(REGEX REPLACE "^LINK\\((.*).$" "\\1" target "${l}")
    cmake_path(SET repo NORMALIZE "docs/${target}")
    if(repo MATCHES "^docs/([^/]+\\.md)$")
      list(APPEND queue ${CMAKE_MATCH_1})   # a page of docs/: staged beside this one
      continue()
    endif()
    foreach(pair ${MAP})
      string(REPLACE "=" ";" pair "${pair}")
      list(GET pair 0 from)
      list(GET pair 1 to)
      if(repo MATCHES "^${from}(/.*)?$")
        file(RELATIVE_PATH rel /p/${DOCDIR} /p/${to}${CMAKE_MATCH_1})
        string(REPLACE "](${target}" "](${rel}" text "${text}")
        break()
      endif()
    endforeach()
  endforeach()
  file(WRITE ${OUT}/${page} "${text}")
endwhile()
list(JOIN staged ", " staged)
message(STATUS "docs staged for install: ${staged}")
