/*
 * The `gds` virtual file driver: HDF5's callbacks, in class-table order.
 *
 * Metadata and host buffers behave exactly as with sec2 (open flags, EOA/EOF,
 * zero-filled reads past EOF, truncate, locking, cmp). Every transfer goes
 * to the engine (src/engine), which classifies raw-data buffers and moves
 * GPU memory through cuFile or its staging pipeline. This file only speaks
 * HDF5: it translates flags, keeps EOA/EOF and reports errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "H5FDgds.h"
#include "gds_config.h"
#include "gds_vfd_raw.h"
#include "gds_error.h"
#include "gds_hdf5.h"
#include "gds_sieve.h"
#include "gds_transfer.h"

/* HDF5 addresses are unsigned 64-bit; files are addressed by off_t. */
#define GDS_MAXADDR (((haddr_t)1 << (8 * sizeof(off_t) - 1)) - 1)
#define GDS_ADDR_OVERFLOW(a) ((a) == HADDR_UNDEF || ((a) & ~(haddr_t)GDS_MAXADDR))
#define GDS_REGION_OVERFLOW(a, z) \
    (GDS_ADDR_OVERFLOW(a) || (z) > (size_t)GDS_MAXADDR || (haddr_t)((a) + (z)) < (a) || \
     GDS_ADDR_OVERFLOW((haddr_t)((a) + (z))))

typedef struct gds_vfd_file {
    H5FD_t pub;             /* must be first: HDF5 casts between the two */
    int fd;                 /* buffered descriptor; H5Fget_vfd_handle returns &fd */
    haddr_t eoa;
    haddr_t eof;
    dev_t device;
    ino_t inode;
    bool ignore_disabled_locks;
    H5FD_gds_config_t config;
    bool config_from_info;  /* opened with explicit driver info (not defaults/strings) */
    gds_file_t *engine;
    gds_sieve_t sieve;      /* small host-memory raw data (gds_sieve.h) */
    uint64_t device_memcpys; /* H5FD_CTL_MEM_COPY requests with device memory */
    char *name;
} gds_vfd_file_t;

static hid_t gds_driver_id = H5I_INVALID_HID;

/* An engine failure onto HDF5's error stack: the file, what failed, errno's text. */
#define engine_error(file, minor, st)                                                                      \
    GDS_ERROR(H5E_IO, (minor), "file '%s': %s%s%s", (file)->name, (st)->msg, (st)->err ? ": " : "",          \
              (st)->err ? strerror((st)->err) : "")

/* Callbacks, in class-table order. */
static herr_t gds_term(void);
static void *gds_fapl_get(H5FD_t *file);
static void *gds_fapl_copy(const void *info);
static herr_t gds_fapl_free(void *info);
static H5FD_t *gds_open(const char *name, unsigned flags, hid_t fapl_id, haddr_t maxaddr);
static herr_t gds_close(H5FD_t *file);
static int gds_cmp(const H5FD_t *f1, const H5FD_t *f2);
static herr_t gds_query(const H5FD_t *file, unsigned long *flags);
static haddr_t gds_get_eoa(const H5FD_t *file, H5FD_mem_t type);
static herr_t gds_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr);
static haddr_t gds_get_eof(const H5FD_t *file, H5FD_mem_t type);
static herr_t gds_get_handle(H5FD_t *file, hid_t fapl, void **handle);
static herr_t gds_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf);
static herr_t gds_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf);
static herr_t gds_flush(H5FD_t *file, hid_t dxpl, hbool_t closing);
static herr_t gds_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing);
static herr_t gds_lock(H5FD_t *file, hbool_t rw);
static herr_t gds_unlock(H5FD_t *file);
#if H5GDS_HAVE_VFD_PLUGINS
static herr_t gds_read_vector(H5FD_t *file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                              size_t sizes[], void *bufs[]);
static herr_t gds_write_vector(H5FD_t *file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                               size_t sizes[], const void *bufs[]);
static herr_t gds_delete(const char *name, hid_t fapl);
static herr_t gds_ctl(H5FD_t *file, uint64_t op_code, uint64_t flags, const void *input, void **output);
#endif

const H5FD_class_t H5FD_gds_class = {
#if H5GDS_HAVE_VFD_PLUGINS
    .version = H5FD_CLASS_VERSION,
    .value = H5FD_GDS_VALUE,
#endif
    .name = H5FD_GDS_NAME,
    .maxaddr = GDS_MAXADDR,
    .fc_degree = H5F_CLOSE_WEAK,
    .terminate = gds_term,
    .fapl_size = sizeof(H5FD_gds_config_t),
    .fapl_get = gds_fapl_get,
    .fapl_copy = gds_fapl_copy,
    .fapl_free = gds_fapl_free,
    .open = gds_open,
    .close = gds_close,
    .cmp = gds_cmp,
    .query = gds_query,
    .get_eoa = gds_get_eoa,
    .set_eoa = gds_set_eoa,
    .get_eof = gds_get_eof,
    .get_handle = gds_get_handle,
    .read = gds_read,
    .write = gds_write,
#if H5GDS_HAVE_VFD_PLUGINS
    .read_vector = gds_read_vector,
    .write_vector = gds_write_vector,
#endif
    .flush = gds_flush,
    .truncate = gds_truncate,
    .lock = gds_lock,
    .unlock = gds_unlock,
#if H5GDS_HAVE_VFD_PLUGINS
    .del = gds_delete,
    .ctl = gds_ctl,
#endif
    .fl_map = H5FD_FLMAP_DICHOTOMY,
};

