/*
 * The codec's kernels (codec_kernels.cu and codec_shared.h, as the library
 * embeds them) compiled by NVRTC with gds_codec_open's options, no GPU
 * needed: a syntax error, or a kernel gpu_codec.c launches that the source
 * does not define, fails here on any machine with NVRTC rather than at the
 * first codec open on a GPU. Skipped (77) without NVRTC.
 */
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "codec_test.h"

/* Generated at build time from codec_kernels.cu, codec_shared.h, zstd_splice.h, deflate_splice.h, inflate_split.h and zstd_blocks.h (embed.cmake). */
extern const unsigned char gds_codec_kernels_source[];
extern const unsigned char gds_codec_shared_source[];
extern const unsigned char gds_codec_zstd_splice_source[];
extern const unsigned char gds_codec_deflate_splice_source[];
extern const unsigned char gds_codec_inflate_split_source[];
extern const unsigned char gds_codec_zstd_blocks_source[];

/* Compiles for `arch` ("sm_90": a cubin; "compute_80": PTX, returned in
 * *ptx); false with NVRTC's log printed, also when the log holds only
 * warnings in the project's own -Werror builds (H5GDS_WERROR). */
static bool compile(const gds_nvrtc_api_t *rtc, const char *arch, char **ptx)
{
    char opt_arch[64];
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", arch);
    const char *opts[] = {opt_arch, "--std=c++17", "-default-device"};
    const char *headers[] = {(const char *)gds_codec_shared_source, (const char *)gds_codec_zstd_splice_source,
                             (const char *)gds_codec_deflate_splice_source,
                             (const char *)gds_codec_inflate_split_source,
                                 (const char *)gds_codec_zstd_blocks_source};
    const char *names[] = {"codec_shared.h", "zstd_splice.h", "deflate_splice.h", "inflate_split.h",
                           "zstd_blocks.h"};
    gds_nvrtc_program_t prog = NULL;
    if (rtc->CreateProgram(&prog, (const char *)gds_codec_kernels_source, "codec_kernels.cu", 5, headers, names) != 0)
        return false;
    int rc = rtc->CompileProgram(prog, 3, opts);
    size_t log_size = 0;
    bool quiet = true;
    if (rtc->GetProgramLogSize(prog, &log_size) == 0 && log_size > 1) {
        quiet = false;
        char *log = malloc(log_size + 1);
        if (log && rtc->GetProgramLog(prog, log) == 0)
            fprintf(stderr, "NVRTC (%s):\n%s\n", arch, log);
        free(log);
    }
    size_t size = 0;
    if (rc == 0 && ptx && rtc->GetPTXSize(prog, &size) == 0 && (*ptx = malloc(size + 1)) != NULL) {
        if (rtc->GetPTX(prog, *ptx) != 0)
            rc = -1;
        (*ptx)[size] = 0;
    }
    rtc->DestroyProgram(&prog);
#ifdef H5GDS_NVRTC_WARNINGS_FAIL
    return rc == 0 && quiet;
#else
    (void)quiet;
    return rc == 0;
#endif
}

int main(void)
{
    const char *why = NULL;
    const gds_nvrtc_api_t *rtc = gds_nvrtc_load(&why);
    if (!rtc) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    printf("NVRTC %d.%d\n", rtc->major, rtc->minor);
    CHECK(compile(rtc, "sm_80", NULL));
    CHECK(compile(rtc, "sm_90", NULL));
    char *ptx = NULL;
    CHECK(compile(rtc, "compute_80", &ptx)); /* the fallback gds_codec_open takes for a newer GPU */
    int kernels = 0;
    for (int k = 0; ptx && gds_codec_kernel_name(k); k++, kernels++) {
        char entry[128];
        snprintf(entry, sizeof entry, ".entry %s(", gds_codec_kernel_name(k));
        CHECK_MSG(strstr(ptx, entry) != NULL, "kernel %s is not in the compiled source", gds_codec_kernel_name(k));
    }
    CHECK_MSG(!ptx || kernels == K_COUNT, "%d kernel names for %d kernels", kernels, (int)K_COUNT);
    free(ptx);
    return test_finish("test_codec_kernels");
}
