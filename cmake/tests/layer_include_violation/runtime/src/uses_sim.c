/* uses_sim.c - a fixture for the `layers_catch_an_include` test, never compiled: the runtime
 * including a backend's header, which cmake/md_check_includes.cmake must refuse. */
#include "md/sim.h"
