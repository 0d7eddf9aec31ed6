/*
 * h5gds: the `gds` HDF5 virtual file driver.
 *
 * Moves raw dataset bytes between GPU (or host) memory and a POSIX file:
 * through NVIDIA cuFile where GPUDirect Storage works, otherwise through a
 * pipelined staging engine (pinned buffers, worker threads, O_DIRECT).
 * Metadata and host buffers behave exactly as with HDF5's sec2 driver.
 *
 * Everything public is in this header. Works with HDF5 1.10 and 1.14+.
 */
#ifndef H5FDgds_H
#define H5FDgds_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define H5GDS_API
#else
#define H5GDS_API __attribute__((visibility("default")))
#endif

/* Registered VFD value of the gds driver (same as the reference hpc-io/vfd-gds). */
#define H5FD_GDS_VALUE 512
#define H5FD_GDS_NAME "gds"
#define H5FD_GDS (H5FD_gds_init())

/* ------------------------------------------------------------------------
 * Configuration
 * --------------------------------------------------------------------- */

#define H5FD_GDS_CONFIG_VERSION 3 /* 2: register_buffers; 3: write_behind */

/* Which data path raw-data requests from GPU memory take. */
typedef enum H5FD_gds_mode_t {
    H5FD_GDS_MODE_AUTO = 0, /* cuFile when true GPUDirect Storage works, else staged */
    H5FD_GDS_MODE_CUFILE,   /* cuFile (also in its compatibility mode); staged if it fails */
    H5FD_GDS_MODE_STAGED,   /* our pinned-buffer pipeline */
    H5FD_GDS_MODE_POSIX     /* one bounce buffer, one thread: the simple baseline */
} H5FD_gds_mode_t;

/* A tri-state switch: off, on, or decided by the driver. */
typedef enum H5FD_gds_switch_t {
    H5FD_GDS_OFF = 0,
    H5FD_GDS_ON = 1,
    H5FD_GDS_SWITCH_AUTO = 2
} H5FD_gds_switch_t;

/* All settings of the driver. Initialise with H5FD_gds_config_init(), which
 * fills the defaults and the H5GDS_CONFIG environment variable, then change
 * what you need. `version` must be H5FD_GDS_CONFIG_VERSION. */
typedef struct H5FD_gds_config_t {
    unsigned version;
    H5FD_gds_mode_t mode;       /* key: mode = auto|cufile|staged|posix */
    unsigned threads;           /* key: threads; I/O worker threads (1..256) */
    size_t io_block_size;       /* key: io_block_size; a large request is cut into blocks of this size */
    size_t alignment;           /* key: alignment; memory alignment of staging buffers (power of two) */
    size_t fs_block_size;       /* key: fs_block_size; file offset/length granularity of O_DIRECT (power of two) */
    H5FD_gds_switch_t direct;   /* key: direct = on|off|auto; O_DIRECT for large transfers */
    size_t staging_size;        /* key: staging_size; bytes of each pinned staging buffer */
    unsigned staging_count;     /* key: staging_count; pinned staging buffers per worker (ring depth) */
    size_t parallel_threshold;  /* key: parallel_threshold; host requests this large use the worker pool */
    int stats;                  /* key: stats = on|off; print per-file statistics at close */
    int log;                    /* key: log = on|off; say which path a file takes and why, on stderr */
    int fsync_on_flush;         /* key: fsync = on|off; H5Fflush also fsyncs the file */
    int register_buffers;       /* key: register = on|off; cuFile path: register each device allocation
                                   with cuFileBufRegister once (cached per allocation) */
    size_t write_behind;        /* key: write_behind = off|<bytes>; raw-data writes return once copied
                                   into snapshot memory of at most this size, and reach the file in the
                                   background; H5Fflush/H5Fclose wait for them and fsync (0: off) */
    int write_behind_memory;    /* key: write_behind_memory = auto|device|host; where snapshots live
                                   (auto: device memory for device data when it can be had) */
} H5FD_gds_config_t;

/* Fills `config` with defaults, then applies H5GDS_CONFIG ("key=value,...").
 * Fails (negative, HDF5 error pushed) when the environment variable is malformed. */
