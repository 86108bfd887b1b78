/* A native echo that speaks protocol v0 just enough for the spawn-cost benchmark: it reads
 * the request, copies request_id and the "text" argument (no escapes expected) into the
 * answer, and writes it in one go. Built static (musl) so spawning it costs no loader work. */
#include <string.h>
#include <unistd.h>

static char input[65536];
static char answer[70000];

static const char *field(const char *key, char *out, size_t room, char end) {
    const char *at = strstr(input, key);
    if (!at) return NULL;
    at += strlen(key);
    size_t n = 0;
    while (at[n] && at[n] != end && n + 1 < room) n++;
    memcpy(out, at, n);
    out[n] = 0;
    return out;
}

int main(void) {
    size_t len = 0;
    ssize_t n;
    while (len < sizeof input - 1 && (n = read(0, input + len, sizeof input - 1 - len)) > 0) len += n;
    input[len] = 0;
    char request_id[64], text[2048];
    if (!field("\"request_id\":\"", request_id, sizeof request_id, '"')) return 2;
    if (!field("\\\"text\\\":\\\"", text, sizeof text, '\\')) return 2;
    size_t at = 0;
    const char *parts[] = {"{\"protocol_version\":0,\"request_id\":\"", request_id,
                           "\",\"ok\":true,\"data_json\":\"{\\\"echo\\\":\\\"", text,
                           "\\\"}\",\"stdout\":\"echo ok\",\"stderr\":\"\"}"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        size_t part = strlen(parts[i]);
        memcpy(answer + at, parts[i], part);
        at += part;
    }
    return write(1, answer, at) == (ssize_t)at ? 0 : 1;
}
