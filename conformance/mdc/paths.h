/* paths.h - where mdc's own files are at run time (paths.c); private to conformance/mdc/. */
#ifndef MDC_PATHS_H
#define MDC_PATHS_H

/* Each path: never NULL; the string is static and the first call of any of them decides it
 * (thread-safe). "Installed": the reference driver lies at <dir of mdc>/<bin-to-lib>/. */

/* The reference driver libmd_driver.so: <dir of mdc>/<bin-to-lib>/ when mdc runs installed,
 * else the build tree's. */
const char *mdc_cli__reference_driver_path(void);

/* The recording driver libmdc_record.so: <dir of mdc>/<bin-to-lib>/mdc/ when installed, else
 * the build tree's. */
const char *mdc_cli__recorder_path(void);

/* `mdc fuzz`'s default --fuzz-build: <prefix>/libexec/mdc/afl when installed (its siblings
 * afl-asan and afl-cmplog are the other two AFL++ builds; each holds md_fuzz_T), else
 * <source>/build-fuzz (md_fuzz_T under fuzz/). The path may not exist. */
const char *mdc_cli__fuzz_build_default(void);

/* The seeds (seeds/T/) and dictionaries (dict/T.dict) of the fuzz targets: <prefix>/share/mdc/fuzz
 * when installed, else <build>/fuzz. */
const char *mdc_cli__fuzz_data_dir(void);

/* md_fuzz_replay (<prefix>/libexec/mdc/ installed) and the AFL++ program mutator
 * libmd_fuzz_mutator.so (<prefix>/lib/mdc/ installed), else the build tree's. */
const char *mdc_cli__fuzz_replay_path(void);
const char *mdc_cli__fuzz_mutator_path(void);

/* 1 when mdc runs from an installed prefix, else 0. */
int mdc_cli__installed(void);

/* The source tree mdc was built from, or NULL when mdc runs installed (the compiled-in path may
 * be another machine's): what `mdc mutants` builds in. */
const char *mdc_cli__source_tree(void);

#endif