H5GDS_API herr_t H5FD_gds_config_init(H5FD_gds_config_t *config);

/* Applies a "key=value,key=value" string on top of `config`. Sizes accept
 * units (4096, 64KiB, 8MiB, 1GiB, 1MB, 8M). Unknown keys, bad numbers,
 * non-power-of-two alignments and absurd sizes fail with an HDF5 error that
 * names the key and the value; `config` is then left unchanged. */
H5GDS_API herr_t H5FD_gds_config_parse(H5FD_gds_config_t *config, const char *text);

/* Writes the configuration as a string accepted by H5FD_gds_config_parse. */
H5GDS_API herr_t H5FD_gds_config_format(const H5FD_gds_config_t *config, char *buf, size_t size);

/* ------------------------------------------------------------------------
 * File access properties
 * --------------------------------------------------------------------- */

/* Returns the driver id, registering the driver on first use (negative on error). */
H5GDS_API hid_t H5FD_gds_init(void);

/* Reference-compatible: alignment = memory alignment, block_size = file
 * system block size (O_DIRECT granularity), cbuf_size = staging buffer size.
 * A zero argument keeps the default. Other settings: defaults + H5GDS_CONFIG. */
H5GDS_API herr_t H5Pset_fapl_gds(hid_t fapl_id, size_t alignment, size_t block_size, size_t cbuf_size);
H5GDS_API herr_t H5Pget_fapl_gds(hid_t fapl_id, size_t *alignment, size_t *block_size, size_t *cbuf_size);

/* Full configuration. */
H5GDS_API herr_t H5Pset_fapl_gds_config(hid_t fapl_id, const H5FD_gds_config_t *config);
H5GDS_API herr_t H5Pget_fapl_gds_config(hid_t fapl_id, H5FD_gds_config_t *config);

/* ------------------------------------------------------------------------
 * Statistics
 * --------------------------------------------------------------------- */

/* How a request (or a checked dataset call) reached the file. */
typedef enum H5FD_gds_route_t {
    H5FD_GDS_ROUTE_NONE = 0,
    H5FD_GDS_ROUTE_HOST,        /* host memory: pread/pwrite (possibly split over threads) */
    H5FD_GDS_ROUTE_STAGED,      /* device memory through the pinned staging pipeline */
    H5FD_GDS_ROUTE_CUFILE,      /* device memory through cuFile */
    H5FD_GDS_ROUTE_POSIX_BOUNCE,/* device memory through one bounce buffer (mode=posix) */
    H5FD_GDS_ROUTE_PASSTHROUGH, /* checked call: device buffer handed to the driver by HDF5 */
    H5FD_GDS_ROUTE_HOST_STAGED, /* checked call: library staged through pinned host memory (HDF5's CPU filters) */
    H5FD_GDS_ROUTE_GPU_DECODE,  /* checked call: filtered chunks read to the GPU and decoded there (nvCOMP) */
    H5FD_GDS_ROUTE_GPU_ENCODE   /* checked call: whole chunks encoded on the GPU, stored by direct chunk writes */
} H5FD_gds_route_t;

#define H5FD_GDS_NROUTES 9

