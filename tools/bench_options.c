/*
 * Command line of h5gds-bench: the options, their parsing and --help.
 */
#include "bench.h"
#include "cli_args.h"

const char *const memory_names[] = {"host", "pinned", "device", "managed"};
const char *const method_names[] = {"SEC2",       "SEC2+PINNED", "DIRECT",    "DIRECT+PINNED", "GDS",
                                    "GDS-staged", "GDS-cufile",  "GDS-posix", "GDS-SHARED",    "MPIO-HOST"};
const char *const gds_modes[] = {"", "", "", "", "auto", "staged", "cufile", "posix", "auto", ""};
const char *const phase_names[] = {"write", "cold_read", "warm_read"};

bench_options_t opt;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: h5gds-bench [--quick | --full] [options]\n"
            "  --quick               64 MiB and 256 MiB, 2 repeats (default; under 2 minutes)\n"
            "  --full                the paper's sizes 64 MiB .. 2 GiB, 3 repeats\n"
            "  --sizes LIST          dataset sizes, e.g. 64MiB,1GiB,16GiB (sizes as in the gds configuration:\n"
            "                        4096, 64KiB, 8MiB, 1G; KiB..TiB or K..T = 1024^n, KB..TB = 1000^n)\n"
            "  --methods LIST        SEC2,SEC2+PINNED,DIRECT,DIRECT+PINNED,GDS,GDS-staged,GDS-cufile,GDS-posix,\n"
            "                        GDS-SHARED,MPIO-HOST (default: all that apply to the memory and the build)\n"
            "                        Under mpirun, with a parallel HDF5 >= 1.14 (the gds_mpio driver):\n"
            "                        GDS-SHARED   one shared file, one dataset, each rank its part, collective\n"
            "                                     H5Dwrite/H5Dread through gds_mpio from the data buffer\n"
            "                        MPIO-HOST    the same file through HDF5's mpio driver, the data copied\n"
            "                                     to/from pageable host memory (the usual baseline)\n"
            "  --boundary N          shared file: a 2-D dataset, rows of ranks x N elements, each rank an\n"
            "                        N-column block of every row (rank boundaries every N elements: 4099 is\n"
            "                        unaligned, 4096 aligned); the size per rank is rounded down to whole rows.\n"
            "                        Default: each rank one 1-D slab\n"
            "  --phases LIST         write,cold_read,warm_read (default: all)\n"
            "  --memory KIND         device|managed|pinned|host (default: device with a GPU, else host)\n"
            "  --buffer-mode N       IOR buffer modes: 0 malloc/CPU init, 1 managed/CPU init,\n"
            "                        2 managed/GPU init, 3 cudaMalloc/GPU init\n"
            "  --threads LIST        gds I/O threads to sweep (paper Fig. 5), e.g. auto,1,2,4,8,16\n"
            "  --blocks LIST         gds I/O block sizes to sweep (paper Fig. 6), e.g. auto,1MiB,4MiB,16MiB\n"
            "                        (auto: the autotuned value; in the CSV as 0)\n"
            "  --tune                measure the autotuning grid (threads x block, O_DIRECT write and\n"
            "                        read) in --dir, print it and what auto picks, and exit\n"
            "  --config STR          extra gds configuration (key=value,...)\n"
            "  --chunk SIZE          chunked dataset with chunks of SIZE (chunk cache off), e.g. 8MiB\n"
            "  --filter NAME         with --chunk: a compressed float32 dataset of a smooth field rounded to\n"
            "                        3 decimals, written and read with H5Dwrite_gds/H5Dread_gds (from device\n"
            "                        memory: encoded/decoded on the GPU with nvCOMP). NAME: gzip (deflate 4 +\n"
            "                        shuffle), lz4, zstd, bitshuffle-lz4, blosc-lz4 (plugins: HDF5_PLUGIN_PATH\n"
            "                        = hdf5plugin's plugin folder). CSV: filter, ratio (decoded / file bytes);\n"
            "                        route=... (gpu-encode, gpu-decode, host-staged, host) in driver_config\n"
            "  --repeat N            repeats per measurement (median, min, max are reported)\n"
            "  --no-ceilings         skip the O_DIRECT / page-cache / PCIe ceilings\n"
            "  --ceiling-threads N   threads of the ceiling measurements (default 16)\n"
            "  --dir DIR             where to put the test files (default: a new temporary directory)\n"
            "  --csv FILE            CSV output (default: h5gds-bench.csv)\n"
            "  --plot                PNG figures next to the CSV (needs python3 + matplotlib)\n"
            "  --keep                keep the test files\n"
            "  -h, --help            this text\n");
}

/* A wrong argument: one line saying what is wrong, exit status 2. */
static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "h5gds-bench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (--help for usage)\n");
    exit(2);
}

/* A positive size, or a one-line error naming the option. */
static size_t size_option(const char *option, const char *text)
{
    size_t v = 0;
    const char *why = cli_parse_size(text, &v);
    if (why)
        die_usage("bad %s '%s': %s", option, text, why);
    if (v == 0)
        die_usage("bad %s '%s': is 0 bytes", option, text);
    return v;
}

