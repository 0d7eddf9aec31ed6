/*
 * h5gds-bench's methods: one timed durable write, cold and warm read of an
 * HDF5 dataset through sec2, direct or gds, and their verification.
 */
#include "bench.h"

bool have_direct(void)
{
#ifdef H5_HAVE_DIRECT
    return true;
#else
    return false;
#endif
}

hid_t make_fapl(method_t m, const char *gds_config)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    switch (m) {
    case M_SEC2:
    case M_SEC2_PINNED: H5Pset_fapl_sec2(fapl); break;
    case M_DIRECT:
    case M_DIRECT_PINNED:
#ifdef H5_HAVE_DIRECT
        H5Pset_fapl_direct(fapl, 4096, 4096, 16 * MiB);
#endif
        break;
    default: {
        H5FD_gds_config_t c;
        if (H5FD_gds_config_init(&c) < 0 || H5FD_gds_config_parse(&c, gds_config) < 0 ||
            H5Pset_fapl_gds_config(fapl, &c) < 0)
            fail("cannot configure the gds driver with '%s'", gds_config);
    }
    }
    return fapl;
}

/* Where H5Dwrite/H5Dread point, and the bounce copy each method needs. */
void *io_buffer(method_t m, buffers_t *b)
{
    if (!is_gpu_memory(b->memory) || uses_gds(m))
        return b->data;
    return (m == M_SEC2_PINNED || m == M_DIRECT_PINNED) ? b->pinned : b->host;
}

/* The buffer a timed write hands to H5Dwrite, its bounce copy done. */
void *write_source(method_t m, buffers_t *b)
{
    void *buf = io_buffer(m, b);
    if (buf != b->data && cuda.api->MemcpyDtoH(buf, (CUdeviceptr)(uintptr_t)b->data, b->size) != CUDA_SUCCESS)
        fail("device-to-host copy failed");
    return buf;
}

/* After a timed read into `buf` (from io_buffer): the bounce copy into the
 * data buffer, and the GPU done with it. */
void read_finish(buffers_t *b, void *buf)
{
    if (buf != b->data && cuda.api->MemcpyHtoD((CUdeviceptr)(uintptr_t)b->data, buf, b->size) != CUDA_SUCCESS)
        fail("host-to-device copy failed");
    if (is_gpu_memory(b->memory))
        cuda.api->CtxSynchronize();
}

/* Early allocation, no fill; with --chunk, chunks of that size (at most the
 * dataset), and no chunk cache so that HDF5 hands the chunks to the driver.
 * With --filter, HDF5's incremental allocation instead: allocated early, each
 * chunk would take its uncompressed size before it is written compressed
 * (and the file would not be smaller). */
hid_t bench_dcpl(size_t size)
{
    hid_t dcpl = opt.filter ? H5Pcreate(H5P_DATASET_CREATE) : H5FD_gds_create_dcpl();
    if (dcpl < 0)
        fail("cannot create a dataset creation list");
    if (opt.chunk) {
        hsize_t chunk[1] = {(opt.chunk < size ? opt.chunk : size) / bench_element_size()};
        if (H5Pset_chunk(dcpl, 1, chunk) < 0)
            fail("cannot set the chunk size");
    }
    if (opt.filter)
        add_filter(dcpl, opt.filter);
    return dcpl;
}

/* With --filter, the route of the last timed H5Dwrite_gds/H5Dread_gds (its
 * row's note): gpu-encode/gpu-decode where the GPU did the filters. */
static const char *last_io_route;

/* With --filter the checked calls: for device memory the library decides
 * between the GPU codecs and staging through HDF5's CPU filters (a plain
 * H5Dwrite would hand the filters a device pointer); host memory goes
 * straight to H5Dwrite/H5Dread. Without, the calls the bench always made. */
