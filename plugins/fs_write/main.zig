//! fs_write: creates or truncates a file and writes `content` to it.

const std = @import("std");
const protocol = @import("protocol");

pub fn main() void {
    const req = protocol.readRequestInCwd();
    const path = protocol.pathZ(req.string("path"));
    const content = req.string("content");

    const fd = std.c.open(path, .{ .write = true, .CREAT = true, .TRUNC = true }, @as(c_uint, 0o644));
    if (fd < 0) return protocol.respondErrno(req, "write");
    defer _ = std.c.close(fd);

    var rest = content;
    while (rest.len > 0) {
        const n = std.c.write(fd, rest.ptr, rest.len);
        if (n < 0) {
            if (std.c.errno(n) == .INTR) continue;
            return protocol.respondErrno(req, "write");
        }
        if (n == 0) return protocol.respondErrno(req, "write");
        rest = rest[@intCast(n)..];
    }
    protocol.respond(req, true, protocol.json(.{ .bytes_written = content.len }), "fs_write ok", "");
}
