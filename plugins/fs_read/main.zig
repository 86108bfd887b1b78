//! fs_read: returns a file's bytes as base64, refusing files over `max_bytes`.

const std = @import("std");
const protocol = @import("protocol");

pub fn main() void {
    const req = protocol.readRequestInCwd();
    const path = protocol.pathZ(req.string("path"));
    const max_bytes: usize = @intCast(req.integer("max_bytes", 65536, 1, 1048576));

    const fd = std.c.open(path, .{ .read = true });
    if (fd < 0) return protocol.respondErrno(req, "open");
    defer _ = std.c.close(fd);

    // One byte past the cap tells "exactly max_bytes" from "larger" without a stat.
    const buf = protocol.allocator.alloc(u8, max_bytes + 1) catch protocol.malformed("out of memory", "");
    var len: usize = 0;
    while (len < buf.len) {
        const n = std.c.read(fd, buf[len..].ptr, buf.len - len);
        if (n < 0) {
            if (std.c.errno(n) == .INTR) continue;
            return protocol.respondErrno(req, "read");
        }
        if (n == 0) break;
        len += @intCast(n);
    }
    if (len > max_bytes) {
        return protocol.respond(req, false, protocol.json(.{ .@"error" = "file larger than max_bytes" }), "", "");
    }

    const encoder = std.base64.standard.Encoder;
    const encoded = protocol.allocator.alloc(u8, encoder.calcSize(len)) catch protocol.malformed("out of memory", "");
    const content = encoder.encode(encoded, buf[0..len]);
    protocol.respond(req, true, protocol.json(.{ .content_base64 = content }), "fs_read ok", "");
}
