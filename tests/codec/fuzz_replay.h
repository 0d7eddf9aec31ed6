/*
 * The codec's libFuzzer targets (fuzz_*.c) built without libFuzzer
 * (FUZZ_STANDALONE, any compiler): each file named, and each file in a
 * folder named, is one input, so that a corpus is replayed or a crash
 * reproduced. The target counts the inputs it accepted; with `all_flag` on
 * the command line, the replay fails unless it accepted every one (seeds).
 * Both kinds of build load the reference library they compare with here.
 */
#ifndef H5GDS_FUZZ_REPLAY_H
#define H5GDS_FUZZ_REPLAY_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A reference library is missing: CTest's skip code in a replay; under
 * libFuzzer, whose crashes exit 77, a plain failure. */
#ifdef FUZZ_STANDALONE
#define FUZZ_SKIPPED 77
#else
#define FUZZ_SKIPPED 1
#endif

/* The reference library whose flag in codec_ref.h's `ref` is *have
 * (ref.z, ref.zstd), loaded; without it there is nothing to compare with. */
static inline void fuzz_need_ref(const bool *have, const char *lib)
{
    if (!*have)
        ref_load();
    if (!*have) {
        fprintf(stderr, "%s cannot be loaded: nothing to compare with\n", lib);
        exit(FUZZ_SKIPPED);
    }
}

#ifdef FUZZ_STANDALONE
static int fuzz_replay_file(const char *path, size_t *replayed)
{
    FILE *f = fopen(path, "rb");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    uint8_t *buf = size >= 0 ? malloc(size ? (size_t)size : 1) : NULL;
    if (!f || !buf || fseek(f, 0, SEEK_SET) != 0 || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        perror(path);
        if (f)
            fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)size);
    free(buf);
    (*replayed)++;
    return 0;
}

/* Replays argv's files and folders (arguments starting with "--" are the
 * caller's); `accepted`: the target's count; `what`: what accepting is. */
static int fuzz_replay(int argc, char **argv, const char *all_flag, const size_t *accepted, const char *what)
{
    int all = 0;
    size_t replayed = 0;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) == 0) {
            all |= strcmp(argv[i], all_flag) == 0;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            if (fuzz_replay_file(argv[i], &replayed) < 0)
                return 1;
            continue;
        }
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            char path[4096];
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            if (fuzz_replay_file(path, &replayed) < 0) {
                closedir(d);
                return 1;
            }
        }
        closedir(d);
    }
    printf("%zu inputs, %zu %s\n", replayed, *accepted, what);
    if (replayed == 0 || (all && *accepted != replayed)) {
        printf("FAILED: %s\n", replayed ? "not every input accepted" : "no inputs");
        return 1;
    }
    return 0;
}
#endif

#endif
