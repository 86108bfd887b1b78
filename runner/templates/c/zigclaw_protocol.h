/* zigclaw protocol v0 for WASI tools written in C: one header, no dependencies.
 *
 * The runner writes one JSON request on stdin and closes it; the tool answers
 * with one JSON response on stdout:
 *
 *   request:  {"protocol_version":0,"request_id":"...","tool":"...",
 *              "args_json":"{...}","cwd":"/workspace","mounts":[...]}
 *   response: {"protocol_version":0,"request_id":"<same>","ok":true,
 *              "data_json":"{...}","stdout":"...","stderr":""}
 *
 * Use:  zc_request req; zc_read_request(&req);
 *       const char *name = zc_arg_string(&req, "name");   (NULL when absent)
 *       zc_buf data = {0}; zc_put(&data, "{\"x\":"); zc_put_json_string(&data, name); zc_put(&data, "}");
 *       zc_respond(&req, 1, data.text, "tool ok", "");
 *
 * Strings handed out are NUL-terminated UTF-8; one holding a NUL is refused.
 * A request that breaks the protocol is reported on stderr with exit code 2.
 */
#ifndef ZIGCLAW_PROTOCOL_H
#define ZIGCLAW_PROTOCOL_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZC_MAX_REQUEST (16u * 1024u * 1024u)

typedef struct {
    char *text; /* always NUL-terminated once anything was put */
    size_t len, cap;
} zc_buf;

typedef struct {
    char *raw;        /* the request text */
    char *request_id; /* decoded fields */
    char *tool;
    char *cwd;
    char *args;       /* args_json, decoded: the argument object's JSON text */
} zc_request;

static void zc_malformed(const char *why) {
    fprintf(stderr, "malformed request: %s\n", why);
    exit(2);
}

static void zc_reserve(zc_buf *b, size_t more) {
    if (b->len + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1) cap *= 2;
    char *grown = realloc(b->text, cap);
    if (!grown) zc_malformed("out of memory");
    b->text = grown;
    b->cap = cap;
}

static void zc_putn(zc_buf *b, const char *s, size_t n) {
    zc_reserve(b, n);
    memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = 0;
}

static void zc_put(zc_buf *b, const char *s) { zc_putn(b, s, strlen(s)); }

static void zc_put_int(zc_buf *b, long long v) {
    char num[32];
    snprintf(num, sizeof num, "%lld", v);
    zc_put(b, num);
}

/* `s` as a JSON string literal, quotes included. */
static void zc_put_json_string(zc_buf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    zc_put(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': zc_put(b, "\\\""); break;
        case '\\': zc_put(b, "\\\\"); break;
        case '\n': zc_put(b, "\\n"); break;
        case '\r': zc_put(b, "\\r"); break;
        case '\t': zc_put(b, "\\t"); break;
        default:
            if (*p < 0x20) {
                char esc[7] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15], 0};
                zc_put(b, esc);
            } else {
                zc_putn(b, (const char *)p, 1);
            }
        }
    }
    zc_put(b, "\"");
}

/* --- reading JSON: just enough to find keys of one object and decode strings --- */

static const char *zc_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* Past the JSON value at `p`, or NULL when it is not one. */
static const char *zc_skip(const char *p, int depth) {
    p = zc_ws(p);
    if (depth > 64) return NULL;
    if (*p == '"') {
        for (p++; *p && *p != '"'; p++)
            if (*p == '\\' && !*++p) return NULL;
        return *p == '"' ? p + 1 : NULL;
    }
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = zc_ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                p = zc_skip(p, depth + 1); /* key */
                if (!p) return NULL;
                p = zc_ws(p);
                if (*p++ != ':') return NULL;
            }
            p = zc_skip(p, depth + 1);
            if (!p) return NULL;
            p = zc_ws(p);
            if (*p == ',') { p++; continue; }
            return *p == close ? p + 1 : NULL;
        }
    }
    const char *start = p;
    while (*p && strchr("+-.0123456789eEtruefalsn", *p)) p++;
    return p > start ? p : NULL;
}

static unsigned zc_hex4(const char *p) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else zc_malformed("bad \\u escape");
    }
    return v;
}

static void zc_put_utf8(zc_buf *b, unsigned cp) {
    char out[4];
    size_t n;
    if (cp < 0x80) { out[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { out[0] = (char)(0xc0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3f)); n = 2; }
    else if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12); out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f)); n = 3;
    } else {
        out[0] = (char)(0xf0 | cp >> 18); out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); out[3] = (char)(0x80 | (cp & 0x3f)); n = 4;
    }
    zc_putn(b, out, n);
}

