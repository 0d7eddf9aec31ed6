/*
 * h5gds-calls: the cost of one small H5Dwrite / H5Dread on host memory, sec2
 * against gds, on a file kept open (as h5perf_serial measures it). Rounds
 * alternate the drivers so that both see the same disk and cache; each call
 * is timed and the median per call is reported. With --cuda the process
 * first creates a CUDA context, as a GPU application would, so that the
 * driver classifies every raw-data buffer with the CUDA driver.
 *
 *   h5gds-calls [--sizes 4KiB,64KiB,1MiB] [--calls 400] [--rounds 5] [--cuda] [--dir D] [--csv F]
 *               [--only sec2|gds]   (one driver alone: for profilers)
 *               [--selection-io off] (HDF5 >= 1.14: turn selection I/O off on the transfers)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "H5FDgds.h"
#include "cli_args.h"
#include "cuda_loader.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void fail(const char *what)
{
    fprintf(stderr, "h5gds-calls: %s\n", what);
    _exit(1);
}

/* A wrong argument: one line, exit status 2. */
static void bad_arg(const char *option, const char *value, const char *why)
{
    fprintf(stderr, "h5gds-calls: bad %s '%s': %s (--help for usage)\n", option, value, why);
    exit(2);
}

#define MAX_SIZES 32

/* The comma list of --sizes, each a positive size (the configuration's syntax). */
static int parse_sizes(const char *arg, size_t *sizes)
{
    int n = 0;
    for (const char *it = arg;; n++) {
        const char *comma = strchr(it, ',');
        size_t len = comma ? (size_t)(comma - it) : strlen(it);
        char item[64];
        if (len == 0 || len >= sizeof item)
            bad_arg("--sizes", arg, len ? "has an item too long to be a size" : "has an empty item");
        if (n == MAX_SIZES)
            bad_arg("--sizes", arg, "has more than 32 sizes");
        memcpy(item, it, len);
        item[len] = '\0';
        const char *why = cli_parse_size(item, &sizes[n]);
        if (why)
            bad_arg("--sizes", item, why);
        if (sizes[n] == 0)
            bad_arg("--sizes", item, "is 0 bytes");
        if (!comma)
            return n + 1;
        it = comma + 1;
    }
}

static int count_arg(const char *option, const char *value, long min, long max)
{
    long v = 0;
    const char *why = cli_parse_long(value, min, max, &v);
    if (why)
        bad_arg(option, value, why);
    return (int)v;
}

/* A CUDA context in this process, as a GPU application has (through the
 * CUDA loader, h5gds_cuda); returns the seconds one cuPointerGetAttributes
 * with the 4 attributes the driver asks for takes on `probe` (median), or
 * -1; *single: the same call with one attribute. */
