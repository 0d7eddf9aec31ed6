/*
 * h5gds-bench: writes and reads HDF5 datasets from/to host or GPU memory and
 * reports the observed rate (bytes / wall-clock), the definition of the GDS
 * VFD paper, for the paper's methods and h5gds's own data paths, side by side
 * with the ceilings of the machine measured in the same run.
 *
 *   h5gds-bench [--quick|--full] [options]     (h5gds-bench --help)
 *
 * Phases: write (durable: H5Dwrite, H5Fclose, fsync), cold_read (page cache
 * dropped), warm_read (the same read again). Every read is verified.
 *
 * With --chunk and --filter: a compressed float32 dataset (a smooth field,
 * bench_filter.c) written and read with H5Dwrite_gds/H5Dread_gds, which
 * encode and decode on the GPU from device memory (HDF5's CPU filters from
 * host memory); rows add the filter, the file's ratio and the call's route.
 *
 * Under mpirun (when built with MPI): one rank per GPU, each writing its
 * slab of one global dataset into its own file through libh5gds_mpi (file
 * per rank + VDS master, the paper's Fig. 7-8), all ranks starting together;
 * per-rank rates and the aggregate (all bytes / slowest rank) are reported,
 * the ceilings being every rank's parallel O_DIRECT I/O at the same time.
 * Built against a parallel HDF5 >= 1.14, also one shared file (one dataset,
 * each rank its slab or block, collective transfers) through the gds_mpio
 * driver from the data buffer (GDS-SHARED) and through HDF5's mpio driver
 * from a pageable host copy (MPIO-HOST): bench_shared.c.
 */
#include "bench.h"

bench_cuda_t cuda;

static void describe_machine(void)
{
    snprintf(machine.gpu, sizeof machine.gpu, "%s", cuda.ok ? cuda.gpu_name : "none");
    machine.cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(machine.kernel, sizeof machine.kernel, "%s", u.release);
    struct statfs sf;
    const char *fs = "unknown";
    if (statfs(workdir, &sf) == 0) {
        switch ((unsigned long)sf.f_type) {
        case 0xEF53: fs = "ext4"; break;
        case 0x58465342: fs = "xfs"; break;
        case 0x01021994: fs = "tmpfs"; break;
        case 0x9123683E: fs = "btrfs"; break;
        case 0x794c7630: fs = "overlayfs"; break;
        case 0x0BD00BD0: fs = "lustre"; break;
        case 0x6969: fs = "nfs"; break;
        }
    }
    snprintf(machine.fs, sizeof machine.fs, "%s", fs);
}



