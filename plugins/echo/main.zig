//! echo: returns its `text` argument unchanged.

const protocol = @import("protocol");

pub fn main() void {
    const req = protocol.readRequest();
    const text = req.string("text");
    protocol.respond(req, true, protocol.json(.{ .echo = text }), "echo ok", "");
}
