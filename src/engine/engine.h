/*
 * The I/O engine: moves bytes between a buffer (host or GPU) and a file.
 *
 * It knows nothing of HDF5: this header has its own types, and the HDF5
 * glue (src/vfd) translates its configuration and statistics. A file handle
 * (gds_file_t) takes requests: a list of (file offset, length, buffer)
 * segments. The engine classifies each buffer and picks a strategy:
 *
 *   host memory   -> host path (pread/pwrite, large cached reads split over the pool)
 *   device memory -> cuFile (cufile_path.c) when usable, else the staged path
 *                    (pinned ring + O_DIRECT, pipelined over the pool), or
 *                    the single bounce buffer of mode=posix.
 *
 * Requests are synchronous (gds_file_transfer) or asynchronous
 * (gds_file_submit returns a ticket; gds_io_wait collects it). Any thread
 * may use any file; several requests may be in flight at once.
 *
 * Failures are reported through gds_status_t (message + errno), never printed.
 */
#ifndef H5GDS_ENGINE_H
#define H5GDS_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* ---- settings ---- */

typedef enum gds_mode {
    GDS_MODE_AUTO = 0, /* cuFile when nvidia-fs is loaded and the file registers, else staged */
    GDS_MODE_CUFILE,   /* cuFile (compatibility mode too); staged when it cannot be used */
    GDS_MODE_STAGED,   /* the pinned-ring pipeline */
    GDS_MODE_POSIX     /* one bounce buffer, one thread */
} gds_mode_t;

typedef enum gds_switch { GDS_OFF = 0, GDS_ON = 1, GDS_AUTO = 2 } gds_switch_t;

typedef struct gds_engine_settings {
    gds_mode_t mode;
    unsigned threads;     /* 0: auto (tuned for device data; host data: cores, 4..16) */
    size_t io_block_size; /* 0: auto (tuned for device data; host data: 32 MiB) */
    size_t alignment;
    size_t fs_block_size;
    gds_switch_t direct;
    size_t staging_size;
    unsigned staging_count;
    size_t parallel_threshold;
    bool log;
    bool register_buffers; /* cuFile path: cuFileBufRegister each allocation once */
    size_t write_behind;   /* bytes of snapshot memory for write-behind; 0: off (write_behind.h) */
    int write_behind_memory; /* gds_wb_memory_t */
} gds_engine_settings_t;

/* Where write-behind keeps its snapshots. */
typedef enum gds_wb_memory {
    GDS_WB_AUTO = 0, /* device memory when the first snapshot is of device data and it can be had, else host */
    GDS_WB_DEVICE,   /* the same (device where possible) */
    GDS_WB_HOST      /* pinned host memory */
} gds_wb_memory_t;

/* ---- status ---- */

/* An error: what failed, with errno when the OS said why. */
typedef struct gds_status {
    int err; /* errno, or 0 */
    char msg[320];
} gds_status_t;

