/* A protocol v0 tool for benchmarks. args_json may hold "rounds" (an integer hash
 * loop, CPU-bound; default 0) and "out_kib" (KiB of 'x' returned in the answer's
 * "stdout" field, to measure output capture; default 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char input[65536];

static unsigned long arg(const char *key) {
    const char *at = strstr(input, key);
    return at ? strtoul(at + strlen(key), NULL, 10) : 0;
}

int main(void) {
    size_t len = 0;
    ssize_t n;
    while (len < sizeof input - 1 && (n = read(0, input + len, sizeof input - 1 - len)) > 0) len += n;
    input[len] = 0;
    const char *id = strstr(input, "\"request_id\":\"");
    if (!id) return 2;
    char request_id[33];
    memcpy(request_id, id + 14, 32);
    request_id[32] = 0;
    unsigned long rounds = arg("\\\"rounds\\\":");
    unsigned long out = arg("\\\"out_kib\\\":") * 1024;
    unsigned long long h = 1469598103934665603ULL;
    for (unsigned long i = 0; i < rounds; i++) h = (h ^ i) * 1099511628211ULL;
    /* The whole answer in one buffer and one write: the capture is what is measured. */
    size_t room = out + 512;
    char *answer = malloc(room);
    if (!answer) return 3;
    int head = snprintf(answer, room,
                        "{\"protocol_version\":0,\"request_id\":\"%s\",\"ok\":true,"
                        "\"data_json\":\"{\\\"hash\\\":%llu}\",\"stdout\":\"",
                        request_id, h);
    memset(answer + head, 'x', out);
    size_t total = head + out;
    total += (size_t)snprintf(answer + total, room - total, "\",\"stderr\":\"\"}");
    for (size_t done = 0; done < total;) {
        ssize_t wrote = write(1, answer + done, total - done);
        if (wrote <= 0) return 4;
        done += (size_t)wrote;
    }
    return 0;
}
