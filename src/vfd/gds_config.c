/* See gds_config.h. */
#include "gds_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gds_error.h"
#include "gds_hdf5.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define TiB ((uint64_t)1 << 40)

/* Pinned memory the staging rings may take in all (threads x count x size). */
#define GDS_MAX_PINNED_BYTES (64 * GiB)

void gds_config_defaults(H5FD_gds_config_t *c)
{
    memset(c, 0, sizeof *c);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    c->version = H5FD_GDS_CONFIG_VERSION;
    c->mode = H5FD_GDS_MODE_AUTO;
    (void)ncpu;
    /* auto (0): measured for each file system and GPU on first use of device
     * memory (src/engine/autotune.h); host data uses cores (4..16) threads
     * and 32 MiB blocks, the values the H100 sweep found best. */
    c->threads = 0;
    c->io_block_size = 0;
    c->alignment = 4096;
    c->fs_block_size = 4096;
    c->direct = H5FD_GDS_SWITCH_AUTO;
    c->staging_size = 16 * MiB;
    c->staging_count = 2; /* double buffering; pinned = threads x 2 x 16 MiB */
    c->parallel_threshold = 32 * MiB;
    c->stats = 0;
    c->log = 0;
    c->fsync_on_flush = 0;
    c->register_buffers = 0;
}

typedef enum key_kind { KEY_SIZE, KEY_COUNT, KEY_BOOL, KEY_MODE, KEY_SWITCH, KEY_WB_MEMORY } key_kind_t;

typedef struct key_spec {
    const char *name;
    key_kind_t kind;
    size_t offset;
    uint64_t min, max;
    bool power_of_two;
    bool may_be_auto; /* "auto" is stored as 0 */
} key_spec_t;

#define F(field) offsetof(H5FD_gds_config_t, field)
static const key_spec_t keys[] = {
    {"mode", KEY_MODE, F(mode), 0, 0, false, false},
    {"threads", KEY_COUNT, F(threads), 1, 256, false, true},
    {"io_block_size", KEY_SIZE, F(io_block_size), 4 * KiB, 1 * GiB, false, true},
    {"alignment", KEY_SIZE, F(alignment), 1, 1 * MiB, true, false},
    {"fs_block_size", KEY_SIZE, F(fs_block_size), 512, 1 * MiB, true, false},
    {"direct", KEY_SWITCH, F(direct), 0, 0, false, false},
    {"staging_size", KEY_SIZE, F(staging_size), 4 * KiB, 1 * GiB, false, false},
    {"staging_count", KEY_COUNT, F(staging_count), 1, 16, false, false},
    {"parallel_threshold", KEY_SIZE, F(parallel_threshold), 0, 1 * TiB, false, false},
    {"stats", KEY_BOOL, F(stats), 0, 1, false, false},
    {"log", KEY_BOOL, F(log), 0, 1, false, false},
    {"fsync", KEY_BOOL, F(fsync_on_flush), 0, 1, false, false},
    {"register", KEY_BOOL, F(register_buffers), 0, 1, false, false},
    {"write_behind", KEY_SIZE, F(write_behind), 0, 1 * TiB, false, false},
    {"write_behind_memory", KEY_WB_MEMORY, F(write_behind_memory), 0, 0, false, false},
};
#undef F
#define NKEYS (sizeof keys / sizeof keys[0])

static const char *const mode_names[] = {"auto", "cufile", "staged", "posix"};
static const char *const switch_names[] = {"off", "on", "auto"};
static const char *const wb_memory_names[] = {"auto", "device", "host"};

static void report(const char *origin, const char *key, const char *value, const char *problem)
{
    GDS_ERROR(H5E_PLIST, H5E_BADVALUE, "invalid gds driver configuration (%s): %s%s%s'%s' %s", origin,
              key ? "key '" : "", key ? key : "", key ? "' = " : "", value, problem);
}

typedef enum size_parse { SIZE_OK, SIZE_BAD, SIZE_BITS } size_parse_t;

