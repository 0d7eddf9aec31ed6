/*
 * h5gds-bench --filter: the compressed datasets. Their pipelines are those
 * h5py + hdf5plugin write (python -m h5gds.bench compressed reads the same
 * filters), their data a float32 field that compresses like measured values.
 */
#include "bench.h"

/* hdf5plugin's cd_values. Blosc's slots 0-3 (filter and format versions,
 * type size, chunk bytes) are left 0, as hdf5plugin leaves them: the
 * filter's set_local fills them in; then clevel 5, byte shuffle, lz4 (the
 * compressor h5gds's GPU path checks). Bitshuffle: block size 0 (the
 * filter picks it) and 2 (LZ4); its set_local moves them to slots 3-4. */
const bench_filter_t bench_filters[] = {
    {"gzip", H5Z_FILTER_DEFLATE, "deflate level 4 + shuffle", true, 1, {4}},
    {"lz4", 32004, "LZ4 (HDF5 plugin 32004)", false, 1, {0}},
    {"zstd", 32015, "Zstandard level 3 (HDF5 plugin 32015)", false, 1, {3}},
    {"bitshuffle-lz4", 32008, "bitshuffle + LZ4 (HDF5 plugin 32008)", false, 2, {0, 2}},
    {"blosc-lz4", 32001, "Blosc LZ4, clevel 5, byte shuffle (HDF5 plugin 32001)", false, 7, {0, 0, 0, 0, 5, 1, 1}},
};
const size_t n_bench_filters = sizeof bench_filters / sizeof bench_filters[0];

const bench_filter_t *find_filter(const char *name)
{
    for (size_t i = 0; i < n_bench_filters; i++)
        if (!strcmp(name, bench_filters[i].name))
            return &bench_filters[i];
    return NULL;
}

/* Can this HDF5 write with the filter (loading its plugin if it is one)?
 * If not, one line saying what to do, for the caller to exit 2: a dataset
 * created without it would fail deep in HDF5 with an error stack. */
bool check_filter(const bench_filter_t *f)
{
    htri_t avail = 0;
    unsigned config = 0;
    /* A plugin that is not found pushes errors onto the stack: not printed. */
    H5E_BEGIN_TRY
    {
        avail = H5Zfilter_avail(f->id);
        if (avail > 0 && H5Zget_filter_info(f->id, &config) < 0)
            config = 0;
    }
    H5E_END_TRY;
    if (avail <= 0 && f->id == H5Z_FILTER_DEFLATE) {
        fprintf(stderr, "h5gds-bench: filter %s (%d) is not available: this HDF5 was built without zlib\n", f->name,
                (int)f->id);
        return false;
    }
    if (avail <= 0) {
        const char *path = getenv("HDF5_PLUGIN_PATH");
        fprintf(stderr,
                "h5gds-bench: filter %s (%d) is not available: set HDF5_PLUGIN_PATH to hdf5plugin's plugin folder "
                "(python3 -c 'import hdf5plugin; print(hdf5plugin.PLUGIN_PATH)'; now %s%s)\n",
                f->name, (int)f->id, path ? "HDF5_PLUGIN_PATH=" : "unset", path ? path : "");
        return false;
    }
    if (!(config & H5Z_FILTER_CONFIG_ENCODE_ENABLED)) {
        fprintf(stderr, "h5gds-bench: filter %s (%d) can only decode in this HDF5; the benchmark writes with it\n",
                f->name, (int)f->id);
        return false;
    }
    return true;
}

/* The pipeline on a dataset creation list. Plugin filters are optional,
 * as h5py sets them: a chunk the compressor cannot shrink is stored as is. */
void add_filter(hid_t dcpl, const bench_filter_t *f)
{
    herr_t rc = f->byte_shuffle ? H5Pset_shuffle(dcpl) : 0;
    if (rc >= 0)
        rc = f->id == H5Z_FILTER_DEFLATE ? H5Pset_deflate(dcpl, f->cd[0])
                                         : H5Pset_filter(dcpl, f->id, H5Z_FLAG_OPTIONAL, f->ncd, f->cd);
    if (rc < 0)
        fail("cannot add the %s filter to the dataset creation list", f->name);
}

/* Periods (elements) of the field's waves: primes, so that the sum repeats
 * only after their product, far beyond any dataset. */
enum { WAVE_SLOW = 48329, WAVE_MID = 8971, WAVE_FAST = 3137 };

/* The --filter data: a smooth field (a fast wave under a slow envelope,
 * plus a middle wave) with noise of +-0.002, rounded to 3 decimals, as
 * measured values are: compressible as real data is, neither as random
 * bytes (not at all) nor as zeros (without limit). Element i is a function
 * of i alone (the noise a hash of i), so every method and size writes the
 * same values. The waves come from one-period tables: sinf of a large
 * float index would step, and sin of a double is ten times slower. */
void fill_field(float *values, size_t count)
{
    static float slow[WAVE_SLOW], mid[WAVE_MID], fast[WAVE_FAST];
    const double two_pi = 6.283185307179586;
    for (int k = 0; k < WAVE_SLOW; k++)
        slow[k] = (float)cos(two_pi * k / WAVE_SLOW);
    for (int k = 0; k < WAVE_MID; k++)
        mid[k] = (float)(0.3 * sin(two_pi * k / WAVE_MID));
    for (int k = 0; k < WAVE_FAST; k++)
        fast[k] = (float)sin(two_pi * k / WAVE_FAST);
    size_t s = 0, m = 0, f = 0; /* i modulo each period */
    for (size_t i = 0; i < count; i++) {
        uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ULL; /* splitmix64's finalizer */
        h ^= h >> 30, h *= 0xBF58476D1CE4E5B9ULL, h ^= h >> 27, h *= 0x94D049BB133111EBULL, h ^= h >> 31;
        float noise = ((float)(h >> 40) * (1.0f / 16777216.0f) - 0.5f) * 0.004f;
        float x = fast[f] * slow[s] + mid[m] + noise;
        values[i] = roundf(x * 1000.0f) / 1000.0f;
        if (++s == WAVE_SLOW)
            s = 0;
        if (++m == WAVE_MID)
            m = 0;
        if (++f == WAVE_FAST)
            f = 0;
    }
}
