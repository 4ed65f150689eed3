/* The floor of bench/stream.sh: the least a TCP proxy can do per session, to say what the
 * kernel costs apart from any server. One thread, one epoll: accept4 (level-triggered
 * listeners), a nonblocking connect to the upstream, TCP_NODELAY both ways, then bytes relayed
 * through a 16 KiB buffer per direction (proxy_buffer_size's default), edge-triggered, a short
 * read taken as "drained" (as nginx and shoal do), the session closed whole when either side
 * ends. No timers, no logs, no configuration.
 *
 *   stream_floor UPSTREAM_PORT LISTEN_PORT...     (everything on 127.0.0.1)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 16384

struct pair;
struct end {
    struct pair *p;
    int side; /* 0: the client's socket, 1: the upstream's */
};
struct pair {
    int fd[2];
    struct end e[2];
    /* buf[s]: bytes read from fd[s], not yet written to fd[1 - s] */
    char buf[2][BUF];
    int off[2], len[2];
    int closed;
    struct pair *next_closed;
};

static int ep;
static struct sockaddr_in upstream;
static struct pair *closed;
static int listeners[16], nlisten;

static void finish(struct pair *p) {
    if (p->closed)
        return;
    p->closed = 1;
    close(p->fd[0]);
    close(p->fd[1]);
    p->next_closed = closed; /* freed after the batch of events that may name it */
    closed = p;
}

/* Moves bytes from fd[s] to fd[1 - s] until one of them would block. */
static void pump(struct pair *p, int s) {
    for (;;) {
        if (p->closed)
            return;
        if (p->len[s]) {
            ssize_t n = send(p->fd[1 - s], p->buf[s] + p->off[s], p->len[s] - p->off[s], MSG_NOSIGNAL);
            if (n < 0) {
                if (errno != EAGAIN)
                    finish(p);
                return;
            }
            p->off[s] += n;
            if (p->off[s] < p->len[s])
                return;
            p->off[s] = p->len[s] = 0;
        }
        ssize_t n = recv(p->fd[s], p->buf[s], BUF, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            finish(p);
            return;
        }
        if (n < 0)
            return;
        p->len[s] = n;
        if (n < BUF) { /* drained: write it, then wait for the next edge */
            ssize_t w = send(p->fd[1 - s], p->buf[s], n, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN) {
                finish(p);
                return;
            }
            if (w > 0)
                p->off[s] = w;
            if (p->off[s] == p->len[s])
                p->off[s] = p->len[s] = 0;
            return;
        }
    }
}

static void add(int fd, uint32_t events, void *ptr) {
    struct epoll_event ev = {.events = events, .data.ptr = ptr};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
        perror("epoll_ctl");
        exit(1);
    }
}

static void accept_one(int l) {
    struct sockaddr_in peer;
    socklen_t len = sizeof peer;
    int c = accept4(l, (void *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0)
        return;
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int u = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (u < 0 || (connect(u, (void *)&upstream, sizeof upstream) && errno != EINPROGRESS)) {
        close(c);
        if (u >= 0)
            close(u);
        return;
    }
    setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct pair *p = calloc(1, sizeof *p);
    p->fd[0] = c;
    p->fd[1] = u;
    for (int s = 0; s < 2; s++) {
        p->e[s] = (struct end){p, s};
        add(p->fd[s], EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, &p->e[s]);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: stream_floor UPSTREAM_PORT LISTEN_PORT...\n");
        return 2;
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    upstream = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(atoi(argv[1])),
                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int i = 2; i < argc && nlisten < 16; i++) {
        int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[i])),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(l, (void *)&sa, sizeof sa) || listen(l, 511)) {
            perror("listen");
            return 1;
        }
        listeners[nlisten++] = l;
        add(l, EPOLLIN, (void *)(uintptr_t)(1 + i)); /* small tags: never a struct end's address */
    }
    struct epoll_event evs[512];
    for (;;) {
        int n = epoll_wait(ep, evs, 512, -1);
        for (int i = 0; i < n; i++) {
            uintptr_t tag = (uintptr_t)evs[i].data.ptr;
            if (tag < 64) {
                accept_one(listeners[tag - 3]);
                continue;
            }
            struct end *e = evs[i].data.ptr;
            struct pair *p = e->p;
            if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
                pump(p, e->side);
            if ((evs[i].events & EPOLLOUT) && p->len[1 - e->side])
                pump(p, 1 - e->side);
        }
        while (closed) {
            struct pair *p = closed;
            closed = p->next_closed;
            free(p);
        }
    }
}
