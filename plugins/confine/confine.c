/*
 * zigclaw-confine: the exec helper that confines one native tool, then runs it.
 *
 * The Python runner is multi-threaded, so it does no work between fork and exec:
 * it starts this small static program (subprocess's fork+exec is safe with threads),
 * which is single-threaded and applies, in order:
 *
 *   1. a new user namespace (identity uid/gid map), pid namespace and, when the
 *      network is denied, network namespace (only a loopback that is down);
 *   2. resource limits (RLIMIT_NPROC set after the user namespace exists, so it
 *      counts only this sandbox's processes);
 *   3. fork: the child is pid 1 of the new pid namespace, so when it exits or is
 *      killed the kernel kills every process left in it; it lowers the
 *      namespace's pid_max (a process cap that binds root too, Linux >= 6.14);
 *   4. no_new_privs and a Landlock ruleset (filesystem, TCP when denied, scopes);
 *   5. every capability dropped (bounding, ambient, effective, permitted) with
 *      SECBIT_NOROOT locked, so uid 0 in the namespace regains none at exec;
 *   6. a seccomp filter against what Landlock and the namespaces do not cover:
 *      unix sockets (a pathname socket such as /run/docker.sock is reachable
 *      through any namespace), the kernel keyrings, io_uring, bpf, perf,
 *      userfaultfd, ptrace and new namespaces;
 *   7. execveat() of the tool's bytes from a sealed memfd (what was hashed runs).
 *
 * Any failure before exec is written to the status fd as "<kind>\t<message>\n"
 * (kind: unavailable, exec, setup) and the helper exits 127. The status fd is
 * close-on-exec: end-of-file with no bytes means the tool is running.
 *
 * `--probe` prints what the kernel offers: "landlock=N userns=0|1 netns=0|1 pidmax=0|1".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_execveat
#define SYS_execveat 322
#endif

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1

#define FS_EXECUTE (1ULL << 0)
#define FS_WRITE_FILE (1ULL << 1)
#define FS_READ_FILE (1ULL << 2)
#define FS_READ_DIR (1ULL << 3)
#define FS_REMOVE_DIR (1ULL << 4)
#define FS_REMOVE_FILE (1ULL << 5)
#define FS_MAKE_CHAR (1ULL << 6)
#define FS_MAKE_DIR (1ULL << 7)
#define FS_MAKE_REG (1ULL << 8)
#define FS_MAKE_SOCK (1ULL << 9)
#define FS_MAKE_FIFO (1ULL << 10)
#define FS_MAKE_BLOCK (1ULL << 11)
#define FS_MAKE_SYM (1ULL << 12)
#define FS_REFER (1ULL << 13)
#define FS_TRUNCATE (1ULL << 14)
#define FS_IOCTL_DEV (1ULL << 15)
#define NET_BIND_TCP (1ULL << 0)
#define NET_CONNECT_TCP (1ULL << 1)
#define SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define SCOPE_SIGNAL (1ULL << 1)

/* Rights that may be granted on a file (not a directory). */
#define FS_FILE_RIGHTS (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV)
#define FS_RO (FS_READ_FILE | FS_READ_DIR)
#define FS_RX (FS_RO | FS_EXECUTE)
/* Write paths: files and folders, no devices, fifos, sockets, symlinks or executables. */
#define FS_RW                                                                                        \
    (FS_RO | FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_DIR | FS_MAKE_REG | FS_REFER | \
     FS_TRUNCATE)
/* /dev/null and friends. */
#define FS_DEV (FS_READ_FILE | FS_WRITE_FILE)

struct ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

#define MAX_RULES 128
/* The kernel's minimum pid_max (RESERVED_PIDS + 1). */
#define PID_MAX_MIN 301

struct rule {
    const char *path;
    uint64_t access;
    int optional; /* a system path that may not exist on this machine */
    int check;    /* compare the opened folder with the identity the runner checked */
    unsigned long long dev, ino;
};

static int status_fd = -1;
static int best_effort = 0;

static void fail_with(const char *kind, const char *what, const char *why) {
    char buf[512];
    int n = snprintf(buf, sizeof buf, "%s\t%s: %s\n", kind, what, why);
    if (status_fd >= 0 && n > 0) {
        ssize_t ignored = write(status_fd, buf, (size_t)n);
        (void)ignored;
    }
    _exit(127);
}

static void fail(const char *kind, const char *what, int err) {
    fail_with(kind, what, err ? strerror(err) : "failed");
}

