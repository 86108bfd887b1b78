//! http_fetch (native, requires_network): one GET or POST to a URL; returns the status and the body.

const std = @import("std");
const protocol = @import("protocol");

/// Bodies larger than this are refused (the manifest's stdout cap holds it, escaped).
const max_body = 1024 * 1024;

fn fail(req: protocol.Request, message: []const u8, detail: []const u8) void {
    protocol.respond(req, false, protocol.json(.{ .@"error" = message }), "", detail);
}

pub fn main(init: std.process.Init) void {
    const req = protocol.readRequest();
    const url = req.string("url");
    const method_name: []const u8 = if (req.args.get("method")) |m| switch (m) {
        .string => |s| s,
        else => protocol.malformed("argument must be a string", "method"),
    } else "GET";
    const payload: ?[]const u8 = if (req.args.get("body")) |b| switch (b) {
        .string => |s| s,
        else => protocol.malformed("argument must be a string", "body"),
    } else null;

    const method: std.http.Method = if (std.mem.eql(u8, method_name, "GET"))
        .GET
    else if (std.mem.eql(u8, method_name, "POST"))
        .POST
    else
        return fail(req, "method must be GET or POST", method_name);
    if (method == .GET and payload != null) return fail(req, "a GET request has no body", "");

    var client: std.http.Client = .{ .allocator = protocol.allocator, .io = init.io };
    defer client.deinit();

    const body_buf = protocol.allocator.alloc(u8, max_body) catch protocol.malformed("out of memory", "");
    var body: std.Io.Writer = .fixed(body_buf);
    const result = client.fetch(.{
        .location = .{ .url = url },
        .method = method,
        .payload = if (method == .POST) (payload orelse "") else null,
        .response_writer = &body,
        .redirect_behavior = .unhandled,
        .keep_alive = false,
    }) catch |err| {
        const name = @errorName(err);
        if (err == error.WriteFailed) return fail(req, "response body is larger than 1 MiB", name);
        return fail(req, "request failed", name);
    };
    const text = body.buffered();
    if (!std.unicode.utf8ValidateSlice(text)) return fail(req, "response body is not UTF-8 text", "");

    const status: u16 = @intFromEnum(result.status);
    const data = protocol.json(.{
        .status_code = status,
        .body = text,
        .url = url,
        .method = method_name,
    });
    protocol.respond(req, true, data, "http_fetch ok", "");
}
