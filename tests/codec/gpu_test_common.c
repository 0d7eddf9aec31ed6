/*
 * What the families of test_codec_gpu share (gpu_test_common.h): the CUDA
 * API, codec and stream, batches of chunks, pipelines, the chunk manglers;
 * and the program's check counters (tests/check.h).
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "gpu_test_common.h"

#include "codec_shared.h"

int test_failures;
int test_checks;

const gds_cuda_api_t *cu;
gds_codec_t *codec;
CUstream stream;

double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

CUdeviceptr dalloc(size_t n)
{
    CUdeviceptr p;
    GPU_OK(cu->MemAlloc(&p, n ? n : 1));
    return p;
}

/* codec_ref.h's table of libraries is a static: this file's copy, which
 * batch_make's encoders use (main loads it with its own). */
void gpu_common_ref_load(void) { ref_load(); }

/* ---- a batch of chunks on the device ---- */

/* Uploads the stored chunks at odd offsets (alignment 1..3) and makes room for the decoded ones. */
void batch_upload(batch_t *b, size_t chunk_bytes, bool odd_dst)
{
    size_t total = 0;
    for (size_t i = 0; i < b->n; i++)
        total += b->stored[i].n + 64;
    b->src_buf = dalloc(total);
    b->dst_buf = dalloc(b->n * (chunk_bytes + 8));
    b->chunks = calloc(b->n, sizeof *b->chunks);
    size_t at = 0;
    for (size_t i = 0; i < b->n; i++) {
        at = (at + 15) / 16 * 16 + i % 4;
        GPU_OK(cu->MemcpyHtoD(b->src_buf + at, b->stored[i].p, b->stored[i].n));
        b->chunks[i].src = (const void *)(uintptr_t)(b->src_buf + at);
        b->chunks[i].src_bytes = b->stored[i].n;
        b->chunks[i].filter_mask = b->mask[i];
        b->chunks[i].dst = (void *)(uintptr_t)(b->dst_buf + i * (chunk_bytes + 8) + (odd_dst ? i % 8 : 0));
        at += b->stored[i].n;
    }
    /* A copy from pageable memory may return before its DMA lands, on the
     * legacy stream, which the codec's non-blocking streams do not follow. */
    GPU_OK(cu->CtxSynchronize());
}

void batch_free(batch_t *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->data[i].p);
        free(b->stored[i].p);
    }
    free(b->data);
    free(b->stored);
    free(b->mask);
    free(b->chunks);
    if (b->src_buf)
        cu->MemFree(b->src_buf);
    if (b->dst_buf)
        cu->MemFree(b->dst_buf);
    memset(b, 0, sizeof *b);
}

/* Chunks whose decoded bytes differ from the data (skip = a chunk expected to fail). */
size_t batch_compare(const batch_t *b, size_t chunk_bytes, size_t skip)
{
    size_t bad = 0;
    unsigned char *got = malloc(chunk_bytes);
    for (size_t i = 0; i < b->n; i++) {
        if (i == skip)
            continue;
        GPU_OK(cu->MemcpyDtoH(got, (CUdeviceptr)(uintptr_t)b->chunks[i].dst, chunk_bytes));
        if (memcmp(got, b->data[i].p, chunk_bytes)) {
            size_t at = 0, ndiff = 0, last = 0;
            while (got[at] == b->data[i].p[at])
                at++;
            for (size_t k = at; k < chunk_bytes; k++)
                if (got[k] != b->data[i].p[k]) {
                    ndiff++;
                    last = k;
                }
            if (bad++ < 3)
                fprintf(stderr, "  chunk %zu differs first at byte %zu (got 0x%02x, want 0x%02x), last at %zu, %zu of %zu bytes\n",
                        i, at, got[at], b->data[i].p[at], last, ndiff, chunk_bytes);
        }
    }
    free(got);
    return bad;
}

/* Parallel CPU encoding of a batch (the references are slow on big batches). */
typedef struct encode_work {
    const gds_codec_pipeline_t *p;
    batch_t *b;
    size_t next;
    bool ok;
    pthread_mutex_t lock;
} encode_work_t;