/* A confinement step the kernel refused: fatal unless the operator opted into best effort. */
static int unavailable(const char *what, int err) {
    if (!best_effort) fail("unavailable", what, err);
    return -1;
}

static int landlock_abi(void) {
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
    return abi < 0 ? 0 : (int)abi;
}

static uint64_t handled_fs(int abi) {
    uint64_t fs = (FS_MAKE_SYM << 1) - 1; /* every ABI 1 right */
    if (abi >= 2) fs |= FS_REFER;
    if (abi >= 3) fs |= FS_TRUNCATE;
    if (abi >= 5) fs |= FS_IOCTL_DEV;
    return fs;
}

static int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    int err = errno;
    close(fd);
    errno = err;
    return n == (ssize_t)len ? 0 : -1;
}

/* Map our own uid and gid into the new user namespace, so the tool sees its usual ids. */
static int map_ids(uid_t uid, gid_t gid) {
    char line[64];
    if (write_file("/proc/self/setgroups", "deny") != 0 && errno != ENOENT) return -1;
    snprintf(line, sizeof line, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
    if (write_file("/proc/self/uid_map", line) != 0) return -1;
    snprintf(line, sizeof line, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
    return write_file("/proc/self/gid_map", line);
}

static int set_pid_max(void) {
    char text[16];
    snprintf(text, sizeof text, "%d", PID_MAX_MIN);
    return write_file("/proc/sys/kernel/pid_max", text);
}

static int probe(void) {
    int abi = landlock_abi();
    int userns = 0, netns = 0, pidmax = 0;
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        char result[3] = {'0', '0', '0'};
        uid_t uid = getuid();
        gid_t gid = getgid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWPID) == 0 && map_ids(uid, gid) == 0) {
            result[0] = '1';
            if (unshare(CLONE_NEWNET) == 0) result[1] = '1';
            pid_t child = fork();
            if (child == 0) _exit(set_pid_max() == 0 ? 0 : 1);
            int st = 0;
            if (child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0)
                result[2] = '1';
        }
        ssize_t ignored = write(fds[1], result, sizeof result);
        (void)ignored;
        _exit(0);
    }
    close(fds[1]);
    char result[3] = {'0', '0', '0'};
    if (pid > 0) {
        ssize_t n = read(fds[0], result, sizeof result);
        if (n != (ssize_t)sizeof result) memset(result, '0', sizeof result);
        waitpid(pid, NULL, 0);
    }
    userns = result[0] == '1';
    netns = result[1] == '1';
    pidmax = result[2] == '1';
    printf("landlock=%d userns=%d netns=%d pidmax=%d\n", abi, userns, netns, pidmax);
    return 0;
}

static void set_limit(int resource, unsigned long long value, const char *what) {
    struct rlimit lim = {(rlim_t)value, (rlim_t)value};
    if (setrlimit(resource, &lim) != 0) fail("setup", what, errno);
}

static unsigned long long parse_number(const char *text, const char *what) {
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || end == text || *end) fail("setup", what, EINVAL);
    return value;
}

static void apply_landlock(int abi, struct rule *rules, int nrules, int deny_net) {
    if (abi < 1) {
        unavailable("Landlock is not available (Linux >= 5.13 with landlock in the LSM list)", ENOSYS);
        return;
    }
    uint64_t fs = handled_fs(abi);
    struct ruleset_attr attr = {.handled_access_fs = fs, .handled_access_net = 0, .scoped = 0};
    size_t size = sizeof attr.handled_access_fs;
    if (abi >= 4) {
        size = offsetof(struct ruleset_attr, scoped);
        if (deny_net) attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP;
    }
    if (abi >= 6) {
        size = sizeof attr;
        attr.scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL;
    }
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (ruleset < 0) fail("unavailable", "landlock_create_ruleset", errno);
    for (int i = 0; i < nrules; i++) {
        int fd = open(rules[i].path, O_PATH | O_CLOEXEC);
        if (fd < 0) {
            if (rules[i].optional && (errno == ENOENT || errno == ENOTDIR)) continue;
            fail("setup", rules[i].path, errno);
        }
        struct stat st;
        if (fstat(fd, &st) != 0) fail("setup", rules[i].path, errno);
        if (rules[i].check &&
            ((unsigned long long)st.st_dev != rules[i].dev || (unsigned long long)st.st_ino != rules[i].ino))
            fail_with("setup", rules[i].path, "changed after it was checked; not mapped");
        uint64_t access = rules[i].access & fs;
        if (!S_ISDIR(st.st_mode)) access &= FS_FILE_RIGHTS;
        struct path_beneath_attr rule = {.allowed_access = access, .parent_fd = fd};
        if (access && syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &rule, 0) != 0)
            fail("setup", rules[i].path, errno);
        close(fd);
    }
    if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) fail("setup", "landlock_restrict_self", errno);
    close(ruleset);
}

