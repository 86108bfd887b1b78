/* A plain WASI command for `zigclaw wasi run` tests: prints what it was given,
 * tries to write into /data, exits with the code in $EXIT (default 0). */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    for (int i = 0; i < argc; i++) printf("arg%d=%s\n", i, argv[i]);
    const char *name = getenv("NAME");
    printf("NAME=%s\n", name ? name : "(unset)");
    printf("HOME=%s\n", getenv("HOME") ? getenv("HOME") : "(unset)");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, stdin);
    buf[n] = 0;
    printf("stdin=%s\n", buf);
    FILE *in = fopen("/data/in.txt", "r");
    if (in) {
        n = fread(buf, 1, sizeof buf - 1, in);
        buf[n] = 0;
        printf("file=%s\n", buf);
        fclose(in);
    } else {
        printf("file=(none)\n");
    }
    FILE *out = fopen("/data/out.txt", "w");
    printf("write=%s\n", out && fputs("written", out) >= 0 && fclose(out) == 0 ? "ok" : "refused");
    fflush(stdout);
    fprintf(stderr, "probe done\n");
    const char *code = getenv("EXIT");
    return code ? atoi(code) : 0;
}