static void *encode_worker(void *arg)
{
    encode_work_t *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        size_t i = w->next++;
        pthread_mutex_unlock(&w->lock);
        if (i >= w->b->n)
            return NULL;
        if (!ref_encode(w->p, w->b->mask[i], &w->b->data[i], &w->b->stored[i])) {
            pthread_mutex_lock(&w->lock);
            w->ok = false;
            pthread_mutex_unlock(&w->lock);
        }
    }
}

/* Builds n chunks of `kind` data, encoded with the CPU references; false when a library is missing. */
bool batch_make(batch_t *b, const gds_codec_pipeline_t *p, data_kind_t kind, size_t n, const unsigned *masks)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->data = calloc(n, sizeof *b->data);
    b->stored = calloc(n, sizeof *b->stored);
    b->mask = calloc(n, sizeof *b->mask);
    for (size_t i = 0; i < n; i++) {
        b->data[i] = bytes_new(p->chunk_bytes);
        make_data(kind, b->data[i].p, p->chunk_bytes, (unsigned)(i * 7 + kind));
        b->mask[i] = masks ? masks[i % 4] : 0;
    }
    encode_work_t w = {p, b, 0, true, PTHREAD_MUTEX_INITIALIZER};
    pthread_t th[16];
    int nth = n > 16 ? 16 : (int)n;
    for (int t = 0; t < nth; t++)
        pthread_create(&th[t], NULL, encode_worker, &w);
    for (int t = 0; t < nth; t++)
        pthread_join(th[t], NULL);
    return w.ok;
}

/* ---- chunk manglers (the corrupt and hostile cases) ---- */

/* codec_ref.h's random state is a static, one per file: the manglers draw
 * from this file's, which batch_make leaves after its last chunk's data
 * (as a corrupt case finds it), or mangle_seed sets (a hostile case). */
void mangle_seed(uint64_t seed) { rng_state = seed; }

void flip_middle(bytes_t *c) { c->p[c->n / 2] ^= 0x5a; }
void flip_zlib_header(bytes_t *c) { c->p[0] = 0x79; }
void zlib_dictionary(bytes_t *c)
{
    unsigned flg = (c->p[1] & 0xe0u) | 0x20u; /* FDICT, then the check bits again */
    flg |= (31 - ((unsigned)(c->p[0] << 8) | flg) % 31) % 31;
    c->p[1] = (unsigned char)flg;
}
void flip_last(bytes_t *c) { c->p[c->n - 1] ^= 0x01; }
void truncate_half(bytes_t *c) { c->n /= 2; }
void truncate_tiny(bytes_t *c) { c->n = 3; }
void pad_after_stream(bytes_t *c)
{
    unsigned char *p = realloc(c->p, c->n + 16);
    if (!p)
        abort();
    for (int i = 0; i < 16; i++)
        p[c->n + (size_t)i] = (unsigned char)(i + 1);
    c->p = p;
    c->n += 16;
}
void truncate_last(bytes_t *c) { c->n -= 1; }
void bshuf_zstd_magic(bytes_t *c) { c->p[16] ^= 0xff; }
void swap_checksum(bytes_t *c)
{
    unsigned char *t = c->p + c->n - 4, a = t[0], x = t[2];
    t[0] = t[1];
    t[1] = a;
    t[2] = t[3];
    t[3] = x;
}
void lz4_block_size_huge(bytes_t *c) { put_be(c->p + 12, 0x7fffff00u, 4); }
void lz4_block_size_short(bytes_t *c) { put_be(c->p + 12, get_be(c->p + 12, 4) - 1, 4); }
void header_orig_size(bytes_t *c) { put_be(c->p, get_be(c->p, 8) + 8, 8); }
void bshuf_block_negative(bytes_t *c) { put_be(c->p + 12, 0xffffffffu, 4); }
void bshuf_block_size_zero(bytes_t *c) { put_be(c->p + 8, 12, 4); }
void zstd_magic(bytes_t *c) { c->p[0] ^= 0xff; }
/* The frame header's content size (ZSTD_compress writes it after the
 * window descriptor, or at byte 5 in a single-segment frame). */
