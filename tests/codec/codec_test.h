/* Check macros of the codec tests: tests/check.h's, which has no HDF5 (the
 * codec tests build without it). The exit code is the number of failures
 * (capped); 77 = skipped. */
#ifndef H5GDS_CODEC_TEST_H
#define H5GDS_CODEC_TEST_H

#include "../check.h"

#endif
