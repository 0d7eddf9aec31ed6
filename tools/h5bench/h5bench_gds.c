/* h5gds's additions to h5bench's kernels: h5bench_gds.h says what and why. */
#include "h5bench_gds.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "H5FDgds_mpio.h"
#include "cuda_loader.h" /* the project's CUDA loader: libcuda is dlopen'ed */

static const gds_cuda_api_t *cuda;

static int my_rank(void)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

/* Stops every rank: an h5bench run cannot go on without its buffers. */
static void stop(const char *fmt, const char *detail)
{
    fprintf(stderr, "h5bench (h5gds), rank %d: ", my_rank());
    fprintf(stderr, fmt, detail ? detail : "");
    fprintf(stderr, "\n");
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static bool env_is(const char *name, const char *value, const char *fallback)
{
    const char *v = getenv(name);
    return !strcmp(v && *v ? v : fallback, value);
}

static bool use_device(void)
{
    if (!env_is("H5GDS_H5BENCH_MEMORY", "device", "device") && !env_is("H5GDS_H5BENCH_MEMORY", "host", "device"))
        stop("H5GDS_H5BENCH_MEMORY=%s: device or host", getenv("H5GDS_H5BENCH_MEMORY"));
    return env_is("H5GDS_H5BENCH_MEMORY", "device", "device");
}

herr_t h5bench_gds_set_fapl(hid_t fapl, MPI_Comm comm, MPI_Info info)
{
    if (env_is("H5GDS_H5BENCH_FAPL", "mpio", "gds_mpio"))
        return H5Pset_fapl_mpio(fapl, comm, info);
    if (!env_is("H5GDS_H5BENCH_FAPL", "gds_mpio", "gds_mpio"))
        stop("H5GDS_H5BENCH_FAPL=%s: gds_mpio or mpio", getenv("H5GDS_H5BENCH_FAPL"));
    if (H5Pset_fapl_gds_mpio(fapl, comm, info) < 0)
        stop("H5Pset_fapl_gds_mpio failed (see the HDF5 error stack)%s", NULL);
    return 0;
}

/* A CUDA context on the GPU of this node-local rank (modulo the GPUs). */
static void cuda_start(void)
{
    if (cuda)
        return;
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!local)
        local = getenv("MPI_LOCALRANKID");
    const char *why = NULL;
    char name[128];
    if (!gds_cuda_use_device(local ? atoi(local) : 0, name, sizeof name, &why) || !(cuda = gds_cuda_load(&why)))
        stop("device memory asked for (H5GDS_H5BENCH_MEMORY=device) but no GPU is usable: %s", why);
}

typedef struct arrays {
    void **p[8];
    size_t bytes[8];
} arrays_t;

static arrays_t arrays_of(data_contig_md *d)
{
    size_t n = (size_t)d->particle_cnt;
    arrays_t a = {{(void **)&d->x, (void **)&d->y, (void **)&d->z, (void **)&d->px, (void **)&d->py,
                   (void **)&d->pz, (void **)&d->id_1, (void **)&d->id_2},
                  {0}};
    for (int i = 0; i < 8; i++)
        a.bytes[i] = n * (i == 6 ? sizeof(int) : sizeof(float));
    return a;
}

/* Each host array replaced by a device array (its contents copied when
 * `copy`); the host arrays are freed. */
static void to_device(data_contig_md *d, bool copy)
{
    cuda_start();
    arrays_t a = arrays_of(d);
    for (int i = 0; i < 8; i++) {
        CUdeviceptr dev = 0;
        if (cuda->MemAlloc(&dev, a.bytes[i] ? a.bytes[i] : 1) != CUDA_SUCCESS)
            stop("cannot allocate GPU memory for the particles%s", NULL);
        if (copy && a.bytes[i] && cuda->MemcpyHtoD(dev, *a.p[i], a.bytes[i]) != CUDA_SUCCESS)
            stop("host-to-device copy failed%s", NULL);
        free(*a.p[i]);
        *a.p[i] = (void *)(uintptr_t)dev;
    }
    cuda->CtxSynchronize();
}

