/* wc: count the lines, words and bytes of a file under /workspace, or of a text
 * argument, like `wc`. A third-party zigclaw tool in C, built to wasm32-wasi
 * with `zig cc` (see build.sh). Speaks protocol v0 through zigclaw_protocol.h. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "zigclaw_protocol.h"

typedef struct {
    long long lines, words, bytes;
    int in_word;
} counts;

static void count(counts *c, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = p[i];
        if (ch == '\n') c->lines++;
        if (isspace(ch)) {
            c->in_word = 0;
        } else if (!c->in_word) {
            c->in_word = 1;
            c->words++;
        }
    }
    c->bytes += (long long)n;
}

int main(void) {
    zc_request req;
    zc_read_request(&req);
    counts c = {0, 0, 0, 0};

    char *path = zc_arg_string(&req, "path");
    char *text = zc_arg_string(&req, "text");
    if (path) {
        zc_buf full = {0};
        if (path[0] != '/') { /* relative to the request's cwd, /workspace */
            zc_put(&full, req.cwd);
            zc_put(&full, "/");
        }
        zc_put(&full, path);
        FILE *f = fopen(full.text, "rb");
        if (!f) {
            zc_buf why = {0};
            zc_put(&why, "cannot open ");
            zc_put(&why, path);
            zc_put(&why, ": ");
            zc_put(&why, strerror(errno));
            zc_fail(&req, why.text);
            return 0;
        }
        unsigned char chunk[65536];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) count(&c, chunk, n);
        int failed = ferror(f);
        fclose(f);
        if (failed) {
            zc_fail(&req, "read failed");
            return 0;
        }
    } else if (text) {
        count(&c, (const unsigned char *)text, strlen(text));
    } else {
        zc_fail(&req, "give path or text");
        return 0;
    }

    zc_buf data = {0};
    zc_put(&data, "{\"lines\":");
    zc_put_int(&data, c.lines);
    zc_put(&data, ",\"words\":");
    zc_put_int(&data, c.words);
    zc_put(&data, ",\"bytes\":");
    zc_put_int(&data, c.bytes);
    zc_put(&data, "}");
    zc_respond(&req, 1, data.text, "wc ok", "");
    return 0;
}