static herr_t dataset_write(hid_t d, const void *buf)
{
    if (!opt.filter)
        return H5Dwrite(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    herr_t rc = H5Dwrite_gds(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    last_io_route = H5FD_gds_route_name(H5FD_gds_last_route());
    return rc;
}

static herr_t dataset_read(hid_t d, void *buf)
{
    if (!opt.filter)
        return H5Dread(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    herr_t rc = H5Dread_gds(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    last_io_route = H5FD_gds_route_name(H5FD_gds_last_route());
    return rc;
}

/* Decoded bytes over the bytes of the file just written (its metadata
 * included: what the disk holds and a cold read moves). */
static double file_ratio(const char *path, size_t size)
{
    struct stat sb;
    if (stat(path, &sb) < 0 || sb.st_size <= 0)
        fail("cannot stat %s: %s", path, strerror(errno));
    return (double)size / (double)sb.st_size;
}

double timed_write(method_t m, buffers_t *b, const char *path, const char *cfg)
{
    hid_t fapl = make_fapl(m, cfg);
    hid_t dcpl = bench_dcpl(b->size), dapl = H5FD_gds_create_dapl();
    hsize_t dims[1] = {b->size / bench_element_size()};
    /* A durable write creates a new file: deleting the previous one (freeing
     * its blocks takes ext4 a good part of a second per GiB) is not timed. */
    unlink(path);
    sync();
    double t0 = now();
    void *buf = write_source(m, b);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (f < 0)
        fail("cannot create %s (see the HDF5 error above)", path);
    hid_t s = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(f, "data", bench_type(), s, H5P_DEFAULT, dcpl, dapl);
    if (d < 0 || dataset_write(d, buf) < 0)
        fail("writing %zu bytes to %s failed (disk full?)", b->size, path);
    H5Dclose(d);
    H5Sclose(s);
    if (H5Fclose(f) < 0)
        fail("closing %s failed (disk full?)", path);
    fsync_path(path);
    double t = now() - t0;
    H5Pclose(fapl);
    H5Pclose(dcpl);
    H5Pclose(dapl);
    return t;
}

static double timed_read(method_t m, buffers_t *b, const char *path, const char *cfg)
{
    hid_t fapl = make_fapl(m, cfg);
    void *buf = io_buffer(m, b);
    double t0 = now();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (f < 0)
        fail("cannot open %s", path);
    hid_t dapl = H5FD_gds_create_dapl();
    hid_t d = H5Dopen2(f, "data", dapl);
    H5Pclose(dapl);
    if (d < 0 || dataset_read(d, buf) < 0)
        fail("reading %s failed", path);
    H5Dclose(d);
    H5Fclose(f);
    read_finish(b, buf);
    double t = now() - t0;
    H5Pclose(fapl);
    return t;
}


static double bench_write(method_t m, buffers_t *b, const char *cfg)
{
    if (is_shared(m))
        return timed_write_shared(m, b, cfg);
#ifdef H5GDS_BENCH_MPI
    if (par.on)
        return timed_write_mpi(m, b, cfg);
#endif
    return timed_write(m, b, files[0], cfg);
}

static double bench_read(method_t m, buffers_t *b, const char *cfg)
{
    if (is_shared(m))
        return timed_read_shared(m, b, cfg);
#ifdef H5GDS_BENCH_MPI
    if (par.on)
        return timed_read_mpi(m, b, cfg);
#endif
    return timed_read(m, b, files[0], cfg);
}

static void corrupt_one_byte(const char *path, size_t size)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "data", H5P_DEFAULT);
    haddr_t off = H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
    int fd = open(path, O_RDWR);
    unsigned char byte;
    off_t at = (off_t)(off + size / 2 + 1);
    if (fd < 0 || pread(fd, &byte, 1, at) != 1)
        fail("cannot corrupt %s", path);
    byte ^= 0x40;
    if (pwrite(fd, &byte, 1, at) != 1)
        fail("cannot corrupt %s", path);
    close(fd);
}

/* One repeat of one method (and thread/block setting): write, then the
 * reads. Repeats are interleaved with the other methods and the ceilings,
 * so that all see the same drift of a shared disk. */
/* The driver configuration of a GDS method at one grid point (0 = auto). */
static void method_config(method_t m, unsigned threads, size_t block, char *cfg, size_t len)
{
    cfg[0] = '\0';
    if (!uses_gds(m))
        return;
    int n = snprintf(cfg, len, "mode=%s", gds_modes[m]);
    if (threads)
        n += snprintf(cfg + n, len - (size_t)n, ",threads=%u", threads);
    if (block)
        n += snprintf(cfg + n, len - (size_t)n, ",io_block_size=%zu", block);
    if (opt.config)
        snprintf(cfg + n, len - (size_t)n, ",%s", opt.config);
}

/* Untimed writes with every GDS setting of the run before the first timed
 * one: each engine worker pins its staging ring on first use (up to a second
 * for sixteen rings of 32 MiB pieces), and rings only grow, so without this
 * the first point measured pays for all the others. Each write is large
 * enough for every worker of its setting to take a block. */
void warm_up_gds(buffers_t *b)
{
    if (!is_gpu_memory(b->memory))
        return;
    int nt = opt.nthreads ? opt.nthreads : 1, nb = opt.nblocks ? opt.nblocks : 1;
    for (int m = M_GDS; m < N_METHODS; m++) {
        if (!opt.methods[m] || !uses_gds((method_t)m) || is_shared((method_t)m))
            continue; /* (the shared-file methods' collective opens are not warmed up) */
        for (int ti = 0; ti < nt; ti++)
            for (int bi = 0; bi < nb; bi++) {
                unsigned threads = opt.nthreads ? opt.threads[ti] : 0;
                size_t block = opt.nblocks ? opt.blocks[bi] : 0;
                char cfg[256];
                method_config((method_t)m, threads, block, cfg, sizeof cfg);
                H5FD_gds_config_t c;
                H5FD_gds_config_init(&c);
                H5FD_gds_config_parse(&c, cfg);
                size_t per_worker = c.io_block_size ? c.io_block_size : 32 << 20;
                size_t want = (size_t)(c.threads ? c.threads : 16) * per_worker;
                buffers_t part = *b;
                part.size = want < b->size ? want : b->size;
                progress("warm-up", part.size, PH_WRITE, 0);
                timed_write((method_t)m, &part, par.on ? files[2] : files[0], cfg);
                /* The first GPU decode compiles its kernels and loads nvCOMP: not in a
                 * timed read either. (The data buffer gets the bytes it held.) */
                if (opt.filter)
                    timed_read((method_t)m, &part, files[0], cfg);
            }
    }
}

void bench_method(method_t m, buffers_t *b, size_t size, unsigned threads, size_t block, int rep)
{
    char cfg[256];
    method_config(m, threads, block, cfg, sizeof cfg);
    unsigned t_col = threads;
    size_t b_col = block;
    if (uses_gds(m) && (!threads || !block)) {
        H5FD_gds_config_t c;
        H5FD_gds_config_init(&c);
        H5FD_gds_config_parse(&c, cfg);
        t_col = c.threads;
        b_col = c.io_block_size;
    }
    else if (!uses_gds(m)) {
        t_col = 1;
        b_col = 0;
    }
    /* the file whose bytes this process wrote */
    const char *path = is_shared(m) ? files[3] : par.on ? files[2] : files[0];
    /* Without the write phase, the file is still written once by each
     * setting before its reads (it may have been written by another). */
    static char last_writer[400];
    /* --filter: each row of the file's writer and readers has the file's ratio */
    static filter_note_t written;
    filter_note_t *note = opt.filter ? &written : NULL;
    char writer[400];
    snprintf(writer, sizeof writer, "%s|%s|%zu|%u|%zu", method_names[m], cfg, size, threads, block);
    if (opt.phases[PH_WRITE] || strcmp(writer, last_writer) != 0) {
        snprintf(last_writer, sizeof last_writer, "%s", writer);
        progress(method_names[m], size, PH_WRITE, rep);
        double t = bench_write(m, b, cfg);
        if (opt.filter)
            written = (filter_note_t){file_ratio(path, size), last_io_route};
        if (opt.phases[PH_WRITE])
            record(method_names[m], PH_WRITE, b->memory, size, t_col, b_col, rep, t, cfg, note);
        if (opt.inject_corruption && (!is_shared(m) || par.rank == 0)) /* shared: one byte of rank 0's part */
            corrupt_one_byte(path, size);
        if (is_shared(m))
            par_barrier();
    }
    for (int ph = PH_COLD; ph <= PH_WARM; ph++) {
        if (!opt.phases[ph])
            continue;
        /* poison the buffer so the read must really fill it */
        memset(b->check, 0x5A, size);
        to_data(b, b->check, true);
        if (ph == PH_COLD)
            drop_cache(path);
        else
            warm_cache(path);
        progress(method_names[m], size, ph, rep);
        double t = bench_read(m, b, cfg);
        verify(b, method_names[m], size, ph);
        filter_note_t read_note = {written.ratio, last_io_route};
        record(method_names[m], ph, b->memory, size, t_col, b_col, rep, t, cfg, opt.filter ? &read_note : NULL);
    }
}