static long count_option(const char *option, const char *text, long min, long max)
{
    long v = 0;
    const char *why = cli_parse_long(text, min, max, &v);
    if (why)
        die_usage("bad %s '%s': %s", option, text, why);
    return v;
}

/* The innermost message of the error stack (the library's own words). */
static herr_t innermost(unsigned n, const H5E_error2_t *e, void *data)
{
    if (n == 0 && e->desc)
        snprintf(data, 512, "%s", e->desc);
    return 0;
}

/* Splits a comma list, calling `each` per item; false if any item is bad. */
static void parse_list(const char *arg, const char *what, void (*each)(const char *, const char *))
{
    /* Every item, empty ones too ("1GiB," is a mistake, not one size). */
    char *copy = strdup(arg);
    if (!copy)
        die_usage("out of memory");
    for (char *it = copy, *next; it; it = next) {
        next = strchr(it, ',');
        if (next)
            *next++ = '\0';
        if (!*it)
            die_usage("empty item in --%s '%s'", what, arg);
        each(it, what);
    }
    free(copy);
}

static void add_size(const char *s, const char *what)
{
    char option[32];
    snprintf(option, sizeof option, "--%s", what);
    size_t v = size_option(option, s);
    if (opt.nsizes == MAX_LIST)
        die_usage("more than %d sizes in %s", MAX_LIST, option);
    opt.sizes[opt.nsizes++] = v;
}
static void add_block(const char *s, const char *what)
{
    (void)what;
    if (opt.nblocks == MAX_LIST)
        die_usage("more than %d sizes in --blocks", MAX_LIST);
    size_t block = strcmp(s, "auto") ? size_option("--blocks", s) : 0;
    if (block && (block < 4096 || block > ((size_t)1 << 30)))  /* the driver's io_block_size range */
        die_usage("bad --blocks '%s': an I/O block is 4KiB to 1GiB, or auto", s);
    opt.blocks[opt.nblocks++] = block;
}
static void add_threads(const char *s, const char *what)
{
    (void)what;
    if (opt.nthreads == MAX_LIST)
        die_usage("more than %d thread counts in --threads", MAX_LIST);
    opt.threads[opt.nthreads++] = strcmp(s, "auto") ? (unsigned)count_option("thread count in --threads", s, 1, 256) : 0;
}
static void add_method(const char *s, const char *what)
{
    (void)what;
    for (int m = 0; m < N_METHODS; m++)
        if (!strcasecmp(s, method_names[m])) {
            opt.methods[m] = true;
            return;
        }
    die_usage("unknown method '%s'", s);
}
static void add_phase(const char *s, const char *what)
{
    (void)what;
    for (int p = 0; p < N_PHASES; p++)
        if (!strcmp(s, phase_names[p])) {
            opt.phases[p] = true;
            return;
        }
    die_usage("unknown phase '%s' (write, cold_read, warm_read)", s);
}