static void free_device(data_contig_md *d)
{
    arrays_t a = arrays_of(d);
    for (int i = 0; i < 8; i++) {
        cuda->MemFree((CUdeviceptr)(uintptr_t)*a.p[i]);
        *a.p[i] = NULL; /* h5bench's free() then frees nothing */
    }
}

static void refuse_for_device(const bench_params *params, bool contiguous_memory)
{
    if (!contiguous_memory)
        stop("device memory needs a contiguous memory pattern (CONTIG_CONTIG_*): HDF5 converts compound "
             "types with the CPU; run this pattern with H5GDS_H5BENCH_MEMORY=host%s", NULL);
    if (params->useCompress)
        stop("device memory with compression is not supported here (filters run on the CPU)%s", NULL);
    if (params->file_per_proc)
        stop("device memory needs the shared file (gds_mpio), not FILE_PER_PROC%s", NULL);
    if (env_is("H5GDS_H5BENCH_FAPL", "mpio", "gds_mpio"))
        stop("device memory needs H5GDS_H5BENCH_FAPL=gds_mpio (MPI-IO cannot take device pointers)%s", NULL);
}

void h5bench_gds_prepare_write(const bench_params *params, void *data)
{
    if (!use_device())
        return;
    write_pattern p = params->access_pattern.pattern_write;
    refuse_for_device(params, p == CONTIG_CONTIG_1D || p == CONTIG_CONTIG_2D || p == CONTIG_CONTIG_3D ||
                                  p == CONTIG_CONTIG_STRIDED_1D);
    to_device((data_contig_md *)data, true);
    if (my_rank() == 0)
        printf("h5gds: the particle arrays are in GPU memory; H5Dwrite gets device pointers\n");
}

void h5bench_gds_release_write(const bench_params *params, void *data)
{
    (void)params;
    if (use_device() && data)
        free_device((data_contig_md *)data);
}

void h5bench_gds_prepare_read(const bench_params *params, data_contig_md *buf)
{
    if (!use_device())
        return;
    refuse_for_device(params, true); /* h5bench_read reads into contiguous arrays only */
    to_device(buf, false);
    if (my_rank() == 0)
        printf("h5gds: the particle arrays are in GPU memory; H5Dread gets device pointers\n");
}

void h5bench_gds_finish_read(const bench_params *params, data_contig_md *buf)
{
    bool device = use_device();
    if (getenv("H5GDS_H5BENCH_VERIFY") && !strcmp(getenv("H5GDS_H5BENCH_VERIFY"), "1")) {
        if (params->access_pattern.pattern_read != CONTIG_1D)
            stop("H5GDS_H5BENCH_VERIFY=1 checks the CONTIG_1D read pattern only%s", NULL);
        size_t n = (size_t)params->try_num_particles;
        if (n > buf->particle_cnt)
            n = (size_t)buf->particle_cnt;
        int *id_1 = malloc(n * sizeof(int) + 1);
        float *id_2 = malloc(n * sizeof(float) + 1);
        if (!id_1 || !id_2)
            stop("out of host memory%s", NULL);
        if (device) {
            if (cuda->MemcpyDtoH(id_1, (CUdeviceptr)(uintptr_t)buf->id_1, n * sizeof(int)) != CUDA_SUCCESS ||
                cuda->MemcpyDtoH(id_2, (CUdeviceptr)(uintptr_t)buf->id_2, n * sizeof(float)) != CUDA_SUCCESS)
                stop("device-to-host copy failed%s", NULL);
        }
        else {
            memcpy(id_1, buf->id_1, n * sizeof(int));
            memcpy(id_2, buf->id_2, n * sizeof(float));
        }
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += id_1[i] != (int)i || id_2[i] != (float)(i * 2);
        free(id_1);
        free(id_2);
        unsigned long long local[2] = {n, bad}, total[2];
        MPI_Allreduce(local, total, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (my_rank() == 0)
            printf("h5gds: verified id_1/id_2 of %llu particles read (%s memory): %llu wrong\n", total[0],
                   device ? "device" : "host", total[1]);
        if (total[1])
            stop("verification failed: particles read differ from what h5bench_write wrote%s", NULL);
    }
    if (device)
        free_device(buf);
}