/* "8MiB", "4096", "1g": binary for K/M/G/T and KiB/MiB/GiB/TiB, decimal for
 * KB/MB/GB/TB (kB too); the prefix letter in either case. A lowercase "b"
 * (1Kb, 8mb, 64b) is refused: it reads as bits as often as bytes. */
static size_parse_t parse_size(const char *s, uint64_t *out)
{
    if (!isdigit((unsigned char)*s))
        return SIZE_BAD;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return SIZE_BAD;
    uint64_t mult = 1;
    if (*end) {
        size_t len = strlen(end);
        if (end[len - 1] == 'b')
            return SIZE_BITS;
        static const struct {
            const char *suffix;
            uint64_t mult;
        } units[] = {{"B", 1},           {"K", KiB},         {"KiB", KiB},        {"KB", 1000},
                     {"M", MiB},         {"MiB", MiB},       {"MB", 1000000},     {"G", GiB},
                     {"GiB", GiB},       {"GB", 1000000000}, {"T", TiB},          {"TiB", TiB},
                     {"TB", 1000000000000ULL}};
        bool found = false;
        /* Case-insensitive but for the final B (lowercase b was refused above). */
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (strcasecmp(end, units[i].suffix) == 0) {
                mult = units[i].mult;
                found = true;
            }
        if (!found)
            return SIZE_BAD;
    }
    if (v > UINT64_MAX / mult)
        return SIZE_BAD;
    *out = v * mult;
    return SIZE_OK;
}

static int lookup(const char *value, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(value, names[i]) == 0)
            return i;
    return -1;
}

static int parse_bool(const char *v)
{
    if (!strcasecmp(v, "on") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcmp(v, "1"))
        return 1;
    if (!strcasecmp(v, "off") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcmp(v, "0"))
        return 0;
    return -1;
}

static herr_t set_key(H5FD_gds_config_t *c, const key_spec_t *k, const char *value, const char *origin)
{
    char *field = (char *)c + k->offset;
    char problem[128];
    switch (k->kind) {
    case KEY_MODE: {
        int m = lookup(value, mode_names, 4);
        if (m < 0) {
            report(origin, k->name, value, "is not one of auto, cufile, staged, posix");
            return -1;
        }
        *(H5FD_gds_mode_t *)field = (H5FD_gds_mode_t)m;
        return 0;
    }
    case KEY_SWITCH: {
        int b = parse_bool(value);
        int m = b >= 0 ? b : lookup(value, switch_names, 3);
        if (m < 0) {
            report(origin, k->name, value, "is not one of on, off, auto");
            return -1;
        }
        *(H5FD_gds_switch_t *)field = (H5FD_gds_switch_t)m;
        return 0;
    }
    case KEY_WB_MEMORY: {
        int m = lookup(value, wb_memory_names, 3);
        if (m < 0) {
            report(origin, k->name, value, "is not one of auto, device, host");
            return -1;
        }
        *(int *)field = m;
        return 0;
    }
    case KEY_BOOL: {
        int b = parse_bool(value);
        if (b < 0) {
            report(origin, k->name, value, "is not on or off");
            return -1;
        }
        *(int *)field = b;
        return 0;
    }
    case KEY_COUNT:
    case KEY_SIZE: {
        if ((k->may_be_auto && !strcasecmp(value, "auto")) ||
            (k->offset == offsetof(H5FD_gds_config_t, write_behind) && !strcasecmp(value, "off"))) {
            if (k->kind == KEY_SIZE)
                *(size_t *)field = 0;
            else
                *(unsigned *)field = 0;
            return 0;
        }
        uint64_t v;
        size_parse_t parsed = parse_size(value, &v);
        if (k->kind == KEY_SIZE && parsed == SIZE_BITS) {
            report(origin, k->name, value,
                   "has a unit with a lowercase b, which can mean bits: write KB (1000 bytes) or KiB (1024)");
            return -1;
        }
        bool ok = parsed == SIZE_OK && (k->kind == KEY_SIZE || strspn(value, "0123456789") == strlen(value));
        if (!ok) {
            report(origin, k->name, value,
                   k->kind == KEY_SIZE ? "is not a size (e.g. 4096, 64KiB, 8MiB, 1GiB)" : "is not a whole number");
            return -1;
        }
        if (v < k->min || v > k->max) {
            snprintf(problem, sizeof problem, "is out of range (%llu..%llu)", (unsigned long long)k->min,
                     (unsigned long long)k->max);
            report(origin, k->name, value, problem);
            return -1;
        }
        if (k->power_of_two && (v & (v - 1)) != 0) {
            report(origin, k->name, value, "is not a power of two");
            return -1;
        }
        if (k->kind == KEY_SIZE)
            *(size_t *)field = (size_t)v;
        else
            *(unsigned *)field = (unsigned)v;
        return 0;
    }
    }
    return -1;
}