/* ------------------------------------------------------------------------ */

static hid_t driver_init(void)
{
    if (H5Iget_type(gds_driver_id) == H5I_VFL)
        return gds_driver_id;
    hid_t id = H5I_INVALID_HID;
#if H5GDS_HAVE_VFD_PLUGINS
    /* Loaded as a plugin and linked too: share the id HDF5 already has, so
     * that H5Pget_driver() comparisons agree. */
    if (H5FDis_driver_registered_by_value(H5FD_GDS_VALUE) > 0) {
        /* HDF5 has no public "id of a registered driver by value"; a scratch
         * fapl set by value holds it. */
        hid_t scratch = H5Pcreate(H5P_FILE_ACCESS);
        if (scratch >= 0 && H5Pset_driver_by_value(scratch, H5FD_GDS_VALUE, NULL) >= 0)
            id = H5Pget_driver(scratch);
        if (scratch >= 0)
            H5Pclose(scratch);
    }
#endif
    if (id < 0)
        id = H5FDregister(&H5FD_gds_class);
    if (id < 0)
        GDS_ERROR(H5E_VFL, H5E_CANTREGISTER, "cannot register the gds driver");
    gds_driver_id = id;
    return id;
}

hid_t H5FD_gds_init(void)
{
    gds_api_enter();
    hid_t id = driver_init();
    gds_api_leave(id < 0);
    return id;
}

/* HDF5 terminates the driver at H5close, H5FDunregister and before it
 * unloads the plugin: the worker threads stop here (after the work in
 * flight), so none runs the library's code once it may be unmapped. The
 * next request starts them again. */
static herr_t gds_term(void)
{
    gds_driver_id = H5I_INVALID_HID;
    gds_engine_shutdown();
    return 0;
}

static herr_t set_fapl(hid_t fapl_id, const H5FD_gds_config_t *config)
{
    if (H5Pisa_class(fapl_id, H5P_FILE_ACCESS) <= 0) {
        GDS_ERROR(H5E_ARGS, H5E_BADTYPE, "not a file access property list");
        return -1;
    }
    if (gds_config_validate(config) < 0)
        return -1;
    hid_t driver = H5FD_gds_init();
    if (driver < 0)
        return -1;
    if (H5Pset_driver(fapl_id, driver, config) < 0) {
        GDS_ERROR(H5E_PLIST, H5E_CANTSET, "cannot set the gds driver on the file access property list");
        return -1;
    }
    return 0;
}

herr_t H5Pset_fapl_gds_config(hid_t fapl_id, const H5FD_gds_config_t *config)
{
    gds_api_enter();
    return gds_api_leave(set_fapl(fapl_id, config) < 0) ? -1 : 0;
}

herr_t H5Pset_fapl_gds(hid_t fapl_id, size_t alignment, size_t block_size, size_t cbuf_size)
{
    gds_api_enter();
    H5FD_gds_config_t config;
    if (gds_config_init(&config) < 0)
        return gds_api_leave(true) ? -1 : 0;
    if (alignment)
        config.alignment = alignment;
    if (block_size)
        config.fs_block_size = block_size;
    if (cbuf_size)
        config.staging_size = cbuf_size;
    return gds_api_leave(set_fapl(fapl_id, &config) < 0) ? -1 : 0;
}

static herr_t check_gds_fapl(hid_t fapl_id)
{
    hid_t driver = H5FD_gds_init();
    if (driver < 0)
        return -1;
    if (H5Pget_driver(fapl_id) != driver) {
        GDS_ERROR(H5E_PLIST, H5E_BADVALUE, "the file access property list does not use the gds driver");
        return -1;
    }
    return 0;
}

herr_t H5Pget_fapl_gds_config(hid_t fapl_id, H5FD_gds_config_t *config)
{
    gds_api_enter();
    if (!config) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "configuration pointer is NULL");
        return gds_api_leave(true) ? -1 : 0;
    }
    bool failed = check_gds_fapl(fapl_id) < 0 || gds_config_from_fapl(fapl_id, config, NULL) < 0;
    return gds_api_leave(failed) ? -1 : 0;
}

herr_t H5Pget_fapl_gds(hid_t fapl_id, size_t *alignment, size_t *block_size, size_t *cbuf_size)
{
    H5FD_gds_config_t config;
    if (H5Pget_fapl_gds_config(fapl_id, &config) < 0) /* a public call: it reports */
        return -1;
    if (alignment)
        *alignment = config.alignment;
    if (block_size)
        *block_size = config.fs_block_size;
    if (cbuf_size)
        *cbuf_size = config.staging_size;
    return 0;
}

