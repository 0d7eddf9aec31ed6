/*
 * Command-line values of the C tools (h5gds-bench, h5gds-calls,
 * h5gds-engine-bench): sizes in the syntax of the driver's configuration
 * (src/vfd/gds_config.c): "4096", "64KiB", "8MiB", "1g", K/M/G/T and
 * KiB..TiB (powers of 1024), KB/MB/GB/TB (powers of 1000), B; a final
 * lowercase "b" is refused (it can mean bits). The same syntax in Python:
 * python/src/h5gds/_sizes.py.
 */
#ifndef H5GDS_CLI_ARGS_H
#define H5GDS_CLI_ARGS_H

#include <stddef.h>

/* NULL with *out = the bytes `text` means, or the reason it is not a size
 * (one line, to follow the value in a message). */
const char *cli_parse_size(const char *text, size_t *out);

/* NULL with *out = `text` as a whole number in [min, max], or the reason. */
const char *cli_parse_long(const char *text, long min, long max, long *out);

/* NULL with *out = `text` as a finite number in (min, max], or the reason. */
const char *cli_parse_double(const char *text, double min, double max, double *out);

/* `bytes` for people, exact: "64MiB", "100KiB", "1000000B". */
const char *cli_format_size(size_t bytes, char *buf, size_t len);

#endif