void parse_args(int argc, char **argv)
{
    enum { O_QUICK = 256, O_FULL, O_SIZES, O_METHODS, O_PHASES, O_MEMORY, O_BUFMODE, O_THREADS, O_BLOCKS,
           O_CONFIG, O_REPEAT, O_NOCEIL, O_CEILT, O_DIR, O_CSV, O_PLOT, O_KEEP, O_INJECT, O_INJECT_RANK, O_CHUNK, O_TUNE, O_BOUNDARY,
           O_FILTER };
    static const struct option longopts[] = {
        {"quick", no_argument, 0, O_QUICK},         {"full", no_argument, 0, O_FULL},
        {"sizes", required_argument, 0, O_SIZES},   {"methods", required_argument, 0, O_METHODS},
        {"phases", required_argument, 0, O_PHASES}, {"memory", required_argument, 0, O_MEMORY},
        {"buffer-mode", required_argument, 0, O_BUFMODE}, {"threads", required_argument, 0, O_THREADS},
        {"blocks", required_argument, 0, O_BLOCKS}, {"config", required_argument, 0, O_CONFIG},
        {"repeat", required_argument, 0, O_REPEAT}, {"no-ceilings", no_argument, 0, O_NOCEIL},
        {"ceiling-threads", required_argument, 0, O_CEILT}, {"dir", required_argument, 0, O_DIR}, {"tune", no_argument, 0, O_TUNE},
        {"csv", required_argument, 0, O_CSV},       {"plot", no_argument, 0, O_PLOT},
        {"keep", no_argument, 0, O_KEEP},           {"inject-corruption", no_argument, 0, O_INJECT},
        {"inject-failure-rank", required_argument, 0, O_INJECT_RANK},
        {"chunk", required_argument, 0, O_CHUNK},   {"boundary", required_argument, 0, O_BOUNDARY},
        {"filter", required_argument, 0, O_FILTER},
        {"help", no_argument, 0, 'h'},              {0, 0, 0, 0}};
    bool full = false, quick = false;
    opt.repeat = 0;
    opt.buffer_mode = -1;
    opt.inject_failure_rank = -1;
    opt.ceilings = true;
    opt.ceiling_threads = 16;
    opt.csv = "h5gds-bench.csv";
    int c;
    opterr = 0;
    /* ':' first: a missing value is told apart from an unknown option */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_QUICK: quick = true; break;
        case O_FULL: full = true; break;
        case O_SIZES: parse_list(optarg, "sizes", add_size); break;
        case O_METHODS: parse_list(optarg, "methods", add_method); opt.methods_given = true; break;
        case O_PHASES: parse_list(optarg, "phases", add_phase); break;
        case O_MEMORY: {
            int m = -1;
            for (int i = 0; i < 4; i++)
                if (!strcmp(optarg, memory_names[i]))
                    m = i;
            if (m < 0)
                die_usage("unknown memory kind '%s' (device, managed, pinned, host)", optarg);
            opt.memory = (memory_t)m;
            opt.memory_given = true;
            break;
        }
        case O_BUFMODE: opt.buffer_mode = (int)count_option("--buffer-mode", optarg, 0, 3); break;
        case O_THREADS: parse_list(optarg, "threads", add_threads); break;
        case O_BLOCKS: parse_list(optarg, "blocks", add_block); break;
        case O_CONFIG: opt.config = optarg; break;
        case O_REPEAT: opt.repeat = (int)count_option("--repeat", optarg, 1, 1000); break;
        case O_NOCEIL: opt.ceilings = false; break;
        case O_CEILT: opt.ceiling_threads = (unsigned)count_option("--ceiling-threads", optarg, 1, 256); break;
        case O_DIR: opt.dir = optarg; break;
        case O_TUNE: opt.tune = true; break;
        case O_CSV: opt.csv = optarg; break;
        case O_PLOT: opt.plot = true; break;
        case O_KEEP: opt.keep = true; break;
        case O_INJECT: opt.inject_corruption = true; break;
        case O_INJECT_RANK: opt.inject_failure_rank = (int)count_option("--inject-failure-rank", optarg, 0, 1 << 20); break;
        case O_CHUNK: opt.chunk = size_option("--chunk", optarg); break;
        case O_FILTER:
            if (!(opt.filter = find_filter(optarg)))
                die_usage("unknown filter '%s' (gzip, lz4, zstd, bitshuffle-lz4, blosc-lz4)", optarg);
            break;
        case O_BOUNDARY: opt.boundary = size_option("--boundary (elements per rank and row, e.g. 4099)", optarg); break;
        case 'h': usage(stdout); exit(0);
        case ':': die_usage("option '%s' needs a value", argv[optind - 1]);
        default: die_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (quick && full)
        die_usage("--quick and --full: one or the other");
    if (optind < argc)
        die_usage("unexpected argument '%s'", argv[optind]);
    if (opt.boundary && opt.chunk)
        die_usage("--boundary and --chunk together are not supported (the 2-D block decomposition is contiguous)");
    if (opt.filter && !opt.chunk)
        die_usage("--filter needs --chunk SIZE (HDF5 filters apply to chunked datasets), e.g. --chunk 1MiB --filter %s",
                  opt.filter->name);
    if (opt.filter && opt.chunk % sizeof(float))
        die_usage("--chunk %zu with --filter: not a whole number of float32 elements (4 bytes)", opt.chunk);
    for (int si = 0; opt.filter && si < opt.nsizes; si++)
        if (opt.sizes[si] % sizeof(float))
            die_usage("--sizes: %zu bytes with --filter is not a whole number of float32 elements (4 bytes)",
                      opt.sizes[si]);
    if (opt.nsizes == 0) {
        static const size_t quick[] = {64 * MiB, 256 * MiB};
        static const size_t paper[] = {64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB, GiB, 2 * GiB};
        const size_t *s = full ? paper : quick;
        int n = full ? 6 : 2;
        for (int i = 0; i < n; i++)
            opt.sizes[opt.nsizes++] = s[i];
    }
    if (opt.repeat == 0)
        opt.repeat = full ? 3 : 2;
    if (!opt.phases[0] && !opt.phases[1] && !opt.phases[2])
        opt.phases[0] = opt.phases[1] = opt.phases[2] = true;
    if (opt.config) {
        /* The library's reason in one line, rather than its error stack printed. */
        H5E_auto2_t print_func;
        void *print_data;
        H5Eget_auto2(H5E_DEFAULT, &print_func, &print_data);
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        H5FD_gds_config_t c;
        if (H5FD_gds_config_init(&c) < 0 || H5FD_gds_config_parse(&c, opt.config) < 0) {
            char why[512] = "";
            H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, why);
            die_usage("bad --config '%s': %s", opt.config, why[0] ? why : "see the gds configuration keys");
        }
        H5Eset_auto2(H5E_DEFAULT, print_func, print_data);
    }
}
