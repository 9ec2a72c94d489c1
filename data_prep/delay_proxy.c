/* A TCP proxy on loopback that delays every byte by a fixed time in each direction and keeps
 * the order: the stand-in for a network with a round trip of 2 x DELAY_MS where the kernel has
 * no netem qdisc. Bytes read at time t are written at t + DELAY_MS, so a pipeline of requests
 * sees the delay once per round trip, not once per request, as on a real network.
 *
 *   delay_proxy DELAY_MS LISTEN_PORT:TARGET_PORT [LISTEN_PORT:TARGET_PORT ...]
 *
 * Listens on 127.0.0.1 only and connects to 127.0.0.1:TARGET_PORT. Prints "ready" once every
 * port listens. Each direction of a connection is a reader thread (timestamps chunks) and a
 * writer thread (writes each chunk when it is due); at most QUEUE_LIMIT bytes wait per
 * direction, beyond which the reader waits (the sender feels it as a full socket).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (256 * 1024)
#define QUEUE_LIMIT (64L * 1024 * 1024)

static int64_t delay_ns;

struct chunk {
    struct chunk *next;
    int64_t due_ns;
    size_t len;
    char data[];
};

struct direction {              /* bytes from `from` to `to`, delayed */
    int from, to;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    struct chunk *head, *tail;
    long queued;
    int eof;                    /* the reader saw the end (or an error) */
    int broken;                 /* the writer failed: the reader stops too */
    struct connection *conn;
};

struct connection {
    struct direction up, down;  /* client -> server, server -> client */
    int threads_left;
    pthread_mutex_t lock;
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t due_ns) {
    struct timespec ts = {due_ns / 1000000000, due_ns % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

static void thread_done(struct connection *c) {
    pthread_mutex_lock(&c->lock);
    int last = --c->threads_left == 0;
    pthread_mutex_unlock(&c->lock);
    if (last) {
        close(c->up.from);
        close(c->up.to);
        free(c);
    }
}

static void *reader(void *arg) {
    struct direction *d = arg;
    for (;;) {
        struct chunk *c = malloc(sizeof(struct chunk) + CHUNK);
        ssize_t n = c ? read(d->from, c->data, CHUNK) : -1;
        pthread_mutex_lock(&d->lock);
        if (n <= 0 || d->broken) {
            free(c);
            d->eof = 1;
            pthread_cond_broadcast(&d->changed);
            pthread_mutex_unlock(&d->lock);
            break;
        }
        c->len = (size_t)n;
        c->due_ns = now_ns() + delay_ns;
        c->next = NULL;
        while (d->queued > QUEUE_LIMIT && !d->broken)
            pthread_cond_wait(&d->changed, &d->lock);
        if (d->tail) d->tail->next = c; else d->head = c;
        d->tail = c;
        d->queued += n;
        pthread_cond_broadcast(&d->changed);
        pthread_mutex_unlock(&d->lock);
    }
    thread_done(d->conn);
    return NULL;
}

static int write_all(int fd, const char *p, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void *writer(void *arg) {
    struct direction *d = arg;
    for (;;) {
        pthread_mutex_lock(&d->lock);
        while (!d->head && !d->eof) pthread_cond_wait(&d->changed, &d->lock);
        struct chunk *c = d->head;
        if (!c) {                       /* end of stream, everything written */
            pthread_mutex_unlock(&d->lock);
            shutdown(d->to, SHUT_WR);
            break;
        }
        pthread_mutex_unlock(&d->lock);
        if (c->due_ns > now_ns()) sleep_until(c->due_ns);
        int failed = write_all(d->to, c->data, c->len) != 0;
        pthread_mutex_lock(&d->lock);
        d->head = c->next;
        if (!d->head) d->tail = NULL;
        d->queued -= (long)c->len;
        d->broken |= failed;
        pthread_cond_broadcast(&d->changed);
        pthread_mutex_unlock(&d->lock);
        free(c);
        if (failed) {                   /* the other side is gone: end both directions */
            shutdown(d->from, SHUT_RDWR);
            break;
        }
    }
    thread_done(d->conn);
    return NULL;
}

static void start_direction(struct connection *conn, struct direction *d, int from, int to) {
    d->from = from;
    d->to = to;
    d->conn = conn;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->changed, NULL);
    pthread_t t;
    pthread_create(&t, NULL, reader, d);
    pthread_detach(t);
    pthread_create(&t, NULL, writer, d);
    pthread_detach(t);
}

static int connect_loopback(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

struct mapping { int listen_fd, target_port; };

static void *acceptor(void *arg) {
    struct mapping *m = arg;
    int one = 1;
    for (;;) {
        int client = accept(m->listen_fd, NULL, NULL);
        if (client < 0) continue;
        int server = connect_loopback(m->target_port);
        if (server < 0) {
            fprintf(stderr, "delay_proxy: cannot reach 127.0.0.1:%d: %s\n", m->target_port, strerror(errno));
            close(client);
            continue;
        }
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct connection *conn = calloc(1, sizeof *conn);
        conn->threads_left = 4;
        pthread_mutex_init(&conn->lock, NULL);
        start_direction(conn, &conn->up, client, server);
        start_direction(conn, &conn->down, server, client);
    }
    return NULL;
}

static int listen_loopback(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0) {
        fprintf(stderr, "delay_proxy: cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
        exit(1);
    }
    return fd;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DELAY_MS LISTEN_PORT:TARGET_PORT [...]\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char *end;
    double ms = strtod(argv[1], &end);
    if (*end || ms < 0) {
        fprintf(stderr, "delay_proxy: DELAY_MS must be a number >= 0, not '%s'\n", argv[1]);
        return 2;
    }
    delay_ns = (int64_t)(ms * 1e6);
    for (int i = 2; i < argc; i++) {
        int listen_port, target_port;
        if (sscanf(argv[i], "%d:%d", &listen_port, &target_port) != 2) {
            fprintf(stderr, "delay_proxy: '%s' is not LISTEN_PORT:TARGET_PORT\n", argv[i]);
            return 2;
        }
        struct mapping *m = malloc(sizeof *m);
        m->listen_fd = listen_loopback(listen_port);
        m->target_port = target_port;
        pthread_t t;
        pthread_create(&t, NULL, acceptor, m);
        pthread_detach(t);
    }
    printf("ready\n");
    fflush(stdout);
    pause();
    return 0;
}
