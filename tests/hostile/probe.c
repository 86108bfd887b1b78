/* Filesystem and environment probe for sandbox tests.
 * stdin: one operation per line, e.g. "write /workspace/x" or "rename a b".
 * stdout: one line per operation: "ok <detail>" or "err <errno>". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

extern char **environ;

static void report(int rc, const char *detail) {
    if (rc < 0) printf("err %d\n", errno);
    else printf("ok %s\n", detail);
}

static void run(char *op, char *a, char *b) {
    char detail[64] = "";
    if (!strcmp(op, "read")) {
        int fd = open(a, O_RDONLY);
        if (fd < 0) { report(-1, ""); return; }
        char buf[256];
        ssize_t n = read(fd, buf, sizeof buf);
        close(fd);
        snprintf(detail, sizeof detail, "%zd", n);
        report(n < 0 ? -1 : 0, detail);
    } else if (!strcmp(op, "write") || !strcmp(op, "trunc")) {
        int flags = O_WRONLY | O_TRUNC | (!strcmp(op, "write") ? O_CREAT : 0);
        int fd = open(a, flags, 0644);
        if (fd < 0) { report(-1, ""); return; }
        ssize_t n = write(fd, "pwned", 5);
        close(fd);
        report(n < 0 ? -1 : 0, "");
    } else if (!strcmp(op, "mkdir")) {
        report(mkdir(a, 0755), "");
    } else if (!strcmp(op, "unlink")) {
        report(unlink(a), "");
    } else if (!strcmp(op, "rmdir")) {
        report(rmdir(a), "");
    } else if (!strcmp(op, "rename")) {
        report(rename(a, b), "");
    } else if (!strcmp(op, "symlink")) {
        report(symlink(a, b), "");
    } else if (!strcmp(op, "link")) {
        report(link(a, b), "");
    } else if (!strcmp(op, "utimes")) {
        struct timeval tv[2] = {{1, 0}, {1, 0}};
        report(utimes(a, tv), "");
    } else if (!strcmp(op, "env")) {
        int n = 0;
        while (environ && environ[n]) n++;
        snprintf(detail, sizeof detail, "%d", n);
        report(0, detail);
    } else {
        printf("err unknown-op\n");
    }
}

int main(int argc, char **argv) {
    char input[8192];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof input - 1 && (n = read(0, input + len, sizeof input - 1 - len)) > 0) len += n;
    input[len] = 0;
    printf("argc %d\n", argc);
    char *save = NULL;
    for (char *line = strtok_r(input, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *op = strtok(line, " ");
        char *a = strtok(NULL, " ");
        char *b = strtok(NULL, " ");
        if (op) run(op, a ? a : "", b ? b : "");
    }
    return 0;
}
