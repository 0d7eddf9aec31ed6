/*
 * The environment variables the codec reads while it decodes, and copies of
 * them for a decode run on a thread of its own: glibc's getenv is not safe
 * against a setenv on another thread (Python's os.environ assignments), so
 * a thread that decodes in the background reads a copy its caller took.
 */
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"

static const char *const setting_names[GDS_CODEC_SETTINGS] = {
    [GDS_SET_CODEC_DEBUG] = "H5GDS_CODEC_DEBUG",
    [GDS_SET_TEST_REDECODE] = "H5GDS_CODEC_TEST_REDECODE",
    [GDS_SET_INFLATE_SEGMENT_KIB] = "H5GDS_INFLATE_SEGMENT_KIB",
    [GDS_SET_INFLATE_SPLIT] = "H5GDS_INFLATE_SPLIT",
    [GDS_SET_ZSTD_BLOCKS] = "H5GDS_ZSTD_BLOCKS",
};
_Static_assert(GDS_SET_COUNT == GDS_CODEC_SETTINGS, "one name per setting");

/* The copy this thread reads instead of the environment, if any. */
static _Thread_local const gds_codec_settings_t *settings_in_use;

void gds_codec_settings_copy(gds_codec_settings_t *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < GDS_CODEC_SETTINGS; i++) {
        const char *v = getenv(setting_names[i]);
        if (!v)
            continue;
        s->set[i] = 1;
        /* every value the codec takes is short (a number, 0 or 1); a longer
         * one is kept as "?", which none of them accepts */
        size_t len = strlen(v);
        if (len < sizeof s->value[i])
            memcpy(s->value[i], v, len + 1);
        else
            strcpy(s->value[i], "?");
    }
}

void gds_codec_settings_use(const gds_codec_settings_t *s) { settings_in_use = s; }

const char *gds_codec_setting(int which)
{
    if (which < 0 || which >= GDS_CODEC_SETTINGS)
        return NULL;
    const gds_codec_settings_t *s = settings_in_use;
    if (s)
        return s->set[which] ? s->value[which] : NULL;
    return getenv(setting_names[which]);
}

bool gds_codec_setting_on(int which)
{
    const char *e = gds_codec_setting(which);
    return e && *e && strcmp(e, "0") != 0;
}