void zstd_content_size(bytes_t *c)
{
    unsigned fhd = c->p[4], single = (fhd >> 5) & 1;
    c->p[5 + !single] ^= 0x01;
}
void zstd_reserved_bit(bytes_t *c) { c->p[4] |= 0x08; }
/* Position of the first zstd block's content and its size. */
static size_t zstd_first_block(const bytes_t *c, size_t *bsize)
{
    unsigned fhd = c->p[4], single = (fhd >> 5) & 1, fcs = fhd >> 6, did = fhd & 3;
    size_t pos = 5 + !single + (did == 3 ? 4 : did) + (fcs ? (1u << fcs) : single);
    unsigned bh = c->p[pos] | (c->p[pos + 1] << 8) | (c->p[pos + 2] << 16);
    *bsize = bh >> 3;
    return pos + 3;
}
void zstd_block_garbage(bytes_t *c)
{
    size_t bsize, at = zstd_first_block(c, &bsize);
    for (size_t i = at + bsize / 4; i < at + bsize * 3 / 4; i++)
        c->p[i] = (unsigned char)rng();
}
/* Garbage inside each LZ4 block of HDF5's framing, sizes kept. */
void lz4h5_block_garbage(bytes_t *c)
{
    size_t pos = 12;
    while (pos + 4 <= c->n) {
        size_t cs = get_be(c->p + pos, 4);
        pos += 4;
        if (cs > c->n - pos)
            break;
        for (size_t i = pos + cs / 4; i < pos + cs * 3 / 4; i++)
            c->p[i] = (unsigned char)rng();
        pos += cs;
    }
}
/* The same inside bitshuffle's blocks (LZ4 or zstd frames). */
void bshuf_block_garbage(bytes_t *c) { lz4h5_block_garbage(c); }
void garbage(bytes_t *c)
{
    for (size_t i = 0; i < c->n; i++)
        c->p[i] = (unsigned char)rng();
}
void garbage_keep_head(bytes_t *c)
{
    for (size_t i = 16; i < c->n; i++)
        c->p[i] = (unsigned char)rng();
}

/* Blosc chunks: header fields (LE) and the first block's first stream. */
void blosc_version(bytes_t *c) { c->p[0] = 3; }
void blosc_nbytes(bytes_t *c) { put_le32(c->p + 4, get_le32(c->p + 4) + 4); }
void blosc_block_start(bytes_t *c) { put_le32(c->p + 16, (uint32_t)c->n - 2); }
void blosc_stream_size(bytes_t *c) { put_le32(c->p + get_le32(c->p + 16), 0x7ffffff0u); }
void blosc_blosclz(bytes_t *c) { c->p[2] = (unsigned char)(c->p[2] & 0x1f); } /* compressor format 0 */
/* Garbage in the middle of every compressed stream of every block, sizes
 * kept (raw streams left: nothing could tell). */
void blosc_stream_garbage(bytes_t *c)
{
    uint32_t flags = c->p[2], ts = c->p[3], nbytes = get_le32(c->p + 4), bs = get_le32(c->p + 8);
    if (flags & GDS_BLOSC_MEMCPYED)
        return;
    for (uint32_t k = 0; k < (nbytes + bs - 1) / bs; k++) {
        bool partial = (uint64_t)(k + 1) * bs > nbytes;
        uint32_t ns = gds_blosc_nsplits(flags, ts, bs, partial), neblock = (partial ? nbytes - k * bs : bs) / ns;
        size_t at = get_le32(c->p + 16 + 4 * k);
        for (uint32_t j = 0; j < ns && at + 4 <= c->n; j++) {
            size_t cs = get_le32(c->p + at);
            if (cs > c->n - at - 4)
                break;
            for (size_t i = at + 4 + cs / 4; cs != neblock && i < at + 4 + cs * 3 / 4; i++)
                c->p[i] = (unsigned char)rng();
            at += 4 + cs;
        }
    }
}

/* ---- pipelines ---- */

gds_codec_pipeline_t pipe_new(size_t chunk_bytes, size_t type_size)
{
    gds_codec_pipeline_t p;
    memset(&p, 0, sizeof p);
    p.chunk_bytes = chunk_bytes;
    p.type_size = type_size;
    return p;
}

const unsigned CD1[] = {1}, CD2[] = {2}, CD4[] = {4}, CD6[] = {6}, CD8[] = {8}, CD0[] = {0}, CD3[] = {3};
const unsigned CD64K[] = {65536};