typedef struct H5FD_gds_stats_t {
    uint64_t read_bytes[H5FD_GDS_NROUTES];
    uint64_t read_calls[H5FD_GDS_NROUTES];
    uint64_t write_bytes[H5FD_GDS_NROUTES];
    uint64_t write_calls[H5FD_GDS_NROUTES];
    double read_seconds;        /* wall time spent in raw-data read callbacks */
    double write_seconds;       /* wall time spent in raw-data write callbacks */
    uint64_t cufile_fallbacks;  /* device requests that wanted cuFile but were staged */
    uint64_t direct_fallbacks;  /* O_DIRECT unusable for this file: buffered I/O used */
    H5FD_gds_route_t device_route; /* the path device requests of this file take */
    uint64_t buffer_registrations; /* register=on: allocations this file registered with cuFileBufRegister */
    uint64_t registration_failures;/* register=on: allocations cuFile refused (remembered, not retried) */
    uint64_t device_path_failures; /* device requests that failed (error returned to HDF5) */
    uint64_t device_memcpys;       /* copies HDF5 asked the driver to make (compact datasets, HDF5 >= 1.14)
                                      with device memory on one side */
    unsigned device_threads;       /* threads and block size of device transfers (tuned when `auto`) */
    size_t device_block_size;
    int tuned;                     /* 0: set by the configuration; 1: measured now; 2: from the tuning
                                      cache; 3: auto, but not measurable (defaults used) */
    uint64_t wb_snapshots;         /* write-behind: writes returned after a snapshot, and their bytes */
    uint64_t wb_bytes;
    uint64_t wb_waits;             /* writes that waited for snapshot memory (back-pressure), and how long */
    double wb_wait_seconds;
    uint64_t wb_peak_bytes;        /* snapshot bytes in use at most (never above the budget) */
    uint64_t wb_memory_bytes;      /* snapshot memory held (at least the budget: an arena kept from an earlier file may be larger) */
    uint64_t wb_failures;          /* background writes that failed */
    uint64_t wb_peak_pending;      /* background writes in flight at once, at most */
    uint64_t wb_stream_ordered;    /* device snapshots returned without a CPU wait: the application's
                                      stream waits for the copy instead */
    uint64_t workers_peak;         /* pool workers busy with this file's requests at once, at most */
    uint64_t reserved_bytes;       /* file space reserved (fallocate) before O_DIRECT and background writes */
} H5FD_gds_stats_t;

/* The driver's process-wide state: worker threads running and pinned
 * staging memory they hold (both 0 after H5close). For diagnostics. */
typedef struct H5FD_gds_engine_info_t {
    unsigned threads;
    size_t pinned_bytes;
} H5FD_gds_engine_info_t;
H5GDS_API herr_t H5FD_gds_get_engine_info(H5FD_gds_engine_info_t *info);

/* Makes the raw data written so far durable: waits for the file's
 * background writes (write-behind) and fsyncs. HDF5's metadata is not
 * flushed (H5Fflush does both). Fails with the reason when a background
 * write failed. */
H5GDS_API herr_t H5FD_gds_sync(hid_t file_id);

/* Statistics of an open file that uses the gds driver. */
H5GDS_API herr_t H5FD_gds_get_stats(hid_t file_id, H5FD_gds_stats_t *stats);
H5GDS_API const char *H5FD_gds_route_name(H5FD_gds_route_t route);

/* ------------------------------------------------------------------------
 * Write-behind snapshot memory, made ready ahead
 *
 * A file with write-behind allocates its snapshot memory (`write_behind`
 * bytes) at its first raw-data write, and the process keeps it for the next
 * such file when the file closes. Allocating gigabytes of device or pinned
 * memory takes a second or more: without preparation the first write of a
 * process's first such file pays it. H5FD_gds_prepare_snapshot_memory
 * allocates it beforehand, as the kept memory the next file takes (a file
 * whose `write_behind` is at most `bytes` and that wants that kind, in the
 * same CUDA context); nothing is allocated when memory that serves is kept
 * already, or held by an open file. A file whose first snapshot comes while
 * a preparation of its kind runs waits for that memory instead of
 * allocating its own.
 * --------------------------------------------------------------------- */

/* Where snapshots live: the values of H5FD_gds_config_t.write_behind_memory. */
typedef enum H5FD_gds_wb_memory_t {
    H5FD_GDS_WB_MEMORY_AUTO = 0, /* device memory for device data when it can be had, else host */
    H5FD_GDS_WB_MEMORY_DEVICE,   /* device memory (a file writing device data takes it) */
    H5FD_GDS_WB_MEMORY_HOST      /* pinned host memory (plain, with every page touched, without CUDA) */
} H5FD_gds_wb_memory_t;

/* Makes `bytes` of snapshot memory ready, in the CUDA context current on
 * the calling thread: DEVICE needs one; HOST is pinned memory when there is
 * one, else plain host memory; AUTO is DEVICE when a context is current and
 * the device has the room, else HOST. Returns when it is allocated. Fails
 * (negative, reason on the HDF5 error stack) for 0 bytes, DEVICE without a
 * current context, and more memory than the device or machine has. */
