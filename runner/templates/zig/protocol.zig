//! Protocol v0 for the built-in tools (WASI and native): one JSON request on stdin, one JSON
//! response on stdout (SPEC section 5). A request this module cannot make sense of
//! is a host bug, not a tool failure: it says why on stderr and exits with code 2.

const std = @import("std");
const builtin = @import("builtin");

/// The guest never frees: a tool handles one request and exits. Native tools link libc.
pub const allocator = if (builtin.cpu.arch.isWasm()) std.heap.wasm_allocator else std.heap.c_allocator;

/// Bound on the request: 1 MiB of `content` may grow up to 6x when escaped twice over.
const max_request_bytes = 16 * 1024 * 1024;

const stdin_fd = 0;
const stdout_fd = 1;
const stderr_fd = 2;

/// A decoded request, with `args_json` already parsed to an object.
pub const Request = struct {
    request_id: []const u8,
    tool: []const u8,
    cwd: []const u8,
    args: std.json.ObjectMap,

    /// A required string argument.
    pub fn string(self: Request, name: []const u8) []const u8 {
        const value = self.args.get(name) orelse malformed("missing argument", name);
        return switch (value) {
            .string => |s| s,
            else => malformed("argument must be a string", name),
        };
    }

    /// An optional integer argument within [min, max].
    pub fn integer(self: Request, name: []const u8, default: i64, min: i64, max: i64) i64 {
        const value = self.args.get(name) orelse return default;
        const n = switch (value) {
            .integer => |n| n,
            else => malformed("argument must be an integer", name),
        };
        if (n < min or n > max) malformed("argument out of range", name);
        return n;
    }
};

/// Report a request that breaks the protocol and exit with code 2, writing nothing on stdout.
pub fn malformed(reason: []const u8, detail: []const u8) noreturn {
    _ = writeAll(stderr_fd, "malformed request: ");
    _ = writeAll(stderr_fd, reason);
    if (detail.len > 0) {
        _ = writeAll(stderr_fd, ": ");
        _ = writeAll(stderr_fd, detail);
    }
    _ = writeAll(stderr_fd, "\n");
    std.process.exit(2);
}

/// Read and check the request.
pub fn readRequest() Request {
    const input = readStdin();
    const root = std.json.parseFromSliceLeaky(std.json.Value, allocator, input, .{}) catch
        malformed("stdin is not JSON", "");
    const obj = switch (root) {
        .object => |o| o,
        else => malformed("request is not a JSON object", ""),
    };
    const version = obj.get("protocol_version") orelse malformed("missing field", "protocol_version");
    switch (version) {
        .integer => |v| if (v != 0) malformed("unsupported protocol_version", ""),
        else => malformed("protocol_version must be an integer", ""),
    }
    switch (obj.get("mounts") orelse malformed("missing field", "mounts")) {
        .array => {},
        else => malformed("field must be an array", "mounts"),
    }
    const args_json = stringField(obj, "args_json");
    const args = std.json.parseFromSliceLeaky(std.json.Value, allocator, args_json, .{}) catch
        malformed("args_json is not JSON", "");
    const req: Request = .{
        .request_id = stringField(obj, "request_id"),
        .tool = stringField(obj, "tool"),
        .cwd = stringField(obj, "cwd"),
        .args = switch (args) {
            .object => |o| o,
            else => malformed("args_json is not a JSON object", ""),
        },
    };
    return req;
}

/// Read and check the request, then chdir to its `cwd` so relative paths resolve there.
/// Only tools that open files need this: the chdir costs host calls.
pub fn readRequestInCwd() Request {
    const req = readRequest();
    if (std.c.chdir(pathZ(req.cwd)) != 0) malformed("cannot chdir to cwd", lastErrnoName());
    return req;
}

fn stringField(obj: std.json.ObjectMap, name: []const u8) []const u8 {
    const value = obj.get(name) orelse malformed("missing field", name);
    return switch (value) {
        .string => |s| s,
        else => malformed("field must be a string", name),
    };
}

fn readStdin() []const u8 {
    var buf: std.ArrayList(u8) = .empty;
    while (true) {
        buf.ensureUnusedCapacity(allocator, 64 * 1024) catch malformed("out of memory", "");
        const spare = buf.unusedCapacitySlice();
        const n = std.c.read(stdin_fd, spare.ptr, spare.len);
        if (n < 0) {
            if (std.c.errno(n) == .INTR) continue;
            malformed("cannot read stdin", "");
        }
        if (n == 0) return buf.items;
        buf.items.len += @intCast(n);
        if (buf.items.len > max_request_bytes) malformed("request too large", "");
    }
}

/// A NUL-terminated copy of a path; a path holding NUL is refused as malformed.
pub fn pathZ(path: []const u8) [:0]const u8 {
    if (std.mem.indexOfScalar(u8, path, 0) != null) malformed("path contains NUL", "");
    return allocator.dupeSentinel(u8, path, 0) catch malformed("out of memory", "");
}

/// The name of the last libc error (`NOENT`, `ROFS`, ...), or its number.
pub fn lastErrnoName() []const u8 {
    return errnoName(std.c.errno(@as(c_int, -1)));
}

fn errnoName(e: std.c.E) []const u8 {
    if (std.enums.tagName(std.c.E, e)) |name| return name;
    return std.fmt.allocPrint(allocator, "{d}", .{@backingInt(e)}) catch "unknown";
}

/// Serialise any value as JSON text, e.g. the `data_json` of a response.
pub fn json(value: anytype) []const u8 {
    return std.json.Stringify.valueAlloc(allocator, value, .{}) catch malformed("out of memory", "");
}

/// Write the response as one buffer on stdout. A failed write leaves the host no answer: exit 1.
pub fn respond(req: Request, ok: bool, data_json: []const u8, stdout_text: []const u8, stderr_text: []const u8) void {
    const body = json(.{
        .protocol_version = @as(u8, 0),
        .request_id = req.request_id,
        .ok = ok,
        .data_json = data_json,
        .stdout = stdout_text,
        .stderr = stderr_text,
    });
    if (!writeAll(stdout_fd, body)) std.process.exit(1);
}

/// A tool-reported failure: `{"error":"<what> failed"}`, stderr `<what> failed: <errno>`.
pub fn respondErrno(req: Request, comptime what: []const u8) void {
    const errno = lastErrnoName();
    const detail = std.fmt.allocPrint(allocator, what ++ " failed: {s}", .{errno}) catch malformed("out of memory", "");
    respond(req, false, json(.{ .@"error" = what ++ " failed" }), "", detail);
}

fn writeAll(fd: c_int, bytes: []const u8) bool {
    var rest = bytes;
    while (rest.len > 0) {
        const n = std.c.write(fd, rest.ptr, rest.len);
        if (n < 0) {
            if (std.c.errno(n) == .INTR) continue;
            return false;
        }
        if (n == 0) return false;
        rest = rest[@intCast(n)..];
    }
    return true;
}