int main(int argc, char **argv)
{
    int gpu_ordinal = 0;
#ifdef H5GDS_BENCH_MPI
    if (par_launched()) {
        MPI_Init(&argc, &argv);
        MPI_Comm_dup(MPI_COMM_WORLD, &par_comm);
        MPI_Comm_rank(par_comm, &par.rank);
        MPI_Comm_size(par_comm, &par.size);
        par.on = true;
        /* one rank per GPU: the node-local rank modulo the GPUs present */
        gpu_ordinal = H5FD_gds_mpi_local_rank(par_comm);
        if (gpu_ordinal < 0)
            gpu_ordinal = 0;
    }
#endif
    parse_args(argc, argv);
    if (opt.tune)
        return par_end(bench_tune());
    signal(SIGXFSZ, SIG_IGN); /* a file size limit shows up as EFBIG, like a full disk */
    bench_cuda_init(&cuda, gpu_ordinal);

    /* memory */
    if (opt.buffer_mode >= 0) {
        static const memory_t by_mode[] = {MEM_HOST, MEM_MANAGED, MEM_MANAGED, MEM_DEVICE};
        opt.memory = by_mode[opt.buffer_mode];
    }
    else if (!opt.memory_given)
        opt.memory = cuda.ok ? MEM_DEVICE : MEM_HOST;
    if (opt.memory != MEM_HOST && !cuda.ok) {
        fprintf(stderr, "h5gds-bench: %s memory needs an NVIDIA GPU and none is usable here\n", memory_names[opt.memory]);
        return par_end(2);
    }
    bool gpu_init = opt.buffer_mode == 2 || opt.buffer_mode == 3 || (opt.buffer_mode < 0 && opt.memory == MEM_DEVICE);
    if (!opt.methods_given) {
        for (int m = 0; m < N_METHODS; m++)
            opt.methods[m] = true;
        if (!is_gpu_memory(opt.memory))
            opt.methods[M_SEC2_PINNED] = opt.methods[M_DIRECT_PINNED] = opt.methods[M_GDS_STAGED] =
                opt.methods[M_GDS_CUFILE] = opt.methods[M_GDS_POSIX] = false;
        opt.methods[M_GDS_SHARED] = opt.methods[M_MPIO_HOST] = have_shared() && par.on;
    }
    bool shared = opt.methods[M_GDS_SHARED] || opt.methods[M_MPIO_HOST];
    if (shared && !have_shared()) {
        fprintf(stderr,
                "h5gds-bench: GDS-SHARED and MPIO-HOST need h5gds-bench built against a parallel HDF5 >= 1.14 "
                "with MPI (then the gds_mpio driver is built too); this one is built against HDF5 %u.%u.%u%s\n",
                H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE,
#ifdef H5_HAVE_PARALLEL
                " with parallel support but without gds_mpio"
#else
                " without parallel support"
#endif
        );
        return par_end(2);
    }
    if (shared && !par.on) {
        fprintf(stderr, "h5gds-bench: GDS-SHARED and MPIO-HOST run under mpirun (e.g. mpirun -np 1 h5gds-bench ...)\n");
        return par_end(2);
    }
    if (opt.boundary && !shared) {
        fprintf(stderr, "h5gds-bench: --boundary is the decomposition of the shared file: add GDS-SHARED or MPIO-HOST\n");
        return par_end(2);
    }
    if (opt.boundary) /* whole rows: every size a multiple of the boundary */
        for (int si = 0; si < opt.nsizes; si++) {
            opt.sizes[si] = opt.sizes[si] / opt.boundary * opt.boundary;
            if (!opt.sizes[si]) {
                fprintf(stderr, "h5gds-bench: --boundary %zu is larger than a size per rank\n", opt.boundary);
                return par_end(2);
            }
        }
    if (!have_direct()) {
        if (opt.methods_given && (opt.methods[M_DIRECT] || opt.methods[M_DIRECT_PINNED]))
            fprintf(stderr, "h5gds-bench: note: this HDF5 has no direct driver; DIRECT methods skipped\n");
        opt.methods[M_DIRECT] = opt.methods[M_DIRECT_PINNED] = false;
    }
    if (!is_gpu_memory(opt.memory) && (opt.methods[M_SEC2_PINNED] || opt.methods[M_DIRECT_PINNED])) {
        fprintf(stderr, "h5gds-bench: +PINNED methods need GPU memory (--memory device|managed)\n");
        return par_end(2);
    }

    if (opt.filter && par.on) {
        /* rank files are written by libh5gds_mpi, whose datasets are allocated early (no filters) */
        if (par.rank == 0)
            fprintf(stderr, "h5gds-bench: --filter runs in one process, not under mpirun\n");
        return par_end(2);
    }
    if (opt.filter && !check_filter(opt.filter)) /* it said why, in one line */
        return par_end(2);

    /* working directory */
    if (opt.dir) {
        struct stat sb;
        if (stat(opt.dir, &sb) < 0 || !S_ISDIR(sb.st_mode))
            fail("--dir %s: not a directory", opt.dir);
        snprintf(workdir, sizeof workdir, "%s/h5gds-bench.XXXXXX", opt.dir);
    }
    else {
        const char *tmp = getenv("TMPDIR");
        snprintf(workdir, sizeof workdir, "%s/h5gds-bench.XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
    }
    /* under MPI rank 0 creates it (a directory all ranks see) */
    int made = par.rank != 0 || mkdtemp(workdir) != NULL, why = errno;
#ifdef H5GDS_BENCH_MPI
    if (par.on) {
        MPI_Bcast(&made, 1, MPI_INT, 0, par_comm);
        MPI_Bcast(&why, 1, MPI_INT, 0, par_comm);
        MPI_Bcast(workdir, sizeof workdir, MPI_CHAR, 0, par_comm);
    }
#endif
    if (!made)
        fail("cannot create a directory in %s: %s", opt.dir ? opt.dir : "the temporary directory", strerror(why));
    own_workdir = true;
    snprintf(files[0], sizeof files[0], "%s/bench.h5", workdir);
    if (par.on) {
        snprintf(files[1], sizeof files[1], "%s/ceiling.rank%d.bin", workdir, par.rank);
        snprintf(files[2], sizeof files[2], "%s/bench.rank%d.h5", workdir, par.rank);
        snprintf(files[3], sizeof files[3], "%s/shared.h5", workdir);
        /* the node's ceiling: its threads shared among the ranks */
        opt.ceiling_threads = opt.ceiling_threads / (unsigned)par.size ? opt.ceiling_threads / (unsigned)par.size : 1;
    }
    else
        snprintf(files[1], sizeof files[1], "%s/ceiling.bin", workdir);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    describe_machine();

    if (par.rank == 0) {
        csv = fopen(opt.csv, "w");
        if (!csv)
            fail("cannot write %s: %s", opt.csv, strerror(errno));
        fprintf(csv, "method,phase,memory,size_bytes,threads,block_bytes,repeat,seconds,rate_GBps,gpu,cpus,filesystem,"
                     "kernel,hdf5_version,driver_config,cold_cache,filter,ratio%s\n", par.on ? ",ranks,rank" : "");
        printf("h5gds-bench: %s memory, GPU %s, %ld CPUs, %s in %s, HDF5 %u.%u.%u, %d repeats", memory_names[opt.memory],
               machine.gpu, machine.cpus, machine.fs, workdir, H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE,
               opt.repeat);
        if (par.on)
            printf(", %d MPI ranks (file per rank + VDS master%s%s)", par.size, shared ? "; shared file: " : "",
                   shared ? shared_decomposition() : "");
        if (opt.chunk)
            printf(", chunks of %zu bytes", opt.chunk);
        if (opt.filter)
            printf(", filter %s: %s, float32 field data", opt.filter->name, opt.filter->what);
        printf("\n");
    }

    for (int si = 0; si < opt.nsizes; si++) {
        size_t size = opt.sizes[si];
        buffers_t b = {.memory = opt.memory, .size = size};
        b.expect = malloc(size);
        b.check = malloc(size);
        if (!b.expect || !b.check)
            fail("cannot allocate %zu bytes of host memory", size);
        /* Random bytes measure I/O alone; compressed datasets need data that
         * compresses as real data does (malloc's alignment suits floats). */
        if (opt.filter)
            fill_field((float *)(void *)b.expect, size / sizeof(float));
        else
            fill_random(b.expect, size, 1000 + (uint64_t)si + 7919 * (uint64_t)par.rank);
        b.data = alloc_memory(opt.memory, size);
        if (is_gpu_memory(opt.memory)) {
            b.host = malloc(size);
            b.pinned = alloc_memory(MEM_PINNED, size);
            if (!b.host)
                fail("cannot allocate %zu bytes of host memory", size);
        }
        to_data(&b, b.expect, gpu_init);
        size_t padded = (size + 4095) / 4096 * 4096;
        unsigned char *ceiling_buf = NULL;
        if (opt.ceilings) {
            if (!(ceiling_buf = aligned_alloc(4096, padded)))
                fail("cannot allocate %zu bytes of host memory", padded);
            memcpy(ceiling_buf, b.expect, size);
        }
        if (si == 0)
            warm_up_gds(&b);
        /* Repeats outermost: ceiling, then every method, then the next repeat. */
        for (int rep = 0; rep < opt.repeat; rep++) {
            if (opt.ceilings)
                bench_ceilings(size, &b, ceiling_buf, padded, rep);
            for (int m = 0; m < N_METHODS; m++) {
                if (!opt.methods[m])
                    continue;
                to_data(&b, b.expect, gpu_init); /* the ceilings' copies reuse the buffer */
                if (uses_gds(m) && (opt.nthreads || opt.nblocks)) {
                    int nt = opt.nthreads ? opt.nthreads : 1, nb = opt.nblocks ? opt.nblocks : 1;
                    /* The grid's order turns by one point each repeat, so that the drift
                     * of a shared disk is spread over the points instead of favouring one. */
                    for (int k = 0; k < nt * nb; k++) {
                        int p = (k + rep) % (nt * nb), ti = p / nb, bi = p % nb;
                        bench_method((method_t)m, &b, size, opt.nthreads ? opt.threads[ti] : 0,
                                     opt.nblocks ? opt.blocks[bi] : 0, rep);
                    }
                }
                else
                    bench_method((method_t)m, &b, size, 0, 0, rep);
            }
        }
        unlink(files[1]);
        free(ceiling_buf);
        free_memory(opt.memory, b.data);
        if (b.pinned)
            free_memory(MEM_PINNED, b.pinned);
        free(b.host);
        free(b.expect);
        free(b.check);
    }
    cleanup_files();
    par_barrier(); /* every rank's files are gone: rank 0 removes the directory */
    cleanup();
    if (par.rank != 0)
        return par_end(0);
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\r\033[K");
    fclose(csv);
    print_table();
    printf("CSV: %s\n", opt.csv);
    if (opt.plot) {
        /* installed: <prefix>/share/h5gds beside bin/; in the build: the source tree's tools/ */
        char self[4096], dir[4200], script[4300], cmd[8192];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        snprintf(dir, sizeof dir, "%s", H5GDS_TOOLS_DIR);
        if (n > 0) {
            self[n] = '\0';
            char *slash = strrchr(self, '/');
            if (slash) {
                *slash = '\0';
                snprintf(script, sizeof script, "%s/../share/h5gds/plot_bench.py", self);
                if (access(script, R_OK) == 0)
                    snprintf(dir, sizeof dir, "%s/../share/h5gds", self);
            }
        }
        snprintf(cmd, sizeof cmd, "python3 \"%s/plot_bench.py\" \"%s\"", dir, opt.csv);
        if (system(cmd) != 0) {
            fprintf(stderr, "h5gds-bench: plotting failed (is matplotlib installed?)\n");
            return par_end(1);
        }
    }
    return par_end(0);
}
