/* A TCP proxy on loopback that delays every byte by a fixed time and keeps the order: the
 * stand-in for a network with a round trip of REQUESTS_MS + REPLIES_MS where the kernel has no
 * netem qdisc. Bytes read at time t are written at t + the delay of their direction, so a
 * pipeline of requests sees the delay once per round trip, not once per request, as on a real
 * network.
 *
 *   delay_proxy REQUESTS_MS[/REPLIES_MS] LISTEN_PORT:TARGET_PORT [LISTEN_PORT:TARGET_PORT ...]
 *
 * REQUESTS_MS delays what the client sends, REPLIES_MS (default: the same) what it is sent.
 * For request and reply traffic the client sees the same round trip wherever it is put; put
 * all of it on the requests (100/0) and the proxy holds a round trip's requests (a few bytes
 * each) instead of half a round trip's replies (tens of MB for deep windows of small records,
 * copied out of memory long after they were read: a cost the client host of a real network
 * does not have, since there the bytes in flight are on the wire).
 *
 * Listens on 127.0.0.1 only and connects to 127.0.0.1:TARGET_PORT. Prints "ready" once every
 * port listens. One thread per direction of a connection: it waits (ppoll) for bytes to read or
 * for the oldest queued chunk to fall due, whichever comes first, and writes chunks when due.
 * With a delay of 0 that is a plain relay, with no hand-off between threads. At most QUEUE_LIMIT
 * bytes wait per direction; beyond, it stops reading (the sender feels a full socket). Writes
 * never block: a destination that does not read (a trainer busy elsewhere) is waited for with
 * poll, reading on meanwhile, and its closing is seen at once. A side that closed is not
 * polled again (its hang-up would wake poll without end); a failed accept (out of descriptors)
 * is said once and retried every 100 ms, not in a busy loop.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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
#define SPARE_LIMIT 64          /* chunks kept for reuse per direction (16 MiB) */

static int64_t requests_delay_ns, replies_delay_ns;

struct chunk {
    struct chunk *next;
    int64_t due_ns;
    size_t len, sent;
    char data[];
};

struct direction {              /* bytes from `from` to `to`, delayed */
    int from, to;
    int64_t delay_ns;
    struct connection *conn;
    struct chunk *spare;        /* sent chunks, reused: a fresh 256 KiB malloc is an mmap whose
                                   pages fault in one by one, which cost more than the copying */
    int spares;
};

static struct chunk *new_chunk(struct direction *d) {
    struct chunk *c = d->spare;
    if (!c) return malloc(sizeof(struct chunk) + CHUNK);
    d->spare = c->next;
    d->spares--;
    return c;
}

static void drop_chunk(struct direction *d, struct chunk *c) {
    if (d->spares >= SPARE_LIMIT) {
        free(c);
        return;
    }
    c->next = d->spare;
    d->spare = c;
    d->spares++;
}

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

/* Write what is due of the queue without blocking: 0 when all that is due went out, 1 when
 * the destination's socket is full (wait for POLLOUT), -1 when the destination failed. */