/* The JSON string at `p` decoded into a new NUL-terminated buffer; NULL if `p` is not a string. */
static char *zc_decode_string(const char *p) {
    p = zc_ws(p);
    if (*p != '"') return NULL;
    zc_buf b = {0};
    zc_put(&b, "");
    for (p++; *p != '"'; p++) {
        if (!*p) zc_malformed("unterminated string");
        if (*p != '\\') { zc_putn(&b, p, 1); continue; }
        p++;
        switch (*p) {
        case '"': zc_put(&b, "\""); break;
        case '\\': zc_put(&b, "\\"); break;
        case '/': zc_put(&b, "/"); break;
        case 'b': zc_put(&b, "\b"); break;
        case 'f': zc_put(&b, "\f"); break;
        case 'n': zc_put(&b, "\n"); break;
        case 'r': zc_put(&b, "\r"); break;
        case 't': zc_put(&b, "\t"); break;
        case 'u': {
            unsigned cp = zc_hex4(p + 1);
            p += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && p[1] == '\\' && p[2] == 'u') {
                unsigned low = zc_hex4(p + 3);
                if (low >= 0xdc00 && low < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                    p += 6;
                }
            }
            if (cp == 0) zc_malformed("string holds a NUL character");
            zc_put_utf8(&b, cp);
            break;
        }
        default: zc_malformed("bad escape in string");
        }
    }
    return b.text;
}

/* The value of `key` in the JSON object `obj`, or NULL when absent. */
static const char *zc_find(const char *obj, const char *key) {
    const char *p = zc_ws(obj);
    if (*p++ != '{') return NULL;
    p = zc_ws(p);
    if (*p == '}') return NULL;
    for (;;) {
        char *name = zc_decode_string(p);
        if (!name) zc_malformed("object key is not a string");
        p = zc_ws(zc_skip(p, 0));
        if (*p++ != ':') zc_malformed("missing ':' in object");
        int hit = strcmp(name, key) == 0;
        free(name);
        if (hit) return zc_ws(p);
        p = zc_skip(p, 0);
        if (!p) zc_malformed("bad value in object");
        p = zc_ws(p);
        if (*p == ',') { p = zc_ws(p + 1); continue; }
        return NULL;
    }
}

static char *zc_string_field(const char *obj, const char *key) {
    const char *v = zc_find(obj, key);
    char *s = v ? zc_decode_string(v) : NULL;
    if (!s) {
        fprintf(stderr, "malformed request: field '%s' is missing or not a string\n", key);
        exit(2);
    }
    return s;
}

/* Read and check the request on stdin. */
static void zc_read_request(zc_request *req) {
    zc_buf in = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
        zc_putn(&in, chunk, n);
        if (in.len > ZC_MAX_REQUEST) zc_malformed("request too large");
    }
    if (!in.text || memchr(in.text, 0, in.len)) zc_malformed("empty request or NUL in it");
    if (!zc_skip(in.text, 0)) zc_malformed("request is not JSON");
    const char *version = zc_find(in.text, "protocol_version");
    if (!version || version[0] != '0' || (version[1] >= '0' && version[1] <= '9'))
        zc_malformed("protocol_version is not 0");
    req->raw = in.text;
    req->request_id = zc_string_field(in.text, "request_id");
    req->tool = zc_string_field(in.text, "tool");
    req->cwd = zc_string_field(in.text, "cwd");
    req->args = zc_string_field(in.text, "args_json");
    if (*zc_ws(req->args) != '{' || !zc_skip(req->args, 0)) zc_malformed("args_json is not an object");
}

/* A string argument, or NULL when it is absent (the runner already checked its type). */
static char *zc_arg_string(const zc_request *req, const char *name) {
    const char *v = zc_find(req->args, name);
    return v ? zc_decode_string(v) : NULL;
}

/* An integer argument, or `fallback` when it is absent. */
static long long zc_arg_int(const zc_request *req, const char *name, long long fallback) {
    const char *v = zc_find(req->args, name);
    return v ? strtoll(v, NULL, 10) : fallback;
}

/* Write the response: `data_json` is the JSON text of the result. */
static void zc_respond(const zc_request *req, int ok, const char *data_json, const char *out, const char *err) {
    zc_buf b = {0};
    zc_put(&b, "{\"protocol_version\":0,\"request_id\":");
    zc_put_json_string(&b, req->request_id);
    zc_put(&b, ok ? ",\"ok\":true,\"data_json\":" : ",\"ok\":false,\"data_json\":");
    zc_put_json_string(&b, data_json);
    zc_put(&b, ",\"stdout\":");
    zc_put_json_string(&b, out);
    zc_put(&b, ",\"stderr\":");
    zc_put_json_string(&b, err);
    zc_put(&b, "}");
    if (fwrite(b.text, 1, b.len, stdout) != b.len || fflush(stdout) != 0) exit(1);
}

/* A tool-reported failure: data {"error": message}. */
static void zc_fail(const zc_request *req, const char *message) {
    zc_buf data = {0};
    zc_put(&data, "{\"error\":");
    zc_put_json_string(&data, message);
    zc_put(&data, "}");
    zc_respond(req, 0, data.text, "", message);
}

#endif
