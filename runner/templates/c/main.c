/* {{name}}: a zigclaw tool (protocol v0) in C, scaffolded by `zigclaw tools new`.
 * It greets `name`. Change the arguments in {{name}}.toml and the work below,
 * then run ./build.sh and `zigclaw tools validate .`. */
#include "zigclaw_protocol.h"

int main(void) {
    zc_request req;
    zc_read_request(&req);

    char *name = zc_arg_string(&req, "name");
    if (!name) {
        zc_fail(&req, "missing argument: name");
        return 0;
    }
    zc_buf greeting = {0};
    zc_put(&greeting, "hello, ");
    zc_put(&greeting, name);

    zc_buf data = {0};
    zc_put(&data, "{\"greeting\":");
    zc_put_json_string(&data, greeting.text);
    zc_put(&data, "}");
    zc_respond(&req, 1, data.text, "{{name}} ok", "");
    return 0;
}