H5GDS_API herr_t H5FD_gds_prepare_snapshot_memory(size_t bytes, H5FD_gds_wb_memory_t memory);

/* The same on a thread of the library's own: returns once started (the
 * failures that need no allocation are reported here, NULL). Every handle
 * must be given to H5FD_gds_prepare_snapshot_memory_wait exactly once. */
typedef struct H5FD_gds_snapshot_prep_t H5FD_gds_snapshot_prep_t;
H5GDS_API H5FD_gds_snapshot_prep_t *H5FD_gds_prepare_snapshot_memory_start(size_t bytes,
                                                                           H5FD_gds_wb_memory_t memory);
/* Positive once the preparation has ended, 0 while it runs (negative: no handle). */
H5GDS_API htri_t H5FD_gds_prepare_snapshot_memory_done(H5FD_gds_snapshot_prep_t *prep);
/* Waits for the end, frees the handle; negative with the reason on the
 * HDF5 error stack when the memory could not be allocated. */
H5GDS_API herr_t H5FD_gds_prepare_snapshot_memory_wait(H5FD_gds_snapshot_prep_t *prep);

/* Frees the snapshot memory kept for the next file (after any preparation
 * in progress has ended). Memory of open files is kept again when they close. */
H5GDS_API herr_t H5FD_gds_release_snapshot_memory(void);

/* The process's snapshot memory. */
typedef struct H5FD_gds_snapshot_memory_info_t {
    size_t ready_device_bytes; /* kept device memory the next file can take (0: none) */
    size_t ready_host_bytes;   /* kept host memory */
    int ready_host_pinned;     /* that host memory is pinned */
    size_t open_bytes;         /* held by open files (kept when they close) */
    unsigned preparing;        /* preparations in progress */
    uint64_t files_ready;      /* files that found their snapshot memory ready (kept or prepared) */
    uint64_t files_allocated;  /* files that allocated it at their first snapshot */
    uint64_t prepared;         /* allocations made by preparations */
} H5FD_gds_snapshot_memory_info_t;
H5GDS_API herr_t H5FD_gds_get_snapshot_memory_info(H5FD_gds_snapshot_memory_info_t *info);

/* ------------------------------------------------------------------------
 * Datasets and GPU buffers
 *
 * HDF5 hands the application's buffer to the driver only when it has no
 * reason to touch it: same memory and file type, no data transform, no
 * filters, no fill value to write, chunks that bypass the chunk cache,
 * contiguous data (the gds driver disables data sieving). The helpers below
 * produce properties that guarantee this; the checked calls verify it and
 * stage through pinned host memory themselves when it does not hold.
 * --------------------------------------------------------------------- */

/* Makes a dataset creation property list suitable for GPU buffers:
 * fill time never, early allocation. Returns the dcpl (or negative). */
H5GDS_API hid_t H5FD_gds_create_dcpl(void);
/* Adjusts an existing dcpl the same way. */
H5GDS_API herr_t H5FD_gds_prepare_dcpl(hid_t dcpl_id);
/* Makes a dataset access property list with the chunk cache off, so chunks
 * go straight between the file and the user's buffer. */
H5GDS_API hid_t H5FD_gds_create_dapl(void);

/* H5Dwrite/H5Dread with the same arguments, safe for any buffer: host
 * memory goes straight to H5Dwrite/H5Dread; device memory is handed to
 * HDF5 when the dataset, types and transfer properties allow pass-through,
 * otherwise it is staged through pinned host memory by the library. */
H5GDS_API herr_t H5Dwrite_gds(hid_t dset_id, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id,
                              hid_t dxpl_id, const void *buf);
H5GDS_API herr_t H5Dread_gds(hid_t dset_id, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id,
                             hid_t dxpl_id, void *buf);
/* The route the calling thread's last H5Dwrite_gds/H5Dread_gds took. */
H5GDS_API H5FD_gds_route_t H5FD_gds_last_route(void);

