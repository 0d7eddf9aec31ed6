/* The fault suite's child processes (faults.h): this program run again in a
 * child with a time limit, and the small helpers the families share. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "faults.h"

const char *const outcome_names[] = {"ok", "failed", "crash", "hang"};

char self_exe[4096];

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

child_result_t run_child(const char *const *args, const char *const *env, const char *out_path, double timeout_s)
{
    child_result_t r = {OUT_FAILED, -1};
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return r;
    if (pid == 0) {
        for (const char *const *e = env; e && *e; e++)
            putenv((char *)*e);
        if (out_path) {
            int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0)
                dup2(fd, 1);
        }
        char *argv[16];
        int n = 0;
        argv[n++] = self_exe;
        for (const char *const *a = args; *a && n < 15; a++)
            argv[n++] = (char *)*a;
        argv[n] = NULL;
        execv(self_exe, argv);
        _exit(127);
    }
    double deadline = now_s() + timeout_s;
    int status;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return r;
        if (now_s() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            r.outcome = OUT_HANG;
            return r;
        }
        usleep(2000);
    }
    if (WIFSIGNALED(status)) {
        r.outcome = OUT_CRASH;
        r.code = WTERMSIG(status);
    }
    else {
        r.code = WEXITSTATUS(status);
        r.outcome = r.code == 0 ? OUT_OK : OUT_FAILED;
    }
    return r;
}

hid_t driver_fapl(const char *driver, const char *config)
{
    return strcmp(driver, "gds") == 0 ? gds_fapl(config) : sec2_fapl();
}

long read_long_file(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t k = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, k) == 0 && line[k] == '=')
            v = strtol(line + k + 1, NULL, 0);
    fclose(f);
    return v;
}

bool read_text_file(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    return true;
}