static void *gds_fapl_get(H5FD_t *_file)
{
    const gds_vfd_file_t *file = (const gds_vfd_file_t *)_file;
    /* A file opened without driver info (HDF5_DRIVER, H5Pset_driver_by_name)
     * reports none either, so its access list equals the one it was opened
     * with (HDF5's vol test checks this); the configuration string is
     * carried along by HDF5 itself. */
    if (!file->config_from_info)
        return NULL;
    return gds_fapl_copy(&file->config);
}

static void *gds_fapl_copy(const void *info)
{
    H5FD_gds_config_t *copy = malloc(sizeof *copy);
    if (!copy) {
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory copying the gds configuration");
        return NULL;
    }
    *copy = *(const H5FD_gds_config_t *)info;
    return copy;
}

static herr_t gds_fapl_free(void *info)
{
    free(info);
    return 0;
}

/* HDF5_USE_FILE_LOCKING=BEST_EFFORT means: lock, but succeed where the file
 * system has no locks. The environment wins over the property list, as in HDF5. */
static bool ignore_disabled_locks(hid_t fapl_id)
{
    const char *env = getenv("HDF5_USE_FILE_LOCKING");
    if (env && !strcmp(env, "BEST_EFFORT"))
        return true;
    if (env && (!strcmp(env, "TRUE") || !strcmp(env, "1")))
        return false;
    hbool_t use = 1, ignore = 0;
    if (H5Pget_file_locking(fapl_id, &use, &ignore) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return false;
    }
    return ignore != 0;
}

static H5FD_t *gds_open(const char *name, unsigned flags, hid_t fapl_id, haddr_t maxaddr)
{
    if (!name || !*name) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "invalid file name");
        return NULL;
    }
    if (maxaddr == 0 || GDS_ADDR_OVERFLOW(maxaddr)) {
        GDS_ERROR(H5E_ARGS, H5E_OVERFLOW, "bogus maxaddr");
        return NULL;
    }
    gds_vfd_file_t *file = calloc(1, sizeof *file);
    if (!file) {
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory opening %s", name);
        return NULL;
    }
    file->fd = -1;
    if (gds_config_from_fapl(fapl_id, &file->config, &file->config_from_info) < 0)
        goto fail;

    int o_flags = (flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY;
    if (flags & H5F_ACC_TRUNC)
        o_flags |= O_TRUNC;
    if (flags & H5F_ACC_CREAT)
        o_flags |= O_CREAT;
    if (flags & H5F_ACC_EXCL)
        o_flags |= O_EXCL;
    file->fd = open(name, o_flags | O_CLOEXEC, 0666);
    if (file->fd < 0) {
        GDS_ERROR(H5E_FILE, H5E_CANTOPENFILE, "unable to open file: name = '%s', errno = %d, error message = '%s', "
                  "flags = %x, o_flags = %x", name, errno, strerror(errno), flags, (unsigned)o_flags);
        goto fail;
    }
    struct stat sb;
    if (fstat(file->fd, &sb) < 0) {
        GDS_ERROR(H5E_FILE, H5E_BADFILE, "unable to fstat file '%s': %s", name, strerror(errno));
        goto fail;
    }
    file->eof = (haddr_t)sb.st_size;
    file->device = sb.st_dev;
    file->inode = sb.st_ino;
    file->ignore_disabled_locks = ignore_disabled_locks(fapl_id);
    if (!(file->name = strdup(name))) {
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory opening %s", name);
        goto fail;
    }

    /* The sieve buffer size HDF5 would use for sec2 (H5Pset_sieve_buf_size; 0 turns it off).
     * Not for SWMR: a reader must see the writer's chunks as they change,
     * and HDF5 never sieves chunked data, the only layout SWMR allows. */
    size_t sieve_size = 0;
    if (H5Pget_sieve_buf_size(fapl_id, &sieve_size) < 0)
        goto fail;
    if (flags & (H5F_ACC_SWMR_READ | H5F_ACC_SWMR_WRITE))
        sieve_size = 0;
    gds_sieve_init(&file->sieve, sieve_size, (flags & H5F_ACC_RDWR) != 0, file->fd);

    gds_engine_settings_t settings;
    gds_status_t st;
    char rounded[512];
    gds_config_to_engine(&file->config, &settings, rounded, sizeof rounded);
    if (file->config.log && rounded[0])
        fprintf(stderr, "h5gds: %s: %s\n", name, rounded);
    if (gds_file_open(&file->engine, name, file->fd, (flags & H5F_ACC_RDWR) != 0, &settings, &st) < 0) {
        GDS_ERROR(H5E_FILE, H5E_CANTOPENFILE, "%s", st.msg);
        goto fail;
    }
    return &file->pub;

fail:
    if (file->fd >= 0)
        close(file->fd);
    free(file->name);
    free(file);
    return NULL;
}

static void file_stats(const gds_vfd_file_t *file, H5FD_gds_stats_t *stats)
{
    gds_engine_stats_t es;
    gds_file_get_stats(file->engine, &es);
    gds_stats_to_public(&es, stats);
    stats->device_memcpys = __atomic_load_n(&file->device_memcpys, __ATOMIC_RELAXED);
}