herr_t gds_config_validate(const H5FD_gds_config_t *c)
{
    char value[32];
    if (!c) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "configuration pointer is NULL");
        return -1;
    }
    if (c->version != H5FD_GDS_CONFIG_VERSION) {
        GDS_ERROR(H5E_PLIST, H5E_BADVALUE,
                  "gds configuration version %u is not supported (this library has version %u; "
                  "initialise the struct with H5FD_gds_config_init)",
                  c->version, H5FD_GDS_CONFIG_VERSION);
        return -1;
    }
    /* Re-run every field through the same checks the parser applies. */
    H5FD_gds_config_t scratch = *c;
    for (size_t i = 0; i < NKEYS; i++) {
        const key_spec_t *k = &keys[i];
        const char *field = (const char *)c + k->offset;
        switch (k->kind) {
        case KEY_MODE:
            if ((unsigned)*(const H5FD_gds_mode_t *)field > H5FD_GDS_MODE_POSIX) {
                snprintf(value, sizeof value, "%d", (int)*(const H5FD_gds_mode_t *)field);
                report("configuration struct", k->name, value, "is not a valid mode");
                return -1;
            }
            break;
        case KEY_SWITCH:
            if ((unsigned)*(const H5FD_gds_switch_t *)field > H5FD_GDS_SWITCH_AUTO) {
                snprintf(value, sizeof value, "%d", (int)*(const H5FD_gds_switch_t *)field);
                report("configuration struct", k->name, value, "is not on, off or auto");
                return -1;
            }
            break;
        case KEY_WB_MEMORY:
            if ((unsigned)*(const int *)field > 2) {
                snprintf(value, sizeof value, "%d", *(const int *)field);
                report("configuration struct", k->name, value, "is not auto, device or host");
                return -1;
            }
            break;
        case KEY_BOOL:
            snprintf(value, sizeof value, "%d", *(const int *)field);
            if (set_key(&scratch, k, value, "configuration struct") < 0)
                return -1;
            break;
        case KEY_COUNT:
            snprintf(value, sizeof value, "%u", *(const unsigned *)field);
            if (k->may_be_auto && *(const unsigned *)field == 0)
                snprintf(value, sizeof value, "auto");
            if (set_key(&scratch, k, value, "configuration struct") < 0)
                return -1;
            break;
        case KEY_SIZE:
            snprintf(value, sizeof value, "%zu", *(const size_t *)field);
            if (k->may_be_auto && *(const size_t *)field == 0)
                snprintf(value, sizeof value, "auto");
            if (set_key(&scratch, k, value, "configuration struct") < 0)
                return -1;
            break;
        }
    }
    gds_engine_settings_t engine;
    gds_config_to_engine(c, &engine, NULL, 0);
    /* auto threads: at most 16 are chosen */
    uint64_t pinned = (uint64_t)(c->threads ? c->threads : 16) * c->staging_count * engine.staging_size;
    if (pinned > GDS_MAX_PINNED_BYTES) {
        GDS_ERROR(H5E_PLIST, H5E_BADVALUE,
                  "invalid gds driver configuration: threads (%u) x staging_count (%u) x staging_size (%zu) = "
                  "%llu bytes of pinned memory, more than the limit of %llu",
                  c->threads, c->staging_count, engine.staging_size, (unsigned long long)pinned,
                  (unsigned long long)GDS_MAX_PINNED_BYTES);
        return -1;
    }
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

