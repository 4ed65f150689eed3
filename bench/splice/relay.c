/* Does splice(2) through a pipe pay for relaying TCP, against read/write through a buffer?
 * bench/splice/run.sh builds and runs this; see bench/README.md for what it measured.
 *
 *   relay MODE BUF SECONDS      MODE: rw (read + write through a BUF-byte buffer, as shoal's
 *                               relay with proxy_buffer_size BUF) or splice (socket -> pipe ->
 *                               socket, BUF bytes per call, the pipe sized BUF)
 *
 * Over loopback: a source thread writes as fast as it can into one TCP connection, the relay
 * thread moves the bytes to a second TCP connection, a sink thread reads and drops them. Prints
 * the throughput, the relay thread's CPU time per MiB moved (CLOCK_THREAD_CPUTIME_ID), which is
 * what the choice changes, and the whole process's (getrusage: the kernel's work for the source
 * and the sink too, where splice may move cost to). The sockets are blocking, so no event loop
 * cost is in either figure. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

static void pair(int *a, int *b) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (bind(l, (void *)&sa, sizeof sa) || listen(l, 1) || getsockname(l, (void *)&sa, &len)) {
        perror("listen");
        exit(1);
    }
    *a = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(*a, (void *)&sa, sizeof sa)) {
        perror("connect");
        exit(1);
    }
    *b = accept(l, NULL, NULL);
    close(l);
}

static void *source(void *p) {
    int fd = *(int *)p;
    static char buf[1 << 16];
    memset(buf, 'x', sizeof buf);
    while (!stop && write(fd, buf, sizeof buf) > 0) {}
    shutdown(fd, SHUT_WR);
    return NULL;
}

static void *sink(void *p) {
    int fd = *(int *)p;
    static char buf[1 << 16];
    while (read(fd, buf, sizeof buf) > 0) {}
    return NULL;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double wall_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: relay rw|splice BUF SECONDS\n");
        return 2;
    }
    int splice_mode = strcmp(argv[1], "splice") == 0;
    size_t size = strtoul(argv[2], NULL, 10);
    double seconds = atof(argv[3]);
    int src_w, relay_in, relay_out, sink_r;
    pair(&src_w, &relay_in);
    pair(&relay_out, &sink_r);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, source, &src_w);
    pthread_create(&t2, NULL, sink, &sink_r);
    char *buf = malloc(size);
    int pipefd[2];
    if (pipe(pipefd)) {
        perror("pipe");
        return 1;
    }
    fcntl(pipefd[1], F_SETPIPE_SZ, (int)size);
    unsigned long long moved = 0;
    double c0 = cpu_now(), w0 = wall_now(), end = w0 + seconds;
    while (wall_now() < end) {
        ssize_t n;
        if (splice_mode) {
            n = splice(relay_in, NULL, pipefd[1], NULL, size, SPLICE_F_MOVE);
            if (n <= 0) break;
            ssize_t left = n;
            while (left > 0) {
                ssize_t m = splice(pipefd[0], NULL, relay_out, NULL, left, SPLICE_F_MOVE);
                if (m <= 0) return 1;
                left -= m;
            }
        } else {
            n = read(relay_in, buf, size);
            if (n <= 0) break;
            ssize_t off = 0;
            while (off < n) {
                ssize_t m = write(relay_out, buf + off, n - off);
                if (m <= 0) return 1;
                off += m;
            }
        }
        moved += n;
    }
    double cpu = cpu_now() - c0, wall = wall_now() - w0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double all = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    stop = 1;
    shutdown(relay_in, SHUT_RDWR);
    shutdown(relay_out, SHUT_RDWR);
    double mib = moved / 1048576.0;
    printf("%-6s buf=%-6zu %6.0f MiB in %.2f s (%4.0f MiB/s): relay thread %5.1f us/MiB, "
           "process (source + relay + sink) %5.1f us/MiB\n",
           argv[1], size, mib, wall, mib / wall, cpu * 1e6 / mib, all * 1e6 / mib);
    return 0;
}