static void print_stats(const gds_vfd_file_t *file)
{
    H5FD_gds_stats_t s;
    file_stats(file, &s);
    fprintf(stderr,
            "h5gds stats: %s: device route %s, cufile fallbacks %llu, O_DIRECT fallbacks %llu, "
            "buffer registrations %llu\n",
            file->name, H5FD_gds_route_name(s.device_route), (unsigned long long)s.cufile_fallbacks,
            (unsigned long long)s.direct_fallbacks, (unsigned long long)s.buffer_registrations);
    for (int r = 0; r < H5FD_GDS_NROUTES; r++) {
        if (!s.read_calls[r] && !s.write_calls[r])
            continue;
        fprintf(stderr, "h5gds stats:   %-12s read %llu bytes in %llu calls, wrote %llu bytes in %llu calls\n",
                H5FD_gds_route_name((H5FD_gds_route_t)r), (unsigned long long)s.read_bytes[r],
                (unsigned long long)s.read_calls[r], (unsigned long long)s.write_bytes[r],
                (unsigned long long)s.write_calls[r]);
    }
    fprintf(stderr, "h5gds stats:   raw data time: read %.6f s, write %.6f s\n", s.read_seconds, s.write_seconds);
}

static herr_t gds_close(H5FD_t *_file)
{
    gds_vfd_file_t *file = (gds_vfd_file_t *)_file;
    const char *env = getenv("H5GDS_STATS");
    if (file->config.stats || (env && *env && strcmp(env, "0") != 0))
        print_stats(file);
    herr_t ret = 0;
    gds_status_t st;
    if (gds_sieve_flush(&file->sieve, file->engine, &st) < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        ret = -1;
    }
    /* write-behind: every background write lands (or the close fails) */
    if (gds_file_drain(file->engine, &st) < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        ret = -1;
    }
    gds_sieve_free(&file->sieve);
    gds_file_close(file->engine);
    if (close(file->fd) < 0) {
        GDS_ERROR(H5E_IO, H5E_CANTCLOSEFILE, "unable to close file '%s': %s", file->name, strerror(errno));
        ret = -1;
    }
    free(file->name);
    free(file);
    return ret;
}

static int gds_cmp(const H5FD_t *_f1, const H5FD_t *_f2)
{
    const gds_vfd_file_t *f1 = (const gds_vfd_file_t *)_f1, *f2 = (const gds_vfd_file_t *)_f2;
    if (f1->device != f2->device)
        return f1->device < f2->device ? -1 : 1;
    if (f1->inode != f2->inode)
        return f1->inode < f2->inode ? -1 : 1;
    return 0;
}

static herr_t gds_query(const H5FD_t *file, unsigned long *flags)
{
    (void)file;
    /* As sec2, except H5FD_FEAT_DATA_SIEVE: with data sieving HDF5 would
     * copy raw data between its sieve buffer and the user's buffer with the
     * CPU, which must never happen to GPU memory. */
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_AGGREGATE_SMALLDATA |
             H5FD_FEAT_POSIX_COMPAT_HANDLE | H5FD_FEAT_SUPPORTS_SWMR_IO;
#ifdef H5FD_FEAT_DEFAULT_VFD_COMPATIBLE
    *flags |= H5FD_FEAT_DEFAULT_VFD_COMPATIBLE;
#endif
#if H5GDS_HAVE_VFD_PLUGINS
    /* HDF5 asks the driver (ctl H5FD_CTL_MEM_COPY) to copy between a
     * compact dataset's buffer and the user's, which may be device memory. */
    *flags |= H5FD_FEAT_MEMMANAGE;
#endif
    return 0;
}

static haddr_t gds_get_eoa(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const gds_vfd_file_t *)file)->eoa;
}

static herr_t gds_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr)
{
    (void)type;
    ((gds_vfd_file_t *)file)->eoa = addr;
    return 0;
}

static haddr_t gds_get_eof(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const gds_vfd_file_t *)file)->eof;
}

static herr_t gds_get_handle(H5FD_t *_file, hid_t fapl, void **handle)
{
    (void)fapl;
    if (!handle) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "file handle not valid");
        return -1;
    }
    *handle = &((gds_vfd_file_t *)_file)->fd;
    return 0;
}

/* H5Fstart_swmr_write turns SWMR on for an open file, and with it HDF5
 * turns off H5FD_FEAT_ACCUMULATE_METADATA in the driver's feature flags:
 * from then on the sieve window is written out and no longer used. */
static int sieve_off_if_swmr(gds_vfd_file_t *file)
{
    if (!file->sieve.capacity || (file->pub.feature_flags & H5FD_FEAT_ACCUMULATE_METADATA))
        return 0;
    gds_status_t st;
    if (gds_sieve_flush(&file->sieve, file->engine, &st) < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        return -1;
    }
    gds_sieve_free(&file->sieve);
    file->sieve.capacity = 0;
    return 0;
}

/* One request to the engine: the buffer classified by the caller, device
 * buffers ordered as the transfer list asks. */
