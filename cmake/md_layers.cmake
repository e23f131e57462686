# md_layers.cmake - the library graph of docs/architecture.md, enforced.
#
# Two checks, both failing the build's tests when an arrow appears that the graph does not have:
#  * links (configure time, md_layers_check_links): every library target of the project is in
#    MD_LAYER_LINKS with the project targets it may link; a target that links another one, or a
#    library that is not in the table, stops the configure with a message naming both.
#  * includes (test `layers`, cmake/md_check_includes.cmake): every `#include "..."` of a
#    library's sources must resolve in its own folder or in the include folders the table below
#    (MD_LAYER_INCLUDES) gives that folder; the runtime including a backend's header, a backend
#    including the runtime's private headers, a tool including runtime/src: each fails, naming
#    the file, the line and the header.
# Tests, benchmarks and examples are not libraries: they may be white-box (md_runtime_private).

# target|project targets it may link, comma-separated (direct, as target_link_libraries gives them)
set(MD_LAYER_LINKS
  "md_headers|"
  "md_config|md_headers"
  "md_kernels_shared|"
  "md_kernels|md_headers,md_kernels_shared"
  "md_runtime_private|"
  "md_base|md_headers,md_kernels,md_runtime_private"
  "md_runtime|md_base,md_kernels,md_config,md_runtime_private"
  "md_sim|md_headers"
  "md_hip|md_headers,md_kernels,md_kernels_shared"
  "md_hipcpu|md_headers,md_kernels,md_kernels_shared"
  "md_refdriver|md_runtime,md_sim,md_hip,md_runtime_private"
  "md_driver|md_headers,md_hip"
  "md_refdriver_hipcpu|md_runtime,md_sim,md_hipcpu,md_runtime_private"
  "md_driver_hipcpu|md_headers"
  "md_mutants_objs|md_headers,md_kernels,md_config,md_sim,md_runtime_private"
  "md_driver_mutants|md_headers"
  # mdc mutate's schemata builds (tools/mutagen/): mirrors of the driver's libraries, taking their
  # include folders and definitions through $<TARGET_PROPERTY>, linking no project target
  "md_mutagen_base|" "md_mutagen_runtime|" "md_mutagen_refdriver|" "md_mutagen_config|"
  "md_mutagen_kernels|" "md_mutagen_sim|" "md_driver_mutagen|"
  "md_mutagenh_base|" "md_mutagenh_runtime|" "md_mutagenh_refdriver_hipcpu|" "md_mutagenh_config|"
  "md_mutagenh_kernels|" "md_mutagenh_sim|" "md_mutagenh_hipcpu|" "md_driver_mutagen_hipcpu|"
  # ... and the test fixture of `mdc mutate`: one file mirrored, the driver's other objects as built
  "md_mutagen_fixture_sim|" "md_driver_mutagen_fixture|md_runtime,md_base,md_kernels,md_config,md_sim,md_hip"
  "md_loader|md_headers"
  "mdc_calls|md_headers"
  "mdc_engine|md_headers,md_driver,md_config,mdc_calls,md_loader"
  "mdc_store|"
  "mdc_svg|"
  "mdc_report|mdc_store,mdc_svg"
  "mdc_fixture|mdc_store"
  "mdc_cli_core|md_headers,mdc_store"
  "mdc_record|md_headers,md_loader,md_config,mdc_calls"
  "mdc_fuzz|md_headers,mdc_calls,mdc_engine,md_config"
  "md_fuzz_mutator|md_headers,mdc_calls"
  "md_wl_common|md_driver,md_loader,md_config,md_headers"
  "md_tsan_runner|"
  "md_driver_skeleton|md_headers"
)

