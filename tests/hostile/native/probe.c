/* A hostile native tool for tests/test_native.py: speaks protocol v0 and does one
 * operation named by its arguments {"op": "...", "arg": "..."}; the answer's data
 * is {"result": "<ok detail | err errno>"}. Static, so it needs no library paths. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char request[1 << 16];
static char request_id[64];

/* The value of "key" in the request, also when escaped inside args_json. */
static void field(const char *key, char *out, size_t size) {
    char pattern[64];
    out[0] = 0;
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    char *at = strstr(request, pattern);
    size_t skip = strlen(pattern);
    if (!at) {
        snprintf(pattern, sizeof pattern, "\\\"%s\\\":\\\"", key);
        at = strstr(request, pattern);
        skip = strlen(pattern);
    }
    if (!at) return;
    at += skip;
    size_t n = 0;
    while (at[n] && at[n] != '"' && at[n] != '\\' && n + 1 < size) n++;
    memcpy(out, at, n);
    out[n] = 0;
}

static void respond(const char *result) {
    printf("{\"protocol_version\":0,\"request_id\":\"%s\",\"ok\":true,"
           "\"data_json\":\"{\\\"result\\\":\\\"%s\\\"}\",\"stdout\":\"\",\"stderr\":\"\"}",
           request_id, result);
    fflush(stdout);
}

static void result(int rc, long detail) {
    char text[64];
    if (rc < 0) snprintf(text, sizeof text, "err %d", errno);
    else snprintf(text, sizeof text, "ok %ld", detail);
    respond(text);
}

static void flood(int fd, long total) {
    static char chunk[65536];
    memset(chunk, 'x', sizeof chunk);
    while (total > 0) {
        long n = total < (long)sizeof chunk ? total : (long)sizeof chunk;
        if (write(fd, chunk, (size_t)n) < 0) return;
        total -= n;
    }
}

int main(void) {
    size_t len = 0;
    ssize_t n;
    while ((n = read(0, request + len, sizeof request - 1 - len)) > 0) len += (size_t)n;
    request[len] = 0;
    char op[64], arg[512];
    field("request_id", request_id, sizeof request_id);
    field("op", op, sizeof op);
    field("arg", arg, sizeof arg);

    if (!strcmp(op, "read")) {
        char buf[256];
        int fd = open(arg, O_RDONLY);
        if (fd < 0) return result(-1, 0), 0;
        ssize_t got = read(fd, buf, sizeof buf);
        result((int)got, got);
    } else if (!strcmp(op, "write")) {
        int fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) return result(-1, 0), 0;
        result((int)write(fd, "written\n", 8), 8);
    } else if (!strcmp(op, "connect")) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(arg))};
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        result(s < 0 ? -1 : connect(s, (struct sockaddr *)&addr, sizeof addr), 0);
    } else if (!strcmp(op, "udp")) {
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(arg))};
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        result(s < 0 ? -1 : (int)sendto(s, "x", 1, 0, (struct sockaddr *)&addr, sizeof addr), 0);
    } else if (!strcmp(op, "unix")) {
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        strncpy(addr.sun_path, arg, sizeof addr.sun_path - 1);
        result(s < 0 ? -1 : connect(s, (struct sockaddr *)&addr, sizeof addr), 0);
    } else if (!strcmp(op, "keyring")) {
        /* The session keyring (KEYCTL_GET_KEYRING_ID = 0, KEY_SPEC_SESSION_KEYRING = -3). */
        result((int)syscall(SYS_keyctl, 0, -3, 0), 0);
    } else if (!strcmp(op, "caps")) {
        /* The effective, permitted and inheritable capabilities, or'ed together. */
        struct { unsigned int version; int pid; } header = {0x20080522, 0};
        struct { unsigned int effective, permitted, inheritable; } data[2];
        memset(data, 0, sizeof data);
        int rc = (int)syscall(SYS_capget, &header, data);
        long all = (long)(data[0].effective | data[0].permitted | data[0].inheritable |
                          data[1].effective | data[1].permitted | data[1].inheritable);
        result(rc, all);
    } else if (!strcmp(op, "env")) {
        const char *value = getenv(arg);
        respond(value ? value : "unset");
    } else if (!strcmp(op, "count_env")) {
        extern char **environ;
        long count = 0;
        for (char **e = environ; *e; e++) count++;
        result(0, count);
    } else if (!strcmp(op, "forkcount")) {
        /* Fork children that wait, until fork fails: the count is the process cap. */
        long count = 0;
        for (;;) {
            pid_t pid = fork();
            if (pid == 0) { pause(); _exit(0); }
            if (pid < 0) break;
            if (++count >= 100000) break;
        }
        result(0, count);
    } else if (!strcmp(op, "forkbomb")) {
        for (;;) fork();
    } else if (!strcmp(op, "orphan")) {
        /* A child leaves the process group, keeps stdout open, and later tries to write a file. */
        pid_t pid = fork();
        if (pid == 0) {
            setsid();
            sleep(1);
            int fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) { ssize_t ignored = write(fd, "alive\n", 6); (void)ignored; }
            sleep(60);
            _exit(0);
        }
        result(0, 0);
        return 0;
    } else if (!strcmp(op, "ignore_term")) {
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        for (;;) pause();
    } else if (!strcmp(op, "stdout")) {
        flood(1, atol(arg));
        respond("flooded");
    } else if (!strcmp(op, "stderr")) {
        flood(2, atol(arg));
        respond("flooded");
    } else if (!strcmp(op, "alloc")) {
        long size = atol(arg);
        /* volatile: the compiler may not drop an allocation whose bytes are never read. */
        char *volatile p = malloc((size_t)size);
        if (!p) return result(-1, 0), 0;
        memset(p, 1, (size_t)size);
        result(0, size * p[size - 1]);
    } else if (!strcmp(op, "fail")) {
        fprintf(stderr, "probe failed on purpose\n");
        return 3;
    } else if (!strcmp(op, "pid")) {
        result(0, (long)getpid());
    } else {
        respond("unknown op");
    }
    return 0;
}