static int engine_transfer(gds_vfd_file_t *file, bool write, hid_t dxpl, haddr_t addr, size_t size, void *buf,
                           bool raw, const gds_buffer_info_t *info, gds_status_t *st)
{
    gds_segment_t seg = {addr, size, buf};
    gds_request_t req = {.write = write, .data = raw ? GDS_DATA_RAW : GDS_DATA_DRIVER, .nseg = 1, .segs = &seg,
                         .known = raw ? info : NULL};
    if (raw && !gds_memory_is_host(info->kind))
        gds_transfer_order(dxpl, &req);
    return gds_file_transfer(file->engine, &req, st);
}

static herr_t gds_read(H5FD_t *_file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf)
{
    gds_vfd_file_t *file = (gds_vfd_file_t *)_file;
    if (GDS_REGION_OVERFLOW(addr, size)) {
        GDS_ERROR(H5E_ARGS, H5E_OVERFLOW, "addr overflow, addr = %llu, size = %zu", (unsigned long long)addr, size);
        return -1;
    }
    if (sieve_off_if_swmr(file) < 0)
        return -1;
    gds_status_t st;
    int rc;
    bool raw = type == H5FD_MEM_DRAW;
    gds_buffer_info_t info = {GDS_MEMORY_HOST, NULL, -1, 0};
    bool answered = !raw || gds_classify_buffer(buf, &info); /* once, for the sieve and the engine */
    if (raw && gds_sieve_takes(&file->sieve, false, size, answered ? &info : NULL)) {
        rc = gds_sieve_read(&file->sieve, file->engine, file->eoa, addr, size, buf, &st);
    }
    else {
        /* A dirty window overlapping the request reaches the file first. */
        rc = gds_sieve_before_other(&file->sieve, file->engine, addr, size, false, &st);
        if (rc == 0)
            rc = engine_transfer(file, false, dxpl, addr, size, buf, raw, &info, &st);
    }
    if (rc < 0) {
        engine_error(file, H5E_READERROR, &st);
        return -1;
    }
    return 0;
}

/* Whether a small write may wait in the sieve window: only where the file
 * system has room for it (gds_sieve_reserve), and on HDF5 1.10 only where
 * that room could be reserved: there a deferred write that fails at
 * H5Fclose makes the library crash at exit (the failed close leaves a
 * dangling file id), so without fallocate small writes go straight out. */
static bool may_defer(gds_vfd_file_t *file, haddr_t addr, size_t size)
{
    int reserved = gds_sieve_reserve(&file->sieve, addr, size, file->eoa);
#if H5_VERSION_GE(1, 14, 0)
    return reserved >= 0;
#else
    return reserved == 0;
#endif
}

/* Large raw writes: the file's space up to the end of allocation is
 * reserved first (gds_file_reserve), so that the engine's direct writes of
 * this and of the following datasets run side by side. Creating every
 * dataset before writing any (h5gds.save does) makes that one call. */
#define GDS_RESERVE_MIN ((size_t)1 << 20)

static void reserve_ahead(gds_vfd_file_t *file, size_t size, haddr_t end)
{
    if (size < GDS_RESERVE_MIN || end <= file->eof)
        return;
    uint64_t set = gds_file_reserve(file->engine, end, file->eoa);
    if (set > file->eof)
        file->eof = set;
}

static herr_t gds_write(H5FD_t *_file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf)
{
    gds_vfd_file_t *file = (gds_vfd_file_t *)_file;
    if (GDS_REGION_OVERFLOW(addr, size)) {
        GDS_ERROR(H5E_ARGS, H5E_OVERFLOW, "addr overflow, addr = %llu, size = %zu", (unsigned long long)addr, size);
        return -1;
    }
    if (sieve_off_if_swmr(file) < 0)
        return -1;
    gds_status_t st;
    int rc;
    bool raw = type == H5FD_MEM_DRAW;
    gds_buffer_info_t info = {GDS_MEMORY_HOST, NULL, -1, 0};
    bool answered = !raw || gds_classify_buffer(buf, &info);
    if (raw && gds_sieve_takes(&file->sieve, true, size, answered ? &info : NULL) && may_defer(file, addr, size)) {
        rc = gds_sieve_write(&file->sieve, file->engine, addr, size, buf, &st);
    }
    else {
        /* Metadata is written only after the raw data written before it, as
         * with sec2: no reader ever sees metadata pointing at bytes still in
         * the window. If those bytes cannot be written (disk full), the
         * metadata is written all the same: sec2's raw write would already
         * have failed, and its metadata still makes an openable file. The
         * bytes stay dirty; the next flush, truncate or close retries them
         * and fails with the reason. An overlapping window is written out
         * and dropped. */
        if (!raw)
            (void)gds_sieve_flush(&file->sieve, file->engine, &st);
        rc = gds_sieve_before_other(&file->sieve, file->engine, addr, size, true, &st);
        if (rc == 0 && raw)
            reserve_ahead(file, size, addr + size);
        if (rc == 0)
            rc = engine_transfer(file, true, dxpl, addr, size, (void *)buf, raw, &info, &st);
    }
    if (rc < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        return -1;
    }
    if (addr + size > file->eof)
        file->eof = addr + size;
    return 0;
}