herr_t gds_config_apply(H5FD_gds_config_t *config, const char *text, const char *origin)
{
    if (!text)
        return 0;
    char *copy = strdup(text);
    if (!copy) {
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory parsing the gds configuration");
        return -1;
    }
    H5FD_gds_config_t next = *config;
    herr_t ret = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        item = trim(item);
        if (!*item)
            continue;
        char *eq = strchr(item, '=');
        if (!eq) {
            report(origin, NULL, item, "is not of the form key=value");
            ret = -1;
            break;
        }
        *eq = '\0';
        char *key = trim(item), *value = trim(eq + 1);
        const key_spec_t *spec = NULL;
        for (size_t i = 0; i < NKEYS; i++)
            if (strcasecmp(key, keys[i].name) == 0)
                spec = &keys[i];
        if (!spec) {
            char problem[400];
            snprintf(problem, sizeof problem,
                     "has an unknown key (known: mode, threads, io_block_size, alignment, fs_block_size, direct, "
                     "staging_size, staging_count, parallel_threshold, stats, log, fsync, register, write_behind, "
                     "write_behind_memory)");
            report(origin, key, value, problem);
            ret = -1;
            break;
        }
        if (!*value) {
            report(origin, spec->name, value, "has no value");
            ret = -1;
            break;
        }
        if ((ret = set_key(&next, spec, value, origin)) < 0)
            break;
    }
    free(copy);
    if (ret == 0 && (ret = gds_config_validate(&next)) == 0)
        *config = next;
    return ret;
}

static size_t round_up(size_t v, size_t multiple)
{
    return (v + multiple - 1) / multiple * multiple;
}

/* Appends "key A -> B (why)" to the note. */
static void note_rounding(char *note, size_t size, const char *key, size_t from, size_t to, const char *why)
{
    if (!note || from == to)
        return;
    size_t used = strlen(note);
    snprintf(note + used, used < size ? size - used : 0, "%s%s %zu rounded up to %zu (%s)", used ? "; " : "", key,
             from, to, why);
}

void gds_config_to_engine(const H5FD_gds_config_t *c, gds_engine_settings_t *s, char *note, size_t note_size)
{
    memset(s, 0, sizeof *s);
    if (note && note_size)
        note[0] = '\0';
    /* What the device path needs exactly: O_DIRECT blocks (fs_block_size,
     * both powers of two) in every block a worker claims, and staging slots
     * that hold whole blocks at the staging alignment. */
    size_t slot_align = c->alignment > c->fs_block_size ? c->alignment : c->fs_block_size;
    s->mode = (gds_mode_t)c->mode; /* same values: checked in gds_transfer.c */
    s->threads = c->threads;
    s->io_block_size = round_up(c->io_block_size, c->fs_block_size); /* 0 (auto) stays 0 */
    note_rounding(note, note_size, "io_block_size", c->io_block_size, s->io_block_size, "a multiple of fs_block_size");
    s->alignment = slot_align;
    note_rounding(note, note_size, "alignment", c->alignment, s->alignment, "at least fs_block_size, for O_DIRECT");
    s->fs_block_size = c->fs_block_size;
    s->direct = (gds_switch_t)c->direct;
    s->staging_size = round_up(c->staging_size, slot_align);
    note_rounding(note, note_size, "staging_size", c->staging_size, s->staging_size,
                  "a multiple of alignment and fs_block_size");
    s->staging_count = c->staging_count;
    s->parallel_threshold = c->parallel_threshold;
    s->log = c->log != 0;
    s->register_buffers = c->register_buffers != 0;
    s->write_behind = c->write_behind;
    s->write_behind_memory = c->write_behind_memory;
}

/* ---- public API ---- */