void gds_status_set(gds_status_t *st, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- settings ---- */

/* Whether the environment flag `name` (H5GDS_STATS, H5GDS_TEST_NO_FALLOCATE...)
 * is on: set, not empty and not "0", the one reading of every such flag
 * above the CUDA loader. */
static inline bool gds_env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* FNV-1a, 64 bits, from GDS_FNV1A_START or a running value: for hashes that
 * need no strength (names the ranks agree on, cache keys and checksums). */
#define GDS_FNV1A_START 0xcbf29ce484222325ULL
static inline uint64_t gds_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* ---- memory kinds ---- */

typedef enum gds_memory {
    GDS_MEMORY_HOST = 0, /* pageable host memory (or no CUDA in the process) */
    GDS_MEMORY_PINNED,   /* page-locked / registered host memory */
    GDS_MEMORY_DEVICE,   /* device memory */
    GDS_MEMORY_MANAGED   /* managed (unified) memory */
} gds_memory_t;

typedef struct gds_buffer_info {
    gds_memory_t kind;
    void *context;         /* CUcontext owning device/managed memory */
    int device;            /* device ordinal */
    uintptr_t range_start; /* start of the allocation (gds_classify_buffer_range only) */
} gds_buffer_info_t;

/* Which memory `ptr` is, asked of the CUDA driver only when the process has
 * loaded it. Returns false when CUDA is loaded but could not say (the kind is
 * then reported as host): callers that would touch the memory with the CPU
 * must not rely on such an answer. Pointers into malloc's brk heap are host
 * memory without asking (pinned memory registered there reads as host: every
 * path treats the two alike). */
bool gds_classify_buffer(const void *ptr, gds_buffer_info_t *info);
/* The same, always asking the driver: host and pinned told apart (the public
 * H5FD_gds_memory_kind). */
bool gds_classify_buffer_exact(const void *ptr, gds_buffer_info_t *info);
/* The same, also filling range_start for device and managed memory. */
bool gds_classify_buffer_range(const void *ptr, gds_buffer_info_t *info);

static inline bool gds_memory_is_host(gds_memory_t kind)
{
    return kind == GDS_MEMORY_HOST || kind == GDS_MEMORY_PINNED;
}

/* ---- routes and statistics ---- */

/* The path raw data took. */
typedef enum gds_route {
    GDS_ROUTE_NONE = 0,
    GDS_ROUTE_HOST,        /* host memory: pread/pwrite */
    GDS_ROUTE_STAGED,      /* device memory through the pinned staging pipeline */
    GDS_ROUTE_CUFILE,      /* device memory through cuFile */
    GDS_ROUTE_POSIX_BOUNCE /* device memory through one bounce buffer (mode=posix) */
} gds_route_t;
#define GDS_NROUTES 5

const char *gds_route_name(gds_route_t route);

/* Counters of one file; updated atomically from any thread. */
typedef struct gds_engine_stats {
    uint64_t read_bytes[GDS_NROUTES];
    uint64_t read_calls[GDS_NROUTES];
    uint64_t write_bytes[GDS_NROUTES];
    uint64_t write_calls[GDS_NROUTES];
    uint64_t read_ns, write_ns;    /* wall time of raw-data requests */
    uint64_t cufile_fallbacks;     /* device requests that wanted cuFile but were staged */
    uint64_t direct_fallbacks;     /* O_DIRECT unusable for this file: buffered I/O used */
    uint64_t buffer_registrations; /* cuFileBufRegister calls this file made */
    uint64_t registration_failures;/* allocations cuFile would not register (remembered, not retried) */
    uint64_t device_path_failures; /* device requests that failed */
    uint64_t wb_snapshots;         /* write-behind: writes taken, bytes, time writers waited for space */
    uint64_t wb_bytes;
    uint64_t wb_waits, wb_wait_ns;
    uint64_t wb_peak_bytes;        /* snapshot bytes in use at most */
    uint64_t wb_arena_bytes;       /* snapshot memory held (the budget, once allocated) */
    uint64_t wb_failures;          /* background writes that failed */
    uint64_t wb_peak_pending;      /* background writes in flight at once, at most */
    uint64_t wb_stream_ordered;    /* snapshots the application's stream waits for (no CPU wait) */
    uint64_t workers_busy;         /* pool workers inside this file's requests now, and at most */
    uint64_t workers_peak;
    uint64_t reserved_bytes;       /* file space reserved (fallocate) before O_DIRECT writes */
    uint64_t device_threads;       /* threads and block of device transfers (tuned or set) */
    uint64_t device_block;
    uint64_t tune_source;          /* gds_tune_source_t (autotune.h) */
    gds_route_t device_route;      /* the path device requests of this file take */
} gds_engine_stats_t;

/* The defaults `auto` means before (or without) tuning. */
unsigned gds_default_threads(void);
#define GDS_DEFAULT_IO_BLOCK ((size_t)32 << 20)

/* ---- files ---- */

typedef struct gds_file gds_file_t;

/* Takes over nothing: `fd` stays owned by the caller; the engine may open a
 * second, O_DIRECT descriptor on `path` and owns that one. */
int gds_file_open(gds_file_t **out, const char *path, int fd, bool writable, const gds_engine_settings_t *cfg,
                  gds_status_t *st);
/* Every ticket of the file must have been collected; background writes
 * (write-behind) are waited for here, their failure is lost: call
 * gds_file_drain first to see it. */
void gds_file_close(gds_file_t *file);
void gds_file_get_stats(gds_file_t *file, gds_engine_stats_t *stats);
/* Counts raw data the caller served from its own memory (the driver's sieve
 * window): bytes and calls, no time. */
void gds_file_count_host(gds_file_t *file, bool write, size_t size);

/* ---- requests ---- */

/* Whose buffer a request carries. Only the application's raw data can be in
 * device memory, and only it is counted in the statistics; metadata and the
 * caller's own host buffers (a sieve window) are neither. */
typedef enum gds_data { GDS_DATA_DRIVER, GDS_DATA_RAW } gds_data_t;

/* How device buffers are ordered against the application's GPU work.
 *   LEGACY: after all work queued so far on the legacy default stream (as
 *           cudaMemcpy is); the default.
 *   STREAM: after the work queued so far on `stream` only.
 *   NONE:   the caller guarantees the buffer is ready (its own buffers).
 *   EVENT:  after the CUevent `stream` (write-behind's snapshot copies: the
 *           engine's own; not destroyed by the request).
 * The engine's copies never block the application's streams; a read's data
 * is complete on the device when the request completes. */
typedef enum gds_order { GDS_ORDER_LEGACY = 0, GDS_ORDER_STREAM, GDS_ORDER_NONE, GDS_ORDER_EVENT } gds_order_t;

/* One piece of a request: a file range and the buffer it maps to. */
typedef struct gds_segment {
    uint64_t offset;
    size_t size;
    void *buf;
} gds_segment_t;

typedef struct gds_request {
    bool write;
    gds_data_t data;
    size_t nseg;
    const gds_segment_t *segs; /* copied at submission: may be freed after the call */
    gds_order_t order;
    void *stream;              /* CUstream, with GDS_ORDER_STREAM; CUevent with GDS_ORDER_EVENT */
    /* Optional: the caller already classified each segment's buffer (nseg
     * entries; with gds_classify_buffer_range when nseg > 1, so adjacent
     * pieces of one allocation can be merged). Saves asking CUDA twice. */
    const gds_buffer_info_t *known;
    /* Reads of bytes read once (compressed chunks decoded on the GPU): with
     * direct=auto, device reads go O_DIRECT when most of the request is
     * not in the page cache (three pages inside it asked). Cold batches of
     * chunks read 17-30% faster so than buffered; cached ones stay
     * buffered (the page cache is faster than the disk). */
    bool read_once;
} gds_request_t;

/* Synchronous: returns when every byte has moved (0), or -1 with `st`.
 * Reads past the end of the file are zero-filled, in device memory too. */
int gds_file_transfer(gds_file_t *file, const gds_request_t *req, gds_status_t *st);

/* Asynchronous: starts the request and returns a ticket at once. The
 * buffers must stay valid until the ticket is collected.
 * Ordering of requests in flight at the same time (see ARCHITECTURE.md):
 * none. Two overlapping writes, or a read overlapping a write, may land in
 * either order and may interleave by block; wait for the first before
 * submitting the second when the order matters. Pieces of one request must
 * not overlap each other. */
typedef struct gds_io gds_io_t;
int gds_file_submit(gds_file_t *file, const gds_request_t *req, gds_io_t **io, gds_status_t *st);
/* True once the request has finished (the ticket still needs gds_io_wait). */
bool gds_io_done(gds_io_t *io);
/* Waits for the request, frees the ticket, returns 0 or -1 with `st` (the
 * first failure). Waiting never needs a free pool thread: on a pool thread
 * the waiter works on the request itself. */
int gds_io_wait(gds_io_t *io, gds_status_t *st);

/* The monotonic clock in nanoseconds (the engine's timings, and the
 * layers above it that time their own steps). */
uint64_t gds_now_ns(void);

/* With write-behind: waits for every background write of the file and
 * returns the first failure (kept: every later call fails too). 0 without
 * write-behind. The data is in the file (not yet fsync'ed) when it returns. */
int gds_file_drain(gds_file_t *file, gds_status_t *st);

/* gds_file_drain, then fsync of the file: everything written so far is
 * durable. */
int gds_file_sync(gds_file_t *file, gds_status_t *st);

/* Before a large write of `written` bytes ending at `end`: reserves the
 * file's space up to `upto` (the end of allocation; at least `end`) with
 * fallocate, so that O_DIRECT writes land in allocated blocks inside the
 * file's size. ext4 serialises direct writes that extend the file or fill
 * holes (exclusive inode lock); into reserved blocks they run side by side.
 * Done only while no background write is in flight: fallocate waits for
 * every direct write in progress, and only while the file system has twice
 * the room free. The blocks reserved beyond the write's own are held to
 * max(64 MiB, 8 x `written`), so a sparse file stays about as sparse as
 * sec2 leaves it (less reserved ahead; nothing when the write lies past a
 * larger hole). Best effort (a failure only stops later tries: the write
 * itself reports a full disk). Returns the file size it set, or 0. */
uint64_t gds_file_reserve(gds_file_t *file, uint64_t written, uint64_t end, uint64_t upto);

/* The file's owner cut it to `size` bytes: the space reserved or claimed
 * past it was freed with the cut and is forgotten (later writes there
 * claim it again). */
void gds_file_truncated(gds_file_t *file, uint64_t size);

/* Shorthands: one segment, legacy-stream ordering. */
int gds_file_read(gds_file_t *file, uint64_t offset, size_t size, void *buf, gds_data_t data, gds_status_t *st);
int gds_file_write(gds_file_t *file, uint64_t offset, size_t size, const void *buf, gds_data_t data,
                   gds_status_t *st);

/* Whether the page holding `offset` is in the page cache: 1 yes, 0 no, -1
 * the kernel cannot say (asked with a one-byte read that must not wait; a
 * miss may start the kernel's read-ahead there): for a caller that sizes
 * its requests for memory or for the disk. */
int gds_file_page_cached(gds_file_t *file, uint64_t offset);

/* ---- process-wide ---- */

/* Stops and joins the worker threads, after the jobs in flight have ended,
 * and frees their staging memory; the next request starts them again. The
 * driver calls it when HDF5 terminates it, so no thread runs the library's
 * code after it may be unloaded. */
void gds_engine_shutdown(void);
/* Worker threads running now (tests). */
unsigned gds_engine_threads(void);
/* Pinned staging bytes the workers hold now (tests: nothing leaks). */
size_t gds_engine_pinned_bytes(void);

/* ---- plain POSIX helpers (posix_io.c): full transfers, EINTR and short
 * counts retried, at most 1 GiB per system call. ---- */
/* Reads up to `size`; returns bytes read (< size only at end of file) or -1. */
ssize_t gds_pread_full(int fd, void *buf, size_t size, uint64_t offset);
/* Writes all of `size` bytes or returns -1. */
int gds_pwrite_full(int fd, const void *buf, size_t size, uint64_t offset);

#endif