# folder (sources of one library; not its tests/)|include roots besides the folder itself, comma-separated
set(MD_LAYER_INCLUDES
  "runtime/include/md|runtime/include"
  "runtime/src|runtime/src/exec,runtime/src/memory,runtime/src/objects,runtime/src/model,runtime/src/pools,runtime/src/core,runtime/include"
  "runtime/src/exec|runtime/src/memory,runtime/src/objects,runtime/src/model,runtime/src/pools,runtime/src/core,runtime/src/kernels,runtime/include"
  "runtime/src/memory|runtime/src/objects,runtime/src/model,runtime/src/pools,runtime/src/core,runtime/include"
  "runtime/src/objects|runtime/src/model,runtime/src/pools,runtime/src/core,runtime/src/kernels,runtime/include"
  "runtime/src/model|runtime/src/pools,runtime/src/core,runtime/include"
  "runtime/src/pools|runtime/src/core,runtime/include"
  "runtime/src/core|runtime/include"
  "runtime/src/kernels|runtime/src/kernels/shared,runtime/include"
  "runtime/src/kernels/shared|runtime/include"
  "runtime/driver|runtime/src,runtime/src/core,runtime/include,sim/include,hip_kernels"
  "sim/include/md|sim/include,runtime/include"
  "sim/src|sim/include,runtime/include"
  "sim/workloads|runtime/include"
  "hip_kernels|runtime/include,runtime/src/kernels/shared,hip_kernels/cpu"
  "hip_kernels/cpu|hip_kernels,runtime/include,runtime/src/kernels/shared"
  "conformance/include/mdc|conformance/include,runtime/include"
  "conformance/calls|conformance/include,runtime/include"
  "conformance/engine|conformance/include,runtime/include"
  "conformance/record|conformance/include,runtime/include"
  "conformance/mdc|conformance/include,reports/include,runtime/include"
  "fuzz|conformance/include,runtime/include"
  "reports|reports/include"
  "reports/include/mdc|reports/include"
  "examples|runtime/include"
  "examples/driver_skeleton|runtime/include"
)

# Headers generated into a build folder (not in the source tree): an include of one is allowed
# where its generator's folder is (runtime/CMakeLists.txt writes mutants_gen.h for runtime/src/core/mutant.h).
set(MD_LAYER_GENERATED "runtime/src/core|mutants_gen.h" "runtime/driver|mutants_gen.h")

# Project targets among a target's link libraries (generator expressions and imported or
# external libraries left out).
function(md_layers_project_links target out)
  set(links)
  foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(l ${target} ${prop})
    if(l)
      list(APPEND links ${l})
    endif()
  endforeach()
  set(result)
  foreach(l ${links})
    if(l MATCHES "^\\$<" OR l MATCHES "::")
      continue()
    endif()
    if(TARGET ${l})
      get_target_property(imported ${l} IMPORTED)
      if(NOT imported)
        list(APPEND result ${l})
      endif()
    endif()
  endforeach()
  list(REMOVE_DUPLICATES result)
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# Every library target defined under `dir` (recursively), so none escapes the table.
function(md_layers_libraries dir out)
  set(all)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(type MATCHES "LIBRARY$")
      list(APPEND all ${t})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(s ${subdirs})
    md_layers_libraries(${s} sub)
    list(APPEND all ${sub})
  endforeach()
  set(${out} ${all} PARENT_SCOPE)
endfunction()

function(md_layers_check_links)
  set(known)
  foreach(row ${MD_LAYER_LINKS})
    string(REPLACE "|" ";" parts "${row}")
    list(GET parts 0 t)
    list(APPEND known ${t})
  endforeach()
  md_layers_libraries(${PROJECT_SOURCE_DIR} libs)
  set(errors)
  foreach(t ${libs})
    # Test drivers, fixtures and check-only object sets are not layers of the product.
    if(t MATCHES "^mdc_test_|_check_|^md_hip_check")
      continue()
    endif()
    list(FIND known ${t} idx)
    if(idx LESS 0)
      list(APPEND errors "library '${t}' is not in MD_LAYER_LINKS (cmake/md_layers.cmake): place it in the graph")
      continue()
    endif()
    list(GET MD_LAYER_LINKS ${idx} row)
    string(REGEX REPLACE "^[^|]*\\|" "" allowed "${row}")
    string(REPLACE "," ";" allowed "${allowed}")
    md_layers_project_links(${t} links)
    foreach(l ${links})
      list(FIND allowed ${l} ok)
      if(ok LESS 0)
        list(APPEND errors "'${t}' links '${l}', which docs/architecture.md does not allow (cmake/md_layers.cmake)")
      endif()
    endforeach()
  endforeach()
  if(errors)
    string(REPLACE ";" "\n  " msg "${errors}")
    message(FATAL_ERROR "mdc: layer check failed:\n  ${msg}")
  endif()
endfunction()
