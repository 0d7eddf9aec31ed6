/*
 * The GPU codecs on a GPU (label gpu; exit 77 without a GPU or nvCOMP,
 * with the reason; --require makes those failures).
 *
 *   test_codec_gpu                 realistic data encoded on the CPU with each
 *                                  filter's reference framing (codec_ref.h),
 *                                  decoded on the GPU and compared bit for bit;
 *                                  GPU-encoded then decoded on the CPU; corrupt
 *                                  and truncated chunks give errors
 *   test_codec_gpu --fixtures DIR  the chunks h5py + hdf5plugin wrote
 *       [--cpu] [--out DIR]        (tests/codec/h5_fixtures.py make DIR),
 *                                  decoded on the GPU (--cpu: with the CPU
 *                                  references, no GPU) and compared with what
 *                                  HDF5 read; their data encoded on the GPU (or
 *                                  CPU) into OUT/<name>.<gpu|cpu>.enc for
 *                                  h5_fixtures.py verify
 *   test_codec_gpu --hostile       garbage inside valid framing (child processes)
 *   test_codec_gpu --pressure      decoding and encoding with about 96 MiB of the
 *                                  device free (sub-batches narrowed, or ENOMEM),
 *                                  then the corrupt chunks again
 *   test_codec_gpu --hostile-case N  hostile case N in this process
 *   test_codec_gpu --bench [MiB]   decode and encode throughput
 *   test_codec_gpu --widths [N]    decode time by batch width; batches decoded at once
 *
 * main and the arguments here; each family in a file of its own:
 * gpu_roundtrip.c, gpu_corrupt.c, gpu_hostile.c, gpu_fixtures.c,
 * gpu_bench.c; what they share in gpu_test_common.c/.h.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu_test_common.h"

static bool require_gpu;

int main(int argc, char **argv)
{
    const char *fixture_dir = NULL, *out = NULL;
    bool cpu = false, hostile = false, pressure = false;
    int hostile_case = -1;
    size_t bench_mib = 0, widths_n = 0, deflate_mib = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--fixtures") && i + 1 < argc)
            fixture_dir = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--cpu"))
            cpu = true;
        else if (!strcmp(argv[i], "--require"))
            require_gpu = true;
        else if (!strcmp(argv[i], "--hostile"))
            hostile = true;
        else if (!strcmp(argv[i], "--pressure"))
            pressure = true;
        else if (!strcmp(argv[i], "--hostile-case") && i + 1 < argc)
            hostile_case = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bench"))
            bench_mib = i + 1 < argc && atoi(argv[i + 1]) > 0 ? (size_t)atoi(argv[++i]) : 256;
        else if (!strcmp(argv[i], "--bench-deflate"))
            deflate_mib = i + 1 < argc && atoi(argv[i + 1]) > 0 ? (size_t)atoi(argv[++i]) : 256;
        else if (!strcmp(argv[i], "--widths"))
            widths_n = i + 1 < argc && atoi(argv[i + 1]) > 0 ? (size_t)atoi(argv[++i]) : 1024;
        else {
            fprintf(stderr, "usage: %s [--require] [--hostile | --hostile-case N | --pressure | --fixtures DIR [--cpu] [--out DIR] | --bench [MiB] | --bench-deflate [MiB] | --widths [N]]\n",
                    argv[0]);
            return 2;
        }
    }
    ref_load();
    gpu_common_ref_load(); /* gpu_test_common.c's copy (codec_ref.h's table is a static, one per file) */
    printf("CPU references: zlib %s, zstd %s, lz4 %s\n", ref.z ? "yes" : "NO", ref.zstd ? "yes" : "NO",
           ref.lz4 ? "yes" : "NO");
    if (fixture_dir && cpu) {
        fixtures(fixture_dir, out ? out : fixture_dir, true);
        return test_finish("test_codec_gpu (fixtures, CPU references)");
    }
    const char *why = NULL;
    char name[128] = "";
    if (hostile_case >= 0) /* one case in this process (compute-sanitizer follows it) */
        return hostile_one(hostile_case);
    if (hostile) { /* only the children use CUDA (a CUDA process must not fork) */
        if (hostile_tests() == 0) {
            printf("SKIP: no GPU or no nvCOMP\n");
            return require_gpu ? 1 : 77;
        }
        return test_finish("test_codec_gpu --hostile");
    }
    if (!gds_cuda_use_device(0, name, sizeof name, &why)) {
        printf("SKIP: no GPU: %s\n", why);
        return require_gpu ? 1 : 77;
    }
    cu = gds_cuda_load(NULL);
    gds_status_t st = {0, ""};
    double t = now();
    if (gds_codec_open(&codec, NULL, &st) < 0) {
        printf("SKIP: GPU codec unavailable on %s: %s\n", name, st.msg);
        return require_gpu ? 1 : 77;
    }
    printf("GPU %s: codec opened in %.3f s: %s\n", name, now() - t, gds_codec_describe(codec));
    t = now();
    gds_codec_t *second = NULL;
    CHECK(gds_codec_open(&second, NULL, &st) == 0); /* the compiled kernels are cached per process */
    printf("second open (kernels cached): %.3f s\n", now() - t);
    gds_codec_close(second);
    GPU_OK(cu->StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    if (fixture_dir)
        fixtures(fixture_dir, out, false);
    else if (pressure) {
        pressure_tests();
        corrupt_tests(); /* after allocations failed: the batch's good chunks still decode right */
    }
    else if (!bench_mib && !widths_n && !deflate_mib) {
        roundtrip_tests();
        corrupt_tests();
    }
    if (bench_mib)
        bench(bench_mib);
    if (widths_n)
        widths(widths_n);
    if (deflate_mib)
        bench_deflate(deflate_mib);
    gds_codec_close(codec);
    cu->StreamDestroy(stream);
    return test_finish(pressure ? "test_codec_gpu --pressure" : "test_codec_gpu");
}