herr_t gds_config_init(H5FD_gds_config_t *config)
{
    if (!config) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "configuration pointer is NULL");
        return -1;
    }
    H5FD_gds_config_t c;
    gds_config_defaults(&c);
    if (gds_config_apply(&c, getenv(H5GDS_CONFIG_ENV), "environment variable " H5GDS_CONFIG_ENV) < 0)
        return -1;
    *config = c;
    return 0;
}

herr_t H5FD_gds_config_init(H5FD_gds_config_t *config)
{
    gds_api_enter();
    return gds_api_leave(gds_config_init(config) < 0) ? -1 : 0;
}

herr_t H5FD_gds_config_parse(H5FD_gds_config_t *config, const char *text)
{
    gds_api_enter();
    if (!config || !text) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "NULL argument to H5FD_gds_config_parse");
        return gds_api_leave(true) ? -1 : 0;
    }
    return gds_api_leave(gds_config_apply(config, text, "configuration string") < 0) ? -1 : 0;
}

herr_t H5FD_gds_config_format(const H5FD_gds_config_t *c, char *buf, size_t size)
{
    gds_api_enter();
    if (!c || !buf) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "NULL argument to H5FD_gds_config_format");
        return gds_api_leave(true) ? -1 : 0;
    }
    char threads[16] = "auto", block[32] = "auto";
    if (c->threads)
        snprintf(threads, sizeof threads, "%u", c->threads);
    if (c->io_block_size)
        snprintf(block, sizeof block, "%zu", c->io_block_size);
    int n = snprintf(buf, size,
                     "mode=%s,threads=%s,io_block_size=%s,alignment=%zu,fs_block_size=%zu,direct=%s,"
                     "staging_size=%zu,staging_count=%u,parallel_threshold=%zu,stats=%s,log=%s,fsync=%s,register=%s,"
                     "write_behind=%zu,write_behind_memory=%s",
                     (unsigned)c->mode <= H5FD_GDS_MODE_POSIX ? mode_names[c->mode] : "?", threads, block,
                     c->alignment, c->fs_block_size,
                     (unsigned)c->direct <= H5FD_GDS_SWITCH_AUTO ? switch_names[c->direct] : "?", c->staging_size,
                     c->staging_count, c->parallel_threshold, c->stats ? "on" : "off", c->log ? "on" : "off",
                     c->fsync_on_flush ? "on" : "off", c->register_buffers ? "on" : "off", c->write_behind,
                     (unsigned)c->write_behind_memory <= 2 ? wb_memory_names[c->write_behind_memory] : "?");
    if (n < 0 || (size_t)n >= size) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "buffer of %zu bytes too small for the configuration string", size);
        return gds_api_leave(true) ? -1 : 0;
    }
    return gds_api_leave(false) ? -1 : 0;
}

/* The configuration on a fapl; defaults (+ environment and, on 1.14+, the
 * HDF5_DRIVER_CONFIG string) when the driver was selected without one. Used
 * by both drivers (gds and gds_mpio) at open and by their fapl queries. */
herr_t gds_config_from_fapl(hid_t fapl_id, H5FD_gds_config_t *config, bool *from_info)
{
    const H5FD_gds_config_t *info = NULL;
    /* "No driver info" is an error to H5Pget_driver_info, but not to us. */
    H5E_BEGIN_TRY
    {
        info = H5Pget_driver_info(fapl_id);
    }
    H5E_END_TRY;
    if (from_info)
        *from_info = info != NULL;
    if (info) {
        *config = *info;
        return 0;
    }
    if (gds_config_init(config) < 0)
        return -1;
#if H5GDS_HAVE_VFD_PLUGINS
    char text[1024];
    ssize_t n = H5Pget_driver_config_str(fapl_id, text, sizeof text);
    if (n >= (ssize_t)sizeof text) {
        GDS_ERROR(H5E_PLIST, H5E_BADVALUE, "HDF5_DRIVER_CONFIG string is too long (%zd bytes)", n);
        return -1;
    }
    if (n > 0 && gds_config_apply(config, text, "HDF5_DRIVER_CONFIG") < 0)
        return -1;
#endif
    return 0;
}