static herr_t gds_flush(H5FD_t *_file, hid_t dxpl, hbool_t closing)
{
    (void)dxpl;
    (void)closing;
    gds_vfd_file_t *file = (gds_vfd_file_t *)_file;
    gds_status_t st;
    if (gds_sieve_flush(&file->sieve, file->engine, &st) < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        return -1;
    }
    /* Write-behind: the background writes land, and the flush makes them
     * durable (always: "flushed" means "on disk" once writes return early). */
    if (gds_file_drain(file->engine, &st) < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        return -1;
    }
    if ((file->config.fsync_on_flush || file->config.write_behind) && fsync(file->fd) < 0) {
        GDS_ERROR(H5E_IO, H5E_WRITEERROR, "fsync of '%s' failed: %s", file->name, strerror(errno));
        return -1;
    }
    return 0;
}

static herr_t gds_truncate(H5FD_t *_file, hid_t dxpl, hbool_t closing)
{
    (void)dxpl;
    (void)closing;
    gds_vfd_file_t *file = (gds_vfd_file_t *)_file;
    /* The window's bytes past the end of allocation are past the end of the
     * file (they must not come back if it grows again); the rest reaches the
     * file before its size is set. */
    herr_t ret = 0;
    gds_status_t st;
    gds_sieve_cut(&file->sieve, file->eoa);
    /* write-behind's background writes land first (their failure is
     * reported here too; the size is still set below) */
    bool lost = false;
    if (gds_file_drain(file->engine, &st) < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        ret = -1;
        lost = true;
    }
    if (gds_sieve_flush(&file->sieve, file->engine, &st) < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        ret = -1;
        lost = true;
    }
    /* After a failure the size is still set: a file shorter than the end of
     * allocation HDF5 recorded cannot be opened at all, where sec2 leaves one
     * that opens without the bytes that did not fit. The end of file counted
     * bytes that were taken (window, write-behind) but never landed, so it
     * is asked of the file system. (Before this, a background write failing
     * after the last H5Dwrite had returned left eof == eoa, the extension
     * was skipped and the file stayed short: unopenable.) */
    if (lost) {
        struct stat sb;
        if (fstat(file->fd, &sb) == 0)
            file->eof = (haddr_t)sb.st_size;
    }
    if (file->eoa == file->eof)
        return ret;
    while (ftruncate(file->fd, (off_t)file->eoa) < 0) {
        if (errno == EINTR)
            continue;
        GDS_ERROR(H5E_IO, H5E_SEEKERROR, "unable to extend/truncate '%s' to %llu bytes: %s", file->name,
                  (unsigned long long)file->eoa, strerror(errno));
        return -1;
    }
    file->eof = file->eoa;
    return ret;
}