static int write_due(struct direction *d, struct chunk **head, struct chunk **tail, long *queued) {
    while (*head && (*head)->due_ns <= now_ns()) {
        struct chunk *c = *head;
        ssize_t n = send(d->to, c->data + c->sent, c->len - c->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
        if (n <= 0) return -1;
        c->sent += (size_t)n;
        if (c->sent < c->len) continue;
        *head = c->next;
        if (!*head) *tail = NULL;
        *queued -= (long)c->len;
        drop_chunk(d, c);
    }
    return 0;
}

static void *relay(void *arg) {
    struct direction *d = arg;
    struct chunk *head = NULL, *tail = NULL;
    long queued = 0;
    int eof = 0, full = 0;                           /* full: `to` took no more bytes */
    while (!eof || head) {
        struct timespec wait, *until_due = NULL;     /* NULL: nothing queued, wait for bytes */
        if (head && !full) {
            int64_t left = head->due_ns - now_ns();
            if (left < 0) left = 0;
            wait.tv_sec = left / 1000000000;
            wait.tv_nsec = left % 1000000000;
            until_due = &wait;
        }
        /* fd -1: not polled (a closed socket's hang-up would return at once, every time) */
        struct pollfd p[2] = {{(eof || queued > QUEUE_LIMIT) ? -1 : d->from, POLLIN, 0},
                              {full ? d->to : -1, POLLOUT, 0}};
        if (ppoll(p, 2, until_due, NULL) < 0 && errno != EINTR) break;
        if (p[1].revents & (POLLERR | POLLHUP | POLLNVAL)) {  /* the destination is gone */
            shutdown(d->from, SHUT_RDWR);
            break;
        }
        if (p[0].revents) {
            struct chunk *c = new_chunk(d);
            ssize_t n = c ? read(d->from, c->data, CHUNK) : -1;
            if (n <= 0) {
                free(c);
                eof = 1;
            } else {
                c->len = (size_t)n;
                c->sent = 0;
                c->due_ns = now_ns() + d->delay_ns;
                c->next = NULL;
                if (tail) tail->next = c; else head = c;
                tail = c;
                queued += n;
            }
        }
        int wrote = write_due(d, &head, &tail, &queued);
        if (wrote < 0) {                               /* the other side is gone */
            shutdown(d->from, SHUT_RDWR);
            break;
        }
        full = wrote == 1;
    }
    while (head) {
        struct chunk *c = head;
        head = c->next;
        free(c);
    }
    while (d->spare) {
        struct chunk *c = d->spare;
        d->spare = c->next;
        free(c);
    }
    shutdown(d->to, SHUT_WR);
    thread_done(d->conn);
    return NULL;
}

/* 0, or the error of pthread_create */
static int start_direction(struct connection *conn, struct direction *d, int from, int to,
                           int64_t delay_ns) {
    d->from = from;
    d->to = to;
    d->delay_ns = delay_ns;
    d->conn = conn;
    pthread_t t;
    int err = pthread_create(&t, NULL, relay, d);
    if (err == 0) pthread_detach(t);
    return err;
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
    int one = 1, said = 0;
    for (;;) {
        int client = accept(m->listen_fd, NULL, NULL);
        if (client < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (!said) fprintf(stderr, "delay_proxy: accept on a listening port failed: %s; "
                               "retrying every 100 ms\n", strerror(errno));
            said = 1;
            usleep(100000);
            continue;
        }
        said = 0;
        int server = connect_loopback(m->target_port);
        if (server < 0) {
            fprintf(stderr, "delay_proxy: cannot reach 127.0.0.1:%d: %s\n", m->target_port, strerror(errno));
            close(client);
            continue;
        }
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct connection *conn = calloc(1, sizeof *conn);
        int err = conn ? 0 : ENOMEM;
        if (conn) {
            conn->threads_left = 2;
            pthread_mutex_init(&conn->lock, NULL);
            err = start_direction(conn, &conn->up, client, server, requests_delay_ns);
            if (err) free(conn);
        }
        if (err) {
            fprintf(stderr, "delay_proxy: cannot relay a connection to 127.0.0.1:%d: %s\n",
                    m->target_port, strerror(err));
            close(client);
            close(server);
            continue;
        }
        err = start_direction(conn, &conn->down, server, client, replies_delay_ns);
        if (err) {  /* the up thread runs: end it, and it closes and frees the connection */
            fprintf(stderr, "delay_proxy: cannot relay a connection to 127.0.0.1:%d: %s\n",
                    m->target_port, strerror(err));
            shutdown(client, SHUT_RDWR);
            shutdown(server, SHUT_RDWR);
            thread_done(conn);
        }
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
        fprintf(stderr, "usage: %s REQUESTS_MS[/REPLIES_MS] LISTEN_PORT:TARGET_PORT [...]\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char *end, *replies = NULL;
    double requests_ms = strtod(argv[1], &end), replies_ms = requests_ms;
    int empty = end == argv[1];
    if (*end == '/') {
        replies = end + 1;
        replies_ms = strtod(replies, &end);
        empty |= end == replies;
    }
    if (*end || empty || requests_ms < 0 || replies_ms < 0) {
        fprintf(stderr, "delay_proxy: the delays must be REQUESTS_MS[/REPLIES_MS], each a number >= 0, "
                "not '%s'\n", argv[1]);
        return 2;
    }
    requests_delay_ns = (int64_t)(requests_ms * 1e6);
    replies_delay_ns = (int64_t)(replies_ms * 1e6);
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