#if defined(__x86_64__)
#define SECCOMP_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SECCOMP_ARCH AUDIT_ARCH_AARCH64
#else
#error "zigclaw-confine: add the audit arch of this machine"
#endif

#define NAMESPACE_FLAGS \
    (CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)
#define DENY(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)
#define ARG0_LOW offsetof(struct seccomp_data, args[0])

static void apply_seccomp(void) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
        /* The x32 ABI numbers the same calls differently: none of it is allowed. */
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
#endif
        DENY(SYS_keyctl), DENY(SYS_add_key), DENY(SYS_request_key),
        DENY(SYS_io_uring_setup), DENY(SYS_io_uring_enter), DENY(SYS_io_uring_register),
        DENY(SYS_bpf), DENY(SYS_perf_event_open), DENY(SYS_userfaultfd), DENY(SYS_ptrace),
        DENY(SYS_process_vm_readv), DENY(SYS_process_vm_writev),
        DENY(SYS_unshare), DENY(SYS_setns), DENY(SYS_mount), DENY(SYS_umount2), DENY(SYS_pivot_root),
        /* clone3 passes its flags in memory a filter cannot read: libc falls back to clone. */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        /* clone: no new namespaces. */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_LOW),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, NAMESPACE_FLAGS, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* socket: no AF_UNIX (socketpair stays: it reaches nothing outside). */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_LOW),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = (unsigned short)(sizeof filter / sizeof filter[0]), .filter = filter};
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) unavailable("seccomp", errno);
}

/* Leave no capability to the tool, not even in its own user namespace (where root would keep all). */
static void drop_capabilities(void) {
    for (int cap = 0; cap <= 63; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) fail("setup", "PR_CAPBSET_DROP", errno);
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        fail("setup", "PR_CAP_AMBIENT", errno);
    unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                         SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
    if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0) unavailable("securebits", errno);
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) != 0) fail("setup", "capset", errno);
}

static void usage(void) {
    fprintf(stderr,
            "usage: zigclaw-confine --probe\n"
            "       zigclaw-confine --status-fd N --exec-fd N [--ro P] [--rw P] [--rx P] [--sys P]\n"
            "                       [--expect DEV:INO (of the path before)]\n"
            "                       [--dev P] [--no-net] [--as B] [--cpu S] [--fsize B] [--nofile N]\n"
            "                       [--nproc N] [--script] [--best-effort] -- ARGV0\n");
    _exit(2);
}