static herr_t gds_lock(H5FD_t *_file, hbool_t rw)
{
    gds_vfd_file_t *file = (gds_vfd_file_t *)_file;
    if (flock(file->fd, (rw ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0) {
        if (file->ignore_disabled_locks && errno == ENOSYS) {
            errno = 0;
            return 0;
        }
        GDS_ERROR(H5E_VFL, H5E_CANTLOCKFILE, "unable to lock file '%s', errno = %d, error message = '%s'",
                  file->name, errno, strerror(errno));
        return -1;
    }
    return 0;
}

static herr_t gds_unlock(H5FD_t *_file)
{
    gds_vfd_file_t *file = (gds_vfd_file_t *)_file;
    if (flock(file->fd, LOCK_UN) < 0) {
        if (file->ignore_disabled_locks && errno == ENOSYS) {
            errno = 0;
            return 0;
        }
        GDS_ERROR(H5E_VFL, H5E_CANTUNLOCKFILE, "unable to unlock file '%s', errno = %d, error message = '%s'",
                  file->name, errno, strerror(errno));
        return -1;
    }
    return 0;
}

#if H5GDS_HAVE_VFD_PLUGINS
typedef struct extent {
    haddr_t addr;
    size_t size;
} extent_t;

static int cmp_extent(const void *a, const void *b)
{
    haddr_t x = ((const extent_t *)a)->addr, y = ((const extent_t *)b)->addr;
    return x < y ? -1 : x > y;
}

/* Whether any two of the pieces overlap (then a write is done in order). */
static bool pieces_overlap(extent_t *ext, size_t n)
{
    qsort(ext, n, sizeof *ext, cmp_extent);
    for (size_t i = 1; i < n; i++)
        if (ext[i - 1].addr + ext[i - 1].size > ext[i].addr)
            return true;
    return false;
}

/* HDF5's vector I/O (1.14's selection I/O ends here): the pieces of one
 * H5Dread/H5Dwrite, e.g. all its chunks. Raw pieces on device memory go to
 * the engine as one request, so that many chunks keep every worker busy;
 * small host pieces go through the sieve window, as single calls would.
 * Writes that mix in metadata or overlap are done piece by piece, in order. */
static herr_t gds_io_vector(gds_vfd_file_t *file, bool write, hid_t dxpl, uint32_t count, const H5FD_mem_t types[],
                            const haddr_t addrs[], const size_t sizes[], void *const bufs[])
{
    if (count == 0)
        return 0;
    if (sieve_off_if_swmr(file) < 0)
        return -1;
    if (count == 1) /* the common case of small requests: no bookkeeping */
        return write ? gds_write(&file->pub, types[0], dxpl, addrs[0], sizes[0], bufs[0])
                     : gds_read(&file->pub, types[0], dxpl, addrs[0], sizes[0], bufs[0]);
    gds_segment_t *segs = malloc(count * sizeof *segs);
    gds_buffer_info_t *info = malloc(count * sizeof *info);
    extent_t *ext = malloc(count * sizeof *ext);
    H5FD_mem_t *ptype = malloc(count * sizeof *ptype);
    size_t *psize = malloc(count * sizeof *psize);
    if (!segs || !info || !ext || !ptype || !psize) {
        free(segs);
        free(info);
        free(ext);
        free(ptype);
        free(psize);
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a vector of %u pieces", count);
        return -1;
    }
    /* Each piece's type and size: a zero size or an H5FD_MEM_NOLIST type
     * means "as the previous piece" for the rest. */
    bool in_order = false, more_types = true, more_sizes = true;
    for (uint32_t i = 0; i < count; i++) {
        more_types = more_types && types[i] != H5FD_MEM_NOLIST;
        more_sizes = more_sizes && sizes[i] != 0;
        ptype[i] = more_types ? types[i] : ptype[i - 1];
        psize[i] = more_sizes ? sizes[i] : psize[i - 1];
        ext[i] = (extent_t){addrs[i], psize[i]};
        in_order |= write && ptype[i] != H5FD_MEM_DRAW;
    }
    in_order = in_order || (write && pieces_overlap(ext, count));

    herr_t ret = 0;
    size_t nseg = 0;
    gds_status_t st;
    for (uint32_t i = 0; ret == 0 && i < count; i++) {
        H5FD_mem_t type = ptype[i];
        size_t size = psize[i];
        /* Pieces that are not raw data for the engine go the single-call way.
         * Raw pieces are classified once, with their allocation's start so
         * the engine can merge neighbours of one allocation. */
        gds_buffer_info_t *bi = &info[nseg];
        bool answered = in_order || type != H5FD_MEM_DRAW || gds_classify_buffer_range(bufs[i], bi);
        if (in_order || type != H5FD_MEM_DRAW || gds_sieve_takes(&file->sieve, write, size, answered ? bi : NULL)) {
            ret = write ? gds_write(&file->pub, type, dxpl, addrs[i], size, bufs[i])
                        : gds_read(&file->pub, type, dxpl, addrs[i], size, bufs[i]);
            continue;
        }
        if (GDS_REGION_OVERFLOW(addrs[i], size)) {
            GDS_ERROR(H5E_ARGS, H5E_OVERFLOW, "addr overflow, addr = %llu, size = %zu", (unsigned long long)addrs[i],
                      size);
            ret = -1;
            break;
        }
        if (gds_sieve_before_other(&file->sieve, file->engine, addrs[i], size, write, &st) < 0) {
            engine_error(file, write ? H5E_WRITEERROR : H5E_READERROR, &st);
            ret = -1;
            break;
        }
        segs[nseg++] = (gds_segment_t){addrs[i], size, bufs[i]};
    }
    if (ret == 0 && nseg && write) {
        haddr_t end = 0;
        size_t total = 0;
        for (size_t k = 0; k < nseg; k++) {
            end = segs[k].offset + segs[k].size > end ? segs[k].offset + segs[k].size : end;
            total += segs[k].size;
        }
        reserve_ahead(file, total, end);
    }
    if (ret == 0 && nseg) {
        gds_request_t req = {.write = write, .data = GDS_DATA_RAW, .nseg = nseg, .segs = segs, .known = info};
        gds_transfer_order(dxpl, &req);
        int rc = gds_file_transfer(file->engine, &req, &st);
        if (rc < 0) {
            engine_error(file, write ? H5E_WRITEERROR : H5E_READERROR, &st);
            ret = -1;
        }
        for (size_t k = 0; rc == 0 && write && k < nseg; k++)
            if (segs[k].offset + segs[k].size > file->eof)
                file->eof = segs[k].offset + segs[k].size;
    }
    free(segs);
    free(info);
    free(ext);
    free(ptype);
    free(psize);
    return ret;
}

static herr_t gds_read_vector(H5FD_t *file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                              size_t sizes[], void *bufs[])
{
    return gds_io_vector((gds_vfd_file_t *)file, false, dxpl, count, types, addrs, sizes, bufs);
}

static herr_t gds_write_vector(H5FD_t *file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                               size_t sizes[], const void *bufs[])
{
    /* The engine never writes through the buffers; the cast only shares the code. */
    return gds_io_vector((gds_vfd_file_t *)file, true, dxpl, count, types, addrs, sizes, (void *const *)bufs);
}

/* HDF5's requests to the driver. Only H5FD_CTL_MEM_COPY is ours (with
 * H5FD_FEAT_MEMMANAGE, HDF5 sends it for compact datasets, whose buffer may
 * be device memory); other opcodes are answered as HDF5 expects of a
 * driver that does not know them. */
static herr_t gds_ctl(H5FD_t *_file, uint64_t op_code, uint64_t flags, const void *input, void **output)
{
    (void)output;
    gds_vfd_file_t *file = (gds_vfd_file_t *)_file;
    if (op_code == H5FD_CTL_MEM_COPY) {
        const H5FD_ctl_memcpy_args_t *a = input;
        if (!a || !a->dstbuf || !a->srcbuf) {
            GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "memory copy request without buffers");
            return -1;
        }
        bool device = false;
        if (gds_mem_copy((char *)a->dstbuf + a->dst_off, (const char *)a->srcbuf + a->src_off, a->len, &device) < 0)
            return -1;
        if (device)
            __atomic_add_fetch(&file->device_memcpys, 1, __ATOMIC_RELAXED);
        return 0;
    }
    if (flags & H5FD_CTL_FAIL_IF_UNKNOWN_FLAG) {
        GDS_ERROR(H5E_VFL, H5E_FCNTL, "the gds driver does not support ctl opcode %llu", (unsigned long long)op_code);
        return -1;
    }
    return 0;
}

static herr_t gds_delete(const char *name, hid_t fapl)
{
    (void)fapl;
    if (remove(name) < 0) {
        GDS_ERROR(H5E_VFL, H5E_CANTDELETEFILE, "unable to delete file '%s': %s", name, strerror(errno));
        return -1;
    }
    return 0;
}
#endif

/* ---- statistics ---- */

/* The driver's own struct behind an HDF5 file id (NULL with an error pushed). */
static gds_vfd_file_t *vfd_file_of(hid_t file_id)
{
    hid_t fapl = H5Fget_access_plist(file_id);
    if (fapl < 0) {
        GDS_ERROR(H5E_ARGS, H5E_BADTYPE, "not an open file");
        return NULL;
    }
    hid_t driver = H5FD_gds_init();
    bool is_gds = driver >= 0 && H5Pget_driver(fapl) == driver;
    void *handle = NULL;
    herr_t got = is_gds ? H5Fget_vfd_handle(file_id, fapl, &handle) : -1;
    /* Close before pushing: every HDF5 API call clears the error stack. */
    H5Pclose(fapl);
    if (!is_gds) {
        GDS_ERROR(H5E_FILE, H5E_BADVALUE, "the file does not use the gds driver");
        return NULL;
    }
    if (got < 0 || !handle) {
        GDS_ERROR(H5E_FILE, H5E_CANTGET, "cannot get the driver handle of the file");
        return NULL;
    }
    /* get_handle hands out &fd of our own file struct. */
    return (gds_vfd_file_t *)((char *)handle - offsetof(gds_vfd_file_t, fd));
}

static herr_t get_stats(hid_t file_id, H5FD_gds_stats_t *stats)
{
    if (!stats) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "stats pointer is NULL");
        return -1;
    }
    const gds_vfd_file_t *file = vfd_file_of(file_id);
    if (!file)
        return -1;
    file_stats(file, stats);
    return 0;
}

