/* paths.h - where mdc's own files are at run time (paths.c); private to conformance/mdc/. */
#ifndef MDC_PATHS_H
#define MDC_PATHS_H

/* The reference driver libmd_driver.so: <dir of mdc>/<bin-to-lib>/ when mdc runs installed,
 * else the build tree's. Never NULL; the string is static and the first call decides it. */
const char *mdc_cli__reference_driver_path(void);

/* The recording driver libmdc_record.so: <dir of mdc>/<bin-to-lib>/mdc/ when installed, else
 * the build tree's. As above. */
const char *mdc_cli__recorder_path(void);

#endif
