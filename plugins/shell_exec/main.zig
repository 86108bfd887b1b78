//! shell_exec (native): runs one command line with /bin/sh and returns its exit code and output.
//! The command may hold only [A-Za-z0-9 ._/:=,-]: no quoting, expansion, redirection or chaining.

const std = @import("std");
const protocol = @import("protocol");

/// Output kept per stream; the rest is dropped and `truncated` says so.
const max_capture = 256 * 1024;

fn allowed(c: u8) bool {
    return std.ascii.isAlphanumeric(c) or std.mem.indexOfScalar(u8, " ._/:=,-", c) != null;
}

const Capture = struct {
    fd: c_int,
    buf: std.ArrayList(u8) = .empty,
    truncated: bool = false,
    open: bool = true,

    fn pump(self: *Capture) void {
        var chunk: [16384]u8 = undefined;
        const n = std.c.read(self.fd, &chunk, chunk.len);
        if (n < 0) {
            if (std.c.errno(n) == .INTR) return;
            self.open = false;
            return;
        }
        if (n == 0) {
            self.open = false;
            return;
        }
        const got = chunk[0..@intCast(n)];
        const room = max_capture - self.buf.items.len;
        const keep = @min(room, got.len);
        if (keep < got.len) self.truncated = true;
        self.buf.appendSlice(protocol.allocator, got[0..keep]) catch protocol.malformed("out of memory", "");
    }

    /// The captured bytes as JSON-safe text: bytes outside valid UTF-8 become '?'.
    fn text(self: *Capture) []const u8 {
        const bytes = self.buf.items;
        if (std.unicode.utf8ValidateSlice(bytes)) return bytes;
        for (bytes) |*b| {
            if (b.* >= 0x80) b.* = '?';
        }
        return bytes;
    }
};

pub fn main() void {
    const req = protocol.readRequest();
    const command = req.string("command");
    if (command.len == 0 or command.len > 4096) {
        return protocol.respond(req, false, protocol.json(.{ .@"error" = "command must be 1..4096 characters" }), "", "");
    }
    for (command) |c| {
        if (!allowed(c)) {
            return protocol.respond(req, false, protocol.json(.{ .@"error" = "command holds a character outside [A-Za-z0-9 ._/:=,-]" }), "", "");
        }
    }
    const command_z = protocol.pathZ(command);

    var out_fds: [2]c_int = undefined;
    var err_fds: [2]c_int = undefined;
    if (std.c.pipe(&out_fds) != 0 or std.c.pipe(&err_fds) != 0) return protocol.respondErrno(req, "pipe");

    const pid = std.c.fork();
    if (pid < 0) return protocol.respondErrno(req, "fork");
    if (pid == 0) {
        const devnull = std.c.open("/dev/null", .{ .ACCMODE = .RDONLY });
        if (devnull >= 0) _ = std.c.dup2(devnull, 0) else _ = std.c.close(0);
        _ = std.c.dup2(out_fds[1], 1);
        _ = std.c.dup2(err_fds[1], 2);
        for ([_]c_int{ out_fds[0], out_fds[1], err_fds[0], err_fds[1] }) |fd| _ = std.c.close(fd);
        const argv = [_:null]?[*:0]const u8{ "sh", "-c", command_z };
        _ = std.c.execve("/bin/sh", &argv, @ptrCast(std.c.environ));
        std.c._exit(127);
    }
    _ = std.c.close(out_fds[1]);
    _ = std.c.close(err_fds[1]);

    var out: Capture = .{ .fd = out_fds[0] };
    var err: Capture = .{ .fd = err_fds[0] };
    while (out.open or err.open) {
        var fds = [2]std.c.pollfd{
            .{ .fd = if (out.open) out.fd else -1, .events = std.c.POLL.IN, .revents = 0 },
            .{ .fd = if (err.open) err.fd else -1, .events = std.c.POLL.IN, .revents = 0 },
        };
        const ready = std.c.poll(&fds, fds.len, -1);
        if (ready < 0) {
            if (std.c.errno(ready) == .INTR) continue;
            return protocol.respondErrno(req, "poll");
        }
        if (fds[0].revents != 0) out.pump();
        if (fds[1].revents != 0) err.pump();
    }

    var status: c_int = 0;
    while (std.c.waitpid(pid, &status, 0) < 0) {
        if (std.c.errno(@as(c_int, -1)) != .INTR) return protocol.respondErrno(req, "waitpid");
    }
    const raw: u32 = @bitCast(status);
    const exit_code: i64 = if (raw & 0x7f == 0) @intCast((raw >> 8) & 0xff) else 128 + @as(i64, raw & 0x7f);

    const data = protocol.json(.{
        .exit_code = exit_code,
        .stdout = out.text(),
        .stderr = err.text(),
        .stdout_truncated = out.truncated,
        .stderr_truncated = err.truncated,
    });
    protocol.respond(req, exit_code == 0, data, "shell_exec ok", "");
}