herr_t H5FD_gds_get_stats(hid_t file_id, H5FD_gds_stats_t *stats)
{
    gds_api_enter();
    return gds_api_leave(get_stats(file_id, stats) < 0) ? -1 : 0;
}

gds_file_t *gds_vfd_engine_of(hid_t file_id)
{
    gds_vfd_file_t *file = vfd_file_of(file_id);
    return file ? file->engine : NULL;
}

int gds_vfd_submit_raw_read(hid_t file_id, const gds_segment_t *segs, size_t nseg, gds_io_t **io, gds_status_t *st)
{
    gds_vfd_file_t *file = vfd_file_of(file_id);
    if (!file) {
        gds_status_set(st, 0, "not a file of the gds driver");
        return -1;
    }
    /* The window's dirty bytes overlapping a range reach the file first
     * (write-behind's overlapping writes are waited for by the engine). */
    for (size_t i = 0; i < nseg; i++)
        if (gds_sieve_before_other(&file->sieve, file->engine, segs[i].offset, segs[i].size, false, st) < 0)
            return -1;
    gds_request_t req = {.write = false, .data = GDS_DATA_RAW, .nseg = nseg, .segs = segs, .order = GDS_ORDER_NONE};
    return gds_file_submit(file->engine, &req, io, st);
}

static herr_t sync_file(hid_t file_id)
{
    gds_vfd_file_t *file = vfd_file_of(file_id);
    if (!file)
        return -1;
    gds_status_t st;
    /* the sieve window is raw data written before: it goes first */
    if (gds_sieve_flush(&file->sieve, file->engine, &st) < 0 || gds_file_sync(file->engine, &st) < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        return -1;
    }
    return 0;
}

herr_t H5FD_gds_sync(hid_t file_id)
{
    gds_api_enter();
    return gds_api_leave(sync_file(file_id) < 0) ? -1 : 0;
}
