//! {{name}}: a zigclaw tool (protocol v0) in Zig, scaffolded by `zigclaw tools new`.
//! It greets `name`. Change the arguments in {{name}}.toml and the work below,
//! then run ./build.sh and `zigclaw tools validate .`.

const std = @import("std");
const protocol = @import("protocol.zig");

pub fn main() void {
    const req = protocol.readRequest();
    const name = req.string("name");
    const greeting = std.fmt.allocPrint(protocol.allocator, "hello, {s}", .{name}) catch
        protocol.malformed("out of memory", "");
    protocol.respond(req, true, protocol.json(.{ .greeting = greeting }), "{{name}} ok", "");
}