/* What the calling thread's last H5Dread_gds that decoded on the GPU
 * (route H5FD_GDS_ROUTE_GPU_DECODE) did: chunks and bytes, the seconds it
 * waited for stored bytes still being read, and the seconds its decode
 * batches (nvCOMP and the filters' kernels, then the placing copies) took. */
typedef struct H5FD_gds_decode_stats_t {
    uint64_t chunks;        /* chunks decoded (never-written ones not counted) */
    uint64_t stored_bytes;  /* bytes read from the file */
    uint64_t decoded_bytes; /* bytes the chunks decoded to */
    double read_wait_s;     /* waiting for stored bytes not yet read */
    double decode_s;        /* decoding and placing */
    double total_s;
    uint64_t hdf5_chunks;   /* of `chunks`, those the GPU refused and HDF5's own filters read instead (a
                               Deflate chunk with bytes after its stream, a Blosc chunk of a compressor
                               nvCOMP lacks: docs/compression.md, "Bad input") */
} H5FD_gds_decode_stats_t;
H5GDS_API herr_t H5FD_gds_last_decode_stats(H5FD_gds_decode_stats_t *stats);

/* What the calling thread's last H5Dwrite_gds that encoded on the GPU
 * (route H5FD_GDS_ROUTE_GPU_ENCODE) did: chunks and bytes, the seconds its
 * encode batches took (gathering, nvCOMP and the filters' kernels), and the
 * seconds it waited for stored bytes still being written. Later batches
 * are encoded while earlier ones are written (not with a thread-safe
 * libhdf5: there each chunk is written as it is stored). */
typedef struct H5FD_gds_encode_stats_t {
    uint64_t chunks;        /* chunks encoded */
    uint64_t decoded_bytes; /* bytes before encoding */
    uint64_t stored_bytes;  /* bytes stored */
    double encode_s;        /* encoding on the GPU (not the packing copies before the writes) */
    double store_wait_s;    /* waiting for stored bytes still being written */
    double total_s;
} H5FD_gds_encode_stats_t;
H5GDS_API herr_t H5FD_gds_last_encode_stats(H5FD_gds_encode_stats_t *stats);

/* ------------------------------------------------------------------------
 * Stream ordering of device buffers (transfer property list)
 *
 * By default a device buffer is ordered against the legacy default stream,
 * as cudaMemcpy is: the driver's copies start after all GPU work queued
 * there so far (kernels that produce the data written, or still read the
 * buffer about to be filled). A program that queues its work on its own
 * stream says so, and the driver waits for that stream only; one that
 * guarantees the buffer is ready (a loader filling its own buffers) says
 * H5FD_GDS_STREAM_NONE, and the transfer overlaps whatever the GPU runs.
 * A read returns with the data in device memory, ready for any stream.
 * The driver's copies never block the application's streams.
 * --------------------------------------------------------------------- */
#define H5FD_GDS_STREAM_LEGACY ((void *)0)           /* the legacy default stream (the default) */
#define H5FD_GDS_STREAM_NONE ((void *)(intptr_t)-1)  /* no ordering: the caller guarantees it */

/* `stream`: a CUstream, or one of the two values above. `dxpl_id` must be a
 * transfer property list the application created (not H5P_DEFAULT). */
H5GDS_API herr_t H5Pset_dxpl_gds_stream(hid_t dxpl_id, void *stream);
H5GDS_API herr_t H5Pget_dxpl_gds_stream(hid_t dxpl_id, void **stream);

/* Memory kind of a pointer, as the driver classifies it. */
typedef enum H5FD_gds_memory_t {
    H5FD_GDS_MEMORY_HOST = 0,   /* pageable host memory (or no CUDA in the process) */
    H5FD_GDS_MEMORY_PINNED,     /* page-locked/registered host memory */
    H5FD_GDS_MEMORY_DEVICE,     /* cudaMalloc'd device memory */
    H5FD_GDS_MEMORY_MANAGED     /* managed (unified) memory */
} H5FD_gds_memory_t;
H5GDS_API H5FD_gds_memory_t H5FD_gds_memory_kind(const void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* H5FDgds_H */
