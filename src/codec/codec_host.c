/* The CPU decode of whole chunks; see host_codec.h. */
#include "host_codec.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "codec_plan.h"
#include "codec_shared.h"

/* zlib's and libzstd's entry points, by their stable C ABI (no headers
 * needed to build). */
typedef int (*uncompress_fn)(unsigned char *dst, unsigned long *dst_len, const unsigned char *src,
                             unsigned long src_len);
typedef size_t (*zstd_decompress_fn)(void *dst, size_t cap, const void *src, size_t src_len);
typedef unsigned (*zstd_is_error_fn)(size_t code);
typedef const char *(*zstd_error_name_fn)(size_t code);

static struct {
    pthread_once_t once;
    uncompress_fn uncompress;
    zstd_decompress_fn zstd_decompress;
    zstd_is_error_fn zstd_is_error;
    zstd_error_name_fn zstd_error_name;
} libs = {.once = PTHREAD_ONCE_INIT};

static void *open_first(const char *const *names)
{
    for (; *names; names++) {
        void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    return NULL;
}

static void load_libs(void)
{
    static const char *const zlib_names[] = {"libz.so.1", "libz.so", NULL};
    static const char *const zstd_names[] = {"libzstd.so.1", "libzstd.so", NULL};
    void *z = open_first(zlib_names);
    if (z)
        *(void **)&libs.uncompress = dlsym(z, "uncompress");
    void *zs = open_first(zstd_names);
    if (zs) {
        *(void **)&libs.zstd_decompress = dlsym(zs, "ZSTD_decompress");
        *(void **)&libs.zstd_is_error = dlsym(zs, "ZSTD_isError");
        *(void **)&libs.zstd_error_name = dlsym(zs, "ZSTD_getErrorName");
        if (!libs.zstd_decompress || !libs.zstd_is_error || !libs.zstd_error_name)
            libs.zstd_decompress = NULL;
    }
}

int gds_codec_host_compressor(const gds_codec_pipeline_t *p, char *why, size_t why_size)
{
    pthread_once(&libs.once, load_libs);
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t n;
    if (gds_codec_plan_steps(p, 0, false, steps, &n, why, why_size) < 0)
        return -1;
    int compressor = 0;
    for (size_t i = 0; i < n; i++) {
        switch (steps[i].kind) {
        case GDS_STEP_FLETCHER32:
        case GDS_STEP_SHUFFLE: break;
        case GDS_STEP_DEFLATE:
            if (!libs.uncompress) {
                snprintf(why, why_size, "zlib (libz.so.1) is not installed");
                return -1;
            }
            compressor = GDS_FILTER_DEFLATE;
            break;
        case GDS_STEP_ZSTD:
            if (!libs.zstd_decompress) {
                snprintf(why, why_size, "libzstd (libzstd.so.1) is not installed");
                return -1;
            }
            compressor = GDS_FILTER_ZSTD;
            break;
        default:
            snprintf(why, why_size, "filter %u (%s) has no CPU decoder here", steps[i].pos,
                     gds_codec_filter_name(p->filter[steps[i].pos].id));
            return -1;
        }
    }
    return compressor;
}

size_t gds_codec_host_work_bytes(const gds_codec_pipeline_t *p)
{
    /* two buffers of the largest size between filters: the chunk and a
     * fletcher32 checksum per filter at most */
    return 2 * (p->chunk_bytes + 4 * GDS_CODEC_MAX_FILTERS);
}

unsigned gds_codec_host_fletcher32(const void *data, size_t n)
{
    /* Sums of big-endian 16-bit words (a last odd byte as a word's high
     * byte), folded into 16 bits every 360 words, before they can overflow
     * 32 bits, and at the end. */
    const unsigned char *b = data;
    uint32_t s1 = 0, s2 = 0;
    size_t words = n / 2;
    while (words) {
        size_t run = words > 360 ? 360 : words;
        words -= run;
        for (size_t i = 0; i < run; i++, b += 2) {
            s1 += (uint32_t)b[0] << 8 | b[1];
            s2 += s1;
        }
        s1 = (s1 & 0xffff) + (s1 >> 16);
        s2 = (s2 & 0xffff) + (s2 >> 16);
    }
    if (n % 2) {
        s1 += (uint32_t)b[0] << 8;
        s2 += s1;
        s1 = (s1 & 0xffff) + (s1 >> 16);
        s2 = (s2 & 0xffff) + (s2 >> 16);
    }
    s1 = (s1 & 0xffff) + (s1 >> 16);
    s2 = (s2 & 0xffff) + (s2 >> 16);
    return (unsigned)(s2 << 16 | s1);
}

static void unshuffle(unsigned char *out, const unsigned char *in, size_t len, size_t elem)
{
    size_t count = elem ? len / elem : 0;
    if (elem <= 1 || count <= 1) {
        memcpy(out, in, len);
        return;
    }
    for (size_t j = 0; j < elem; j++) {
        const unsigned char *plane = in + j * count;
        unsigned char *o = out + j;
        for (size_t i = 0; i < count; i++, o += elem)
            *o = plane[i];
    }
    memcpy(out + count * elem, in + count * elem, len - count * elem); /* HDF5 leaves the rest as it is */
}

static int fail(gds_status_t *st, const gds_codec_pipeline_t *p, const gds_codec_step_t *s, unsigned reason,
                uint64_t detail)
{
    char text[200];
    gds_codec_error_text(p, ((s->pos + 1) << 8) | reason, detail, text, sizeof text);
    gds_status_set(st, EBADMSG, "%s", text);
    return -1;
}

int gds_codec_host_decode(const gds_codec_pipeline_t *p, unsigned mask, const void *src, size_t src_bytes, void *dst,
                          void *work, gds_status_t *st)
{
    pthread_once(&libs.once, load_libs);
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t n;
    char why[160] = "";
    if (gds_codec_plan_steps(p, mask, false, steps, &n, why, sizeof why) < 0) {
        gds_status_set(st, EOPNOTSUPP, "%s", why);
        return -1;
    }
    /* the size entering each step when the chunk was written */
    size_t in_size[GDS_CODEC_MAX_FILTERS], size = p->chunk_bytes;
    for (size_t i = 0; i < n; i++) {
        in_size[i] = size;
        if (size != GDS_SIZE_UNKNOWN)
            size = gds_codec_step_forward(&steps[i], size);
    }
    size_t half = gds_codec_host_work_bytes(p) / 2;
    unsigned char *buf[2] = {work, (unsigned char *)work + half};
    const unsigned char *cur = src;
    size_t len = src_bytes;
    int next = 0; /* the work buffer the next step writes */
    for (size_t k = n; k-- > 0;) {
        const gds_codec_step_t *s = &steps[k];
        size_t want = in_size[k]; /* what this step's decode gives */
        unsigned char *out = buf[next];
        if (s->kind != GDS_STEP_FLETCHER32 && s->kind != GDS_STEP_SHUFFLE && (want == GDS_SIZE_UNKNOWN || want > half))
            return fail(st, p, s, GDS_KERR_PARAM, want);
        switch (s->kind) {
        case GDS_STEP_FLETCHER32: {
            if (len < 4)
                return fail(st, p, s, GDS_KERR_SHORT, len);
            len -= 4;
            if (s->verify) {
                const unsigned char *t = cur + len;
                uint32_t stored = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
                uint32_t f = gds_codec_host_fletcher32(cur, len);
                uint32_t swapped = ((f & 0x00ff00ffu) << 8) | ((f >> 8) & 0x00ff00ffu); /* HDF5 < 1.6.3's files */
                if (stored != f && stored != swapped)
                    return fail(st, p, s, GDS_KERR_CHECKSUM, (uint64_t)stored << 32 | f);
            }
            continue; /* the data stays where it is */
        }
        case GDS_STEP_SHUFFLE:
            if (len > half)
                return fail(st, p, s, GDS_KERR_SIZE, len);
            unshuffle(out, cur, len, s->elem);
            break;
        case GDS_STEP_DEFLATE: {
            unsigned long got = (unsigned long)want;
            int rc = libs.uncompress(out, &got, cur, (unsigned long)len);
            if (rc == -5) /* Z_BUF_ERROR: more output than the chunk holds */
                return fail(st, p, s, GDS_KERR_SIZE, (uint64_t)want + 1);
            if (rc != 0) {
                gds_status_set(st, EBADMSG, "filter %u (deflate): corrupt data: zlib could not decompress it (%s)",
                               s->pos, rc == -3 ? "data error" : rc == -4 ? "out of memory" : "error");
                return -1;
            }
            if (got != want)
                return fail(st, p, s, GDS_KERR_SIZE, got);
            len = got;
            break;
        }
        case GDS_STEP_ZSTD: {
            size_t got = libs.zstd_decompress(out, want, cur, len);
            if (libs.zstd_is_error(got)) {
                gds_status_set(st, EBADMSG, "filter %u (zstd): corrupt data: libzstd could not decompress it (%s)",
                               s->pos, libs.zstd_error_name(got));
                return -1;
            }
            if (got != want)
                return fail(st, p, s, GDS_KERR_SIZE, got);
            len = got;
            break;
        }
        default:
            gds_status_set(st, EOPNOTSUPP, "filter %u (%s) has no CPU decoder here", s->pos,
                           gds_codec_filter_name(p->filter[s->pos].id));
            return -1;
        }
        cur = out;
        next ^= 1;
    }
    if (len != p->chunk_bytes) {
        gds_status_set(st, EBADMSG, "pipeline: corrupt data: decoded to %zu bytes, not the %zu of a chunk", len,
                       p->chunk_bytes);
        return -1;
    }
    memcpy(dst, cur, len);
    return 0;
}