static double init_cuda(const void *probe, double *single)
{
    const gds_cuda_api_t *cu = gds_cuda_load(NULL);
    if (!cu || !gds_cuda_use_device(0, NULL, 0, NULL))
        return -1;
    CUpointer_attribute attrs[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                    CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    unsigned type = 0, managed = 0;
    void *c = NULL;
    int ord = -1;
    void *values[4] = {&type, &managed, &c, &ord};
    double t[101];
    for (int i = 0; i < 101; i++) {
        double t0 = now();
        cu->PointerGetAttributes(1, attrs, values, (CUdeviceptr)(uintptr_t)probe);
        t[i] = now() - t0;
    }
    *single = median(t, 101);
    for (int i = 0; i < 101; i++) {
        double t0 = now();
        cu->PointerGetAttributes(4, attrs, values, (CUdeviceptr)(uintptr_t)probe);
        t[i] = now() - t0;
    }
    return median(t, 101);
}

int main(int argc, char **argv)
{
    const char *sizes_arg = "4KiB,64KiB,256KiB,1MiB,4MiB", *dir = ".", *csv_path = NULL;
    int calls = 400, rounds = 5;
    int cuda = 0, only = -1, selection_off = 0;
    static const char usage[] = "usage: h5gds-calls [--sizes LIST] [--calls N] [--rounds N] [--cuda] [--dir D] "
                                "[--csv F] [--only sec2|gds] [--selection-io off]\n"
                                "  sizes as in the gds configuration: 4096, 64KiB, 8MiB, 1G, 500MB\n";
    for (int i = 1; i < argc; i++) {
        static const char *const with_value[] = {"--sizes", "--calls", "--rounds", "--dir", "--csv", "--only",
                                                 "--selection-io"};
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            if (!strcmp(argv[i], with_value[k]) && i + 1 == argc) {
                fprintf(stderr, "h5gds-calls: option '%s' needs a value (--help for usage)\n", argv[i]);
                return 2;
            }
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        else if (!strcmp(argv[i], "--sizes"))
            sizes_arg = argv[++i];
        else if (!strcmp(argv[i], "--calls"))
            calls = count_arg("--calls", argv[++i], 1, 1000000);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = count_arg("--rounds", argv[++i], 1, 64);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[++i];
        else if (!strcmp(argv[i], "--csv"))
            csv_path = argv[++i];
        else if (!strcmp(argv[i], "--cuda"))
            cuda = 1;
        else if (!strcmp(argv[i], "--selection-io")) {
            if (strcmp(argv[++i], "off"))
                bad_arg("--selection-io", argv[i], "only 'off' is known");
            selection_off = 1;
        }
        else if (!strcmp(argv[i], "--only")) {
            i++;
            only = !strcmp(argv[i], "sec2") ? 0 : !strcmp(argv[i], "gds") ? 1 : -2;
            if (only == -2)
                bad_arg("--only", argv[i], "takes sec2 or gds");
        }
        else {
            fprintf(stderr, "h5gds-calls: unknown argument '%s' (--help for usage)\n", argv[i]);
            return 2;
        }
    }
    size_t sizes[MAX_SIZES];
    int nsizes = parse_sizes(sizes_arg, sizes);
    char path[4096];
    snprintf(path, sizeof path, "%s/h5gds-calls.%d.h5", dir, (int)getpid());
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv_path && !csv)
        fail("cannot write the CSV file");
    if (csv)
        fprintf(csv, "driver,op,size_bytes,cuda,round,calls,median_call_us\n");

    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
#if H5_VERSION_GE(1, 14, 0)
    if (selection_off && H5Pset_selection_io(dxpl, H5D_SELECTION_IO_MODE_OFF) < 0)
        fail("cannot turn selection I/O off");
#else
    if (selection_off)
        bad_arg("--selection-io", "off", "needs HDF5 >= 1.14 (selection I/O)");
#endif
    unsigned char *probe = malloc(4096);
    if (cuda) {
        double single = 0, t = init_cuda(probe, &single);
        if (t < 0)
            fail("--cuda: no usable CUDA driver or GPU");
        printf("on pageable memory: cuPointerGetAttributes (4 attributes) %.3f us, (1 attribute) %.3f us\n", t * 1e6,
               single * 1e6);
    }
    free(probe);
    printf("%-9s %-5s %10s %12s %12s %8s\n", "size", "op", "calls", "sec2 us", "gds us", "gds/sec2");

    for (int si = 0; si < nsizes; si++) {
        size_t size = sizes[si];
        char tok[32];
        cli_format_size(size, tok, sizeof tok);
        unsigned char *buf = malloc(size);
        if (!buf)
            fail("out of memory");
        for (size_t i = 0; i < size; i++)
            buf[i] = (unsigned char)(rand() >> 7);
        double *t = malloc(sizeof(double) * (size_t)calls);
        double med[2][2][64] = {{{0}}}; /* driver, op, round */
        for (int r = 0; r < rounds; r++) {
            for (int drv = 0; drv < 2; drv++) {
                if (only >= 0 && drv != only)
                    continue;
                hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
                if (drv == 1 ? H5Pset_fapl_gds(fapl, 0, 0, 0) < 0 : H5Pset_fapl_sec2(fapl) < 0)
                    fail("cannot set the driver");
                hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
                hsize_t dims[1] = {size};
                hid_t s = H5Screate_simple(1, dims, NULL);
                hid_t dcpl = H5FD_gds_create_dcpl();
                hid_t d = H5Dcreate2(f, "data", H5T_NATIVE_UCHAR, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
                if (f < 0 || d < 0)
                    fail("cannot create the test file");
                for (int op = 0; op < 2; op++) {
                    for (int c = 0; c < calls; c++) {
                        double t0 = now();
                        herr_t rc = op == 0 ? H5Dwrite(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, dxpl, buf)
                                            : H5Dread(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, dxpl, buf);
                        t[c] = now() - t0;
                        if (rc < 0)
                            fail("H5Dwrite/H5Dread failed");
                    }
                    med[drv][op][r] = median(t, calls) * 1e6;
                    if (csv)
                        fprintf(csv, "%s,%s,%zu,%d,%d,%d,%.3f\n", drv ? "gds" : "sec2", op ? "read" : "write", size,
                                cuda, r, calls, med[drv][op][r]);
                }
                H5Dclose(d);
                H5Pclose(dcpl);
                H5Sclose(s);
                H5Fclose(f);
                H5Pclose(fapl);
                unlink(path);
            }
        }
        for (int op = 0; op < 2; op++) {
            double a = median(med[0][op], rounds), b = median(med[1][op], rounds);
            printf("%-9s %-5s %10d %12.2f %12.2f %8.3f\n", tok, op ? "read" : "write", calls, a, b, b / a);
        }
        free(t);
        free(buf);
    }
    H5Pclose(dxpl);
    if (csv)
        fclose(csv);
    return 0;
}
