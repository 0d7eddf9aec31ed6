/*
 * libFuzzer target: zstd frames decoded block by block (src/codec/
 * zstd_blocks.h) on bytes nobody chose, in the kernels' five steps as the
 * host tests run them (zb_host.h), after the frame check the codec does
 * first (gds_zstd_frame_check). The steps must never read or write out
 * of bounds (run it under ASan and UBSan), and a frame they take must be
 * one libzstd (dlopen'ed: codec_ref.h) decodes to the same bytes. Input:
 * three bytes giving the decoded size (little-endian, 2 MiB at most), then
 * the frame.
 *
 *   cmake -S tests/codec -B build/fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DH5GDS_FUZZ=ON
 *   ninja -C build/fuzz fuzz_zstd_blocks fuzz_zstd_blocks_replay
 *   build/fuzz/fuzz_zstd_blocks_replay --make-seeds build/fuzz-zstd-seeds
 *   build/fuzz/fuzz_zstd_blocks -max_len=1100000 build/fuzz-zstd-corpus build/fuzz-zstd-seeds
 *
 * (-max_len at least the largest seed: libFuzzer cuts longer inputs.)
 *
 * Built with FUZZ_STANDALONE (any compiler) it writes its seeds (libzstd's
 * frames of several kinds of data, sizes and levels) or replays files and
 * folders of inputs: the CTest codec_zstd_blocks_seeds does both.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_shared.h"
#include "fuzz_replay.h"
#include "zb_host.h"

#define FUZZ_MAX_DECODED ((size_t)2 << 20)

static size_t frames_taken; /* the standalone replay's count */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_need_ref(&ref.zstd, "libzstd (libzstd.so.1)");
    if (size < 4)
        return 0;
    size_t expect = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16;
    if (expect > FUZZ_MAX_DECODED)
        return 0;
    /* the frame in a buffer of its own exact size, so that ASan sees a read past it */
    size_t n = size - 3;
    uint8_t *frame = malloc(n), *out = malloc(expect ? expect : 1); /* exact: ASan sees a write past it */
    if (!frame || !out)
        abort();
    memcpy(frame, data + 3, n);
    /* what the codec checks first (codec_zstd_prep): the frame's header and
     * block sizes, a content size (hdf5plugin's filter sizes its output by it) */
    gds_u64 det;
    if (gds_zstd_frame_check(frame, n, expect, 1, &det) == 0 && zb_host_decode(frame, n, expect, out, NULL, NULL) == 0) {
        frames_taken++;
        bytes_t b = {frame, n}, back = {0};
        if (!ref_unzstd(&b, &back) || back.n != expect || memcmp(back.p, out, expect) != 0) {
            fprintf(stderr, "a frame of %zu bytes taken block by block (%zu decoded), but libzstd %s\n", n, expect,
                    back.p ? "decodes other bytes" : "refuses it");
            abort();
        }
        free(back.p);
    }
    free(frame);
    free(out);
    return 0;
}

#ifdef FUZZ_STANDALONE
/* libzstd's frames of six kinds of data, 0 B to 1 MiB, levels -5 to 19,
 * each behind its three size bytes, as files in dir. */
static int make_seeds(const char *dir)
{
    static const size_t sizes[] = {0, 100, 4096, 65536, 131073, 300000, 1048576};
    static const int levels[] = {-5, 1, 3, 9, 19};
    int made = 0;
    for (int kind = DATA_FLOAT_FIELD; kind <= DATA_MIXED; kind++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t v = 0; v < sizeof levels / sizeof levels[0]; v++) {
                size_t len = sizes[s];
                if (levels[v] == 19 && len > 300000)
                    continue; /* slow, and the other levels cover the large frames */
                uint8_t *src = malloc(len + 1);
                make_data((data_kind_t)kind, src, len, (unsigned)(len + 7 * v));
                bytes_t in = {src, len}, frame;
                if (!ref_zstd(&in, &frame, levels[v])) {
                    fprintf(stderr, "libzstd failed to compress %zu bytes\n", len);
                    return -1;
                }
                char path[4096];
                snprintf(path, sizeof path, "%s/kind%d-%zu-l%d", dir, kind, len, levels[v]);
                FILE *f = fopen(path, "wb");
                uint8_t head[3] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16)};
                if (!f || fwrite(head, 1, 3, f) != 3 || fwrite(frame.p, 1, frame.n, f) != frame.n || fclose(f) != 0) {
                    perror(path);
                    return -1;
                }
                free(frame.p);
                free(src);
                made++;
            }
    printf("%d seeds in %s\n", made, dir);
    return 0;
}

int main(int argc, char **argv)
{
    fuzz_need_ref(&ref.zstd, "libzstd (libzstd.so.1)");
    if (argc == 3 && strcmp(argv[1], "--make-seeds") == 0)
        return make_seeds(argv[2]) == 0 ? 0 : 1;
    return fuzz_replay(argc, argv, "--all-taken", &frames_taken, "taken block by block and equal to libzstd's");
}
#endif
