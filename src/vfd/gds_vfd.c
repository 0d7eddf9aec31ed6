/*
 * The `gds` virtual file driver: its class table and the callbacks of an
 * open file (open, close, EOA/EOF, flush, truncate, locks, ctl, delete).
 *
 * Metadata and host buffers behave exactly as with sec2 (open flags, EOA/EOF,
 * zero-filled reads past EOF, truncate, locking, cmp). Every transfer goes
 * to the engine (src/engine), which classifies raw-data buffers and moves
 * GPU memory through cuFile or its staging pipeline. The driver only speaks
 * HDF5: it translates flags, keeps EOA/EOF and reports errors. Its other
 * files (gds_vfd_file.h) hold the registration and access lists, single and
 * vector transfers, and the statistics.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gds_config.h"
#include "gds_filtered.h"
#include "gds_transfer.h"
#include "gds_vfd_file.h"

/* Callbacks of this file, in class-table order. */
static H5FD_t *gds_open(const char *name, unsigned flags, hid_t fapl_id, haddr_t maxaddr);
static herr_t gds_close(H5FD_t *file);

/* Files open with the driver: when the last one closes, the device memory
 * the GPU reads and writes of filtered datasets kept goes back. */
static unsigned open_files;
static int gds_cmp(const H5FD_t *f1, const H5FD_t *f2);
static herr_t gds_query(const H5FD_t *file, unsigned long *flags);
static haddr_t gds_get_eoa(const H5FD_t *file, H5FD_mem_t type);
static herr_t gds_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr);
static haddr_t gds_get_eof(const H5FD_t *file, H5FD_mem_t type);
static herr_t gds_get_handle(H5FD_t *file, hid_t fapl, void **handle);
static herr_t gds_flush(H5FD_t *file, hid_t dxpl, hbool_t closing);
static herr_t gds_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing);
static herr_t gds_lock(H5FD_t *file, hbool_t rw);
static herr_t gds_unlock(H5FD_t *file);
#if H5GDS_HAVE_VFD_PLUGINS
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
    .terminate = gds_vfd_term,
    .fapl_size = sizeof(H5FD_gds_config_t),
    .fapl_get = gds_vfd_fapl_get,
    .fapl_copy = gds_vfd_fapl_copy,
    .fapl_free = gds_vfd_fapl_free,
    .open = gds_open,
    .close = gds_close,
    .cmp = gds_cmp,
    .query = gds_query,
    .get_eoa = gds_get_eoa,
    .set_eoa = gds_set_eoa,
    .get_eof = gds_get_eof,
    .get_handle = gds_get_handle,
    .read = gds_vfd_read,
    .write = gds_vfd_write,
#if H5GDS_HAVE_VFD_PLUGINS
    .read_vector = gds_vfd_read_vector,
    .write_vector = gds_vfd_write_vector,
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
    __atomic_add_fetch(&open_files, 1, __ATOMIC_RELAXED);
    return &file->pub;

fail:
    if (file->fd >= 0)
        close(file->fd);
    free(file->name);
    free(file);
    return NULL;
}

static herr_t gds_close(H5FD_t *_file)
{
    gds_vfd_file_t *file = (gds_vfd_file_t *)_file;
    if (file->config.stats || gds_env_flag("H5GDS_STATS"))
        gds_vfd_print_stats(file);
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
    if (__atomic_sub_fetch(&open_files, 1, __ATOMIC_RELAXED) == 0)
        gds_filtered_release_device_memory();
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
     * bytes that were taken (window, write-behind, held writes) but never landed, so it
     * is asked of the file system. (Before this, a background write failing
     * after the last H5Dwrite had returned left eof == eoa, the extension
     * was skipped and the file stayed short: unopenable.) */
    if (lost || file->held_lost) {
        file->held_lost = false;
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
    if (file->eoa < file->eof) /* the blocks past the new end were freed: no longer claimed */
        gds_file_truncated(file->engine, (uint64_t)file->eoa);
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
