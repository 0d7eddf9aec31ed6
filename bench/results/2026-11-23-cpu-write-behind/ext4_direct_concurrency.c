/*
 * O_DIRECT writes of one fresh file by N threads, each claiming the next
 * block, with or without reserving the file first (fallocate, mode 0: the
 * size set, blocks allocated unwritten), then fsync. Prints one CSV row.
 *   cc -O2 -o ext4_direct_concurrency ext4_direct_concurrency.c -lpthread
 *   ./ext4_direct_concurrency FILE MiB THREADS RESERVE(0|1) BLOCK_KiB
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fd;
static size_t blk, total;
static long next_block;

static void *writer(void *arg)
{
    (void)arg;
    void *buf;
    if (posix_memalign(&buf, 4096, blk))
        exit(1);
    memset(buf, 1, blk);
    for (;;) {
        long i = __atomic_fetch_add(&next_block, 1, __ATOMIC_SEQ_CST);
        if ((size_t)i * blk >= total)
            break;
        if (pwrite(fd, buf, blk, (off_t)i * (off_t)blk) != (ssize_t)blk) {
            perror("pwrite");
            exit(1);
        }
    }
    free(buf);
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 6)
        return 2;
    total = (size_t)atol(argv[2]) << 20;
    int nthr = atoi(argv[3]), reserve = atoi(argv[4]);
    blk = (size_t)atol(argv[5]) << 10;
    unlink(argv[1]);
    fd = open(argv[1], O_CREAT | O_RDWR | O_DIRECT, 0644);
    if (fd < 0)
        return 1;
    double t0 = now();
    if (reserve && fallocate(fd, 0, 0, (off_t)total) != 0)
        perror("fallocate");
    pthread_t t[64];
    for (int i = 0; i < nthr; i++)
        pthread_create(&t[i], NULL, writer, NULL);
    for (int i = 0; i < nthr; i++)
        pthread_join(t[i], NULL);
    fsync(fd);
    double t1 = now();
    printf("%d,%d,%zu,%zu,%.4f,%.3f\n", reserve, nthr, blk >> 10, total, t1 - t0, (double)total / 1e9 / (t1 - t0));
    close(fd);
    unlink(argv[1]);
    return 0;
}
