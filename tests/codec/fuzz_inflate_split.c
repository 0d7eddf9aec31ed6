/*
 * libFuzzer target: Deflate decoded in segments (src/codec/inflate_split.h)
 * on bytes nobody chose, as the codec's kernels run it (find the starts,
 * decode, mend, chain, resolve). The segments must never read or write out
 * of bounds (run it under ASan and UBSan), and a stream they make up must be
 * one zlib's inflate decodes to the same bytes. Input: two bytes giving the
 * expected size (512-byte steps up to 256 KiB), one choosing the segments'
 * size (small ones, so that a short input has many), then the raw stream.
 *
 *   cmake -S tests/codec -B build/fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DH5GDS_FUZZ=ON
 *   ninja -C build/fuzz fuzz_inflate_split
 *   python3 tests/codec/fuzz_seeds.py inflate build/fuzz-inflate-seeds
 *   build/fuzz/fuzz_inflate_split -max_len=70000 build/fuzz-inflate-corpus build/fuzz-inflate-seeds
 *
 * (-max_len at least the largest seed: libFuzzer cuts longer inputs.)
 *
 * Built with FUZZ_STANDALONE (any compiler) it replays files and folders of
 * inputs instead: the CTest codec_inflate_split_seeds runs it over the seeds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_replay.h"
#include "is_host.h"

static const size_t segment_sizes[4] = {64, 256, 1024, IS_SEGMENT_BYTES};
static size_t inputs_made_up; /* the standalone replay's count */

/* Whether zlib's inflate (dlopen'ed: codec_ref.h) decodes the raw stream
 * p[0, n) to exactly the `expect` bytes of out: the stream wrapped as HDF5's
 * deflate filter stores it, with the Adler-32 of out. */
static bool zlib_decodes_to(const uint8_t *p, size_t n, const uint8_t *out, size_t expect)
{
    bytes_t in = bytes_new(n + 6), z = {NULL, 0};
    uint32_t adler = ref_adler32(out, expect);
    in.p[0] = 0x78;
    in.p[1] = 0x9C;
    memcpy(in.p + 2, p, n);
    for (int k = 0; k < 4; k++)
        in.p[2 + n + k] = (uint8_t)(adler >> (24 - 8 * k));
    bool same = ref_inflate(&in, &z, expect) && memcmp(z.p, out, expect) == 0;
    free(in.p);
    free(z.p);
    return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_need_ref(&ref.z, "zlib (libz.so.1)");
    if (size < 4)
        return 0;
    size_t expect = ((size_t)(data[0] | data[1] << 8) % 512 + 1) * 512;
    size_t per = segment_sizes[data[2] % 4];
    const uint8_t *p = data + 3;
    size_t n = size - 3;
    uint8_t *out = malloc(expect);
    if (!out)
        abort();
    split_result_t r = split_inflate(p, n, expect, per, out);
    if (r.made_up) {
        /* the stream as far as the segments read it: zlib reads the Adler-32 right after */
        size_t used = (size_t)((r.end + 7) / 8);
        inputs_made_up++;
        if (!zlib_decodes_to(p, used, out, expect)) {
            fprintf(stderr, "made up by the segments (%zu bytes from %zu stored, %u segments of %zu), but zlib decodes "
                    "other bytes or refuses the stream\n", expect, used, r.segments, per);
            abort();
        }
    }
    free(out);
    return 0;
}

#ifdef FUZZ_STANDALONE
int main(int argc, char **argv)
{
    return fuzz_replay(argc, argv, "--all-made-up", &inputs_made_up, "made up by the segments and equal to zlib's");
}
#endif
