/* no_entry.c - a shared object that is not a driver (no md_driver_entry), for `mdc replay
 * --driver` error tests. */
int mdc_test_not_a_driver(void);
int mdc_test_not_a_driver(void) { return 42; }
