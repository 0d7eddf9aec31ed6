/* pread/pwrite loops: a request of any size, interrupted or cut short, is
 * completed or fails with errno set. */
#include "engine.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

/* Linux transfers at most 0x7ffff000 bytes per call; stay well below. */
#define GDS_MAX_IO_PER_CALL ((size_t)1 << 30)

void gds_status_set(gds_status_t *st, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    st->err = err;
}

ssize_t gds_pread_full(int fd, void *buf, size_t size, uint64_t offset)
{
    size_t done = 0;
    while (done < size) {
        size_t chunk = size - done < GDS_MAX_IO_PER_CALL ? size - done : GDS_MAX_IO_PER_CALL;
        ssize_t n = pread(fd, (char *)buf + done, chunk, (off_t)(offset + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break; /* end of file */
        done += (size_t)n;
    }
    return (ssize_t)done;
}

int gds_pwrite_full(int fd, const void *buf, size_t size, uint64_t offset)
{
    size_t done = 0;
    while (done < size) {
        size_t chunk = size - done < GDS_MAX_IO_PER_CALL ? size - done : GDS_MAX_IO_PER_CALL;
        ssize_t n = pwrite(fd, (const char *)buf + done, chunk, (off_t)(offset + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) { /* should not happen for regular files; do not spin */
            errno = EIO;
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}