int main(int argc, char **argv) {
    static struct rule rules[MAX_RULES];
    int nrules = 0, exec_fd = -1, deny_net = 0, script = 0;
    unsigned long long as = 0, cpu = 0, fsize = 0, nofile = 0, nproc = 0;
    char *tool_argv0 = NULL;

    if (argc == 2 && strcmp(argv[1], "--probe") == 0) return probe();
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (strcmp(opt, "--") == 0) {
            if (i + 1 < argc) tool_argv0 = argv[i + 1];
            break;
        }
        if (strcmp(opt, "--no-net") == 0) {
            deny_net = 1;
            continue;
        }
        if (strcmp(opt, "--script") == 0) {
            script = 1;
            continue;
        }
        if (strcmp(opt, "--best-effort") == 0) {
            best_effort = 1;
            continue;
        }
        if (i + 1 >= argc) usage();
        const char *value = argv[++i];
        uint64_t access = 0;
        int optional = 0;
        if (strcmp(opt, "--status-fd") == 0) {
            status_fd = (int)parse_number(value, "--status-fd");
            fcntl(status_fd, F_SETFD, FD_CLOEXEC);
        } else if (strcmp(opt, "--expect") == 0) {
            char *colon = strchr(value, ':');
            if (nrules == 0 || colon == NULL) usage();
            *colon = 0;
            rules[nrules - 1].dev = parse_number(value, "--expect");
            rules[nrules - 1].ino = parse_number(colon + 1, "--expect");
            rules[nrules - 1].check = 1;
        } else if (strcmp(opt, "--exec-fd") == 0) {
            exec_fd = (int)parse_number(value, "--exec-fd");
        } else if (strcmp(opt, "--as") == 0) {
            as = parse_number(value, opt);
        } else if (strcmp(opt, "--cpu") == 0) {
            cpu = parse_number(value, opt);
        } else if (strcmp(opt, "--fsize") == 0) {
            fsize = parse_number(value, opt);
        } else if (strcmp(opt, "--nofile") == 0) {
            nofile = parse_number(value, opt);
        } else if (strcmp(opt, "--nproc") == 0) {
            nproc = parse_number(value, opt);
        } else if (strcmp(opt, "--ro") == 0) {
            access = FS_RO;
        } else if (strcmp(opt, "--rw") == 0) {
            access = FS_RW;
        } else if (strcmp(opt, "--rx") == 0) {
            access = FS_RX;
        } else if (strcmp(opt, "--sys") == 0) {
            access = FS_RX;
            optional = 1;
        } else if (strcmp(opt, "--dev") == 0) {
            access = FS_DEV;
            optional = 1;
        } else {
            usage();
        }
        if (access) {
            if (nrules >= MAX_RULES) fail("setup", "too many paths", E2BIG);
            rules[nrules++] = (struct rule){value, access, optional, 0, 0, 0};
        }
    }
    if (exec_fd < 0 || tool_argv0 == NULL) usage();

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("setup", "no_new_privs", errno);
    int abi = landlock_abi();
    uid_t uid = getuid();
    gid_t gid = getgid();
    int flags = CLONE_NEWUSER | CLONE_NEWPID | (deny_net ? CLONE_NEWNET : 0);
    int in_pidns = 0;
    int shared = unshare(flags);
    if (shared != 0 && deny_net) {
        /* Best effort only: user and pid namespaces without a network namespace. */
        unavailable("network namespaces", errno);
        shared = unshare(flags & ~CLONE_NEWNET);
    }
    if (shared == 0) {
        if (map_ids(uid, gid) != 0) fail("unavailable", "user namespace id map", errno);
        in_pidns = 1;
    } else {
        unavailable("unprivileged user and pid namespaces", errno);
    }

    /* Limits that every process of the sandbox inherits. */
    set_limit(RLIMIT_CORE, 0, "RLIMIT_CORE");
    if (cpu) set_limit(RLIMIT_CPU, cpu, "RLIMIT_CPU");
    if (fsize) set_limit(RLIMIT_FSIZE, fsize, "RLIMIT_FSIZE");
    if (nofile) set_limit(RLIMIT_NOFILE, nofile, "RLIMIT_NOFILE");
    if (nproc) set_limit(RLIMIT_NPROC, nproc, "RLIMIT_NPROC");

    pid_t supervisor = getpid();
    pid_t child = fork();
    if (child < 0) fail("setup", "fork", errno);
    if (child > 0) {
        /* The supervisor: outside the pid namespace, it only relays how pid 1 ended. */
        close(exec_fd);
        if (status_fd >= 0) close(status_fd);
        int st = 0;
        while (waitpid(child, &st, 0) < 0) {
            if (errno != EINTR) _exit(127);
        }
        if (WIFEXITED(st)) _exit(WEXITSTATUS(st));
        _exit(128 + WTERMSIG(st));
    }

    /* pid 1 of the sandbox: it dies with the supervisor, and the namespace dies with it. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) fail("setup", "pdeathsig", errno);
    /* Without a pid namespace (best effort), a supervisor that died before the prctl is noticed here. */
    if (!in_pidns && getppid() != supervisor) _exit(127);
    if (in_pidns && set_pid_max() != 0 && (uid == 0 || !nproc))
        unavailable("a per-namespace pid_max (Linux >= 6.14), the process cap for root", errno);
    apply_landlock(abi, rules, nrules, deny_net);
    if (as) set_limit(RLIMIT_AS, as, "RLIMIT_AS");
    /* A script's interpreter opens it as /dev/fd/N, so then the memfd stays open (read-only, sealed). */
    if (!script && fcntl(exec_fd, F_SETFD, FD_CLOEXEC) != 0) fail("setup", "exec fd", errno);
    drop_capabilities();
    apply_seccomp();

    char *tool_args[] = {tool_argv0, NULL};
    extern char **environ;
    syscall(SYS_execveat, exec_fd, "", tool_args, environ, AT_EMPTY_PATH);
    fail("exec", "cannot execute the tool", errno);
    return 127;
}
