/* SPDX-License-Identifier: Apache-2.0 */
/* sandboxd: the in-sandbox runtime daemon (files and processes over HTTP). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/prctl.h>

#include "as_version.h"
#include "common/duration.h"
#include "common/fdlimit.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "sandboxd/memmerge.h"
#include "sandboxd/sandboxd.h"

struct opts {
    struct sbd_config cfg;
    const char *token_file;
    char *token;
    const char *config_token_file;
    char *config_token;
    usec_t shutdown_timeout;
    enum sbd_memmerge_mode memory_merge; /* --memory-merge or $SANDBOXD_MEMORY_MERGE */
};

struct app {
    uv_loop_t *loop;
    struct sbd *d;
    uv_signal_t sigterm, sigint, sigchld;
    usec_t shutdown_timeout;
    bool stopping;
};

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: sandboxd [options]\n"
        "  --host ADDR              bind address (default ::, every address, IPv4 too)\n"
        "  --port N                 REST port (default 8080; alias --rest-port)\n"
        "  --legacy-port N          python-runtime port (default 8888; -1 disables)\n"
        "  --grpc-port N            gRPC ProcessService port, h2c (default 9090, or\n"
        "                           $SANDBOXD_GRPC_PORT; -1 disables; not the REST port)\n"
        "  --root DIR               confinement root and cwd (default /workspace;\n"
        "                           alias --root-dir; created 0755 if missing)\n"
        "  --legacy-root DIR        root of the legacy API (default: $SANDBOX_BASE_DIR or --root)\n"
        "  --token-file FILE        require 'Authorization: Bearer <token>' (also\n"
        "                           $SANDBOXD_TOKEN); /v1/health and GET / stay open\n"
        "  --config-token-file FILE token of PUT /v1/config/env (late-bound claim\n"
        "                           env; also $SANDBOXD_CONFIG_TOKEN_FILE); unset: disabled\n"
        "  --metadata-env-prefix P  env prefix served by /v1/metadata (default SANDBOX_)\n"
        "  --max-upload BYTES       largest uploaded file (default 1 GiB)\n"
        "  --max-body BYTES         largest buffered request body (default 9 MiB)\n"
        "  --max-output BYTES       cap of buffered stdout/stderr of a run (default 16 MiB)\n"
        "  --max-procs N            concurrent processes (default 64)\n"
        "  --max-bg-procs N         background process table, running + exited (default 32)\n"
        "  --bg-output-buffer BYTES output kept per background process (default 1 MiB)\n"
        "  --kernel-driver PATH     kernel driver of code contexts (default\n"
        "                           /usr/local/lib/agent-sandbox/kernel.py; also\n"
        "                           $SANDBOXD_KERNEL_DRIVER; without that file, the\n"
        "                           driver built into sandboxd)\n"
        "  --kernel-python CMD      interpreter of the driver (default python3; also\n"
        "                           $SANDBOXD_KERNEL_PYTHON)\n"
        "  --max-contexts N         code contexts at once (default 8)\n"
        "  --max-code-output BYTES  output events of one code execution (default 16 MiB)\n"
        "  --code-keepalive D       keepalive event after D of silence in a code\n"
        "                           execution (default 15s; proxies cut idle streams)\n"
        "  --process-keepalive D    after D of silence, a run's answer starts (200) and\n"
        "                           gets a space before its JSON result (so does a long\n"
        "                           background wait), and a process stream or output\n"
        "                           follow a {\"type\":\"keepalive\"} line; again every D\n"
        "                           (default 15s)\n"
        "  --exec-timeout D         default run timeout, whole seconds (default 300s;\n"
        "                           0: none; also $SANDBOX_EXEC_TIMEOUT_SECONDS, seconds > 0)\n"
        "  --header-timeout D, --body-timeout D, --idle-timeout D   slow-client limits\n"
        "  --shutdown-timeout D     graceful shutdown budget (default 10s)\n"
        "  --memory-merge[=MODE]    mark sandboxd and every process it starts mergeable\n"
        "                           by the node's KSM; MODE on (default) or fixed-layout\n"
        "                           (also no address randomization: far more sharing,\n"
        "                           weaker exploit mitigation); also $SANDBOXD_MEMORY_MERGE,\n"
        "                           set from the template's spec.pageMerging; off by default\n"
        "  --log-level LEVEL        error|warn|info|debug|trace (default info)\n"
        "  --log-format FORMAT      text (logfmt, default) or json (JSON lines)\n"
        "  --version\n"
        "Durations (D): seconds (30, 0.5) or Go syntax (500ms, 1m30s).\n");
}

static int parse_u64(const char *s, uint64_t *ret)
{
    if (cstr_to_u64(s, ret) < 0) {
        fprintf(stderr, "sandboxd: not a number: %s\n", s);
        return -EINVAL;
    }
    return 0;
}

static int read_token(const char *path, char **ret)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char b[LIMIT_SBD_TOKEN + 1];
    ssize_t n = read(fd, b, LIMIT_SBD_TOKEN);
    (void)close(fd);
    if (n < 0)
        return -errno;
    struct str t = str_trim(str_make(b, (size_t)n));
    if (t.len == 0)
        return -EINVAL;
    *ret = str_dup(t);
    return 0;
}

enum {
    O_HOST = 256,
    O_PORT,
    O_LPORT,
    O_GPORT,
    O_ROOT,
    O_LROOT,
    O_TOKEN,
    O_PREFIX,
    O_UPLOAD,
    O_BODY,
    O_OUTPUT,
    O_PROCS,
    O_BGPROCS,
    O_BGBUF,
    O_EXEC,
    O_HDR,
    O_BODYT,
    O_IDLE,
    O_SHUT,
    O_LOG,
    O_LOG_FORMAT,
    O_VERSION,
    O_HELP,
    O_CONFIG_TOKEN,
    O_MEMMERGE,
    O_KDRIVER,
    O_KPYTHON,
    O_CONTEXTS,
    O_CODE_OUTPUT,
    O_CODE_KEEPALIVE,
    O_PROC_KEEPALIVE
};

static const struct option long_opts[] = {
    {"host", 1, NULL, O_HOST},
    {"listen-host", 1, NULL, O_HOST},
    {"port", 1, NULL, O_PORT},
    {"rest-port", 1, NULL, O_PORT},
    {"legacy-port", 1, NULL, O_LPORT},
    {"grpc-port", 1, NULL, O_GPORT},
    {"root", 1, NULL, O_ROOT},
    {"root-dir", 1, NULL, O_ROOT},
    {"legacy-root", 1, NULL, O_LROOT},
    {"token-file", 1, NULL, O_TOKEN},
    {"config-token-file", 1, NULL, O_CONFIG_TOKEN},
    {"kernel-driver", 1, NULL, O_KDRIVER},
    {"kernel-python", 1, NULL, O_KPYTHON},
    {"max-contexts", 1, NULL, O_CONTEXTS},
    {"max-code-output", 1, NULL, O_CODE_OUTPUT},
    {"code-keepalive", 1, NULL, O_CODE_KEEPALIVE},
    {"process-keepalive", 1, NULL, O_PROC_KEEPALIVE},
    {"metadata-env-prefix", 1, NULL, O_PREFIX},
    {"max-upload", 1, NULL, O_UPLOAD},
    {"max-body", 1, NULL, O_BODY},
    {"max-output", 1, NULL, O_OUTPUT},
    {"max-procs", 1, NULL, O_PROCS},
    {"max-bg-procs", 1, NULL, O_BGPROCS},
    {"bg-output-buffer", 1, NULL, O_BGBUF},
    {"exec-timeout", 1, NULL, O_EXEC},
    {"header-timeout", 1, NULL, O_HDR},
    {"body-timeout", 1, NULL, O_BODYT},
    {"idle-timeout", 1, NULL, O_IDLE},
    {"http-idle-timeout", 1, NULL, O_IDLE},
    {"shutdown-timeout", 1, NULL, O_SHUT},
    {"log-level", 1, NULL, O_LOG},
    {"memory-merge", 2, NULL, O_MEMMERGE},
    {"log-format", 1, NULL, O_LOG_FORMAT},
    {"version", 0, NULL, O_VERSION},
    {"help", 0, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

static int set_port(const char *s, int *port, bool allow_off)
{
    int64_t v;
    if (cstr_to_i64(s, &v) < 0 || v > 65535 || v < (allow_off ? -1 : 0)) {
        fprintf(stderr, "sandboxd: bad port: %s\n", s);
        return -EINVAL;
    }
    *port = (int)v;
    return 0;
}

static int apply_num(int opt, const char *arg, struct opts *o)
{
    uint64_t v;
    if (parse_u64(arg, &v) < 0)
        return -EINVAL;
    switch (opt) {
    case O_UPLOAD:
        o->cfg.max_upload = v;
        break;
    case O_BODY:
        o->cfg.max_body = (size_t)v;
        break;
    case O_OUTPUT:
        o->cfg.max_output = (size_t)v;
        break;
    case O_PROCS:
        o->cfg.max_procs = (unsigned)v;
        break;
    case O_BGPROCS:
        o->cfg.max_bg_procs = (unsigned)v;
        break;
    case O_BGBUF:
        o->cfg.bg_output_buffer = (size_t)v;
        break;
    default:
        return -EINVAL;
    }
    return 0;
}

/* A duration flag: seconds or Go syntax (common/duration.h). Returns 0 or -EINVAL. */
static int parse_timeout(const char *s, usec_t *ret)
{
    if (duration_parse_secs(s, ret) < 0) {
        fprintf(stderr, "sandboxd: not a duration: %s (seconds, or Go syntax: 500ms, 1m30s)\n", s);
        return -EINVAL;
    }
    return 0;
}

/* The timeouts (O_EXEC..O_SHUT). --exec-timeout takes whole seconds. */
static int apply_timeout(int opt, const char *arg, struct opts *o)
{
    usec_t d;
    if (parse_timeout(arg, &d) < 0)
        return -EINVAL;
    switch (opt) {
    case O_EXEC:
        if (d % USEC_PER_SEC || d / USEC_PER_SEC > UINT32_MAX) {
            fprintf(stderr, "sandboxd: --exec-timeout takes whole seconds: %s\n", arg);
            return -EINVAL;
        }
        o->cfg.exec_timeout_s = (unsigned)(d / USEC_PER_SEC);
        return 0;
    case O_HDR:
        o->cfg.header_timeout = d;
        return 0;
    case O_BODYT:
        o->cfg.body_timeout = d;
        return 0;
    case O_IDLE:
        o->cfg.idle_timeout = d;
        return 0;
    case O_SHUT:
        o->shutdown_timeout = d;
        return 0;
    default:
        return -EINVAL;
    }
}

/* The code context options (kernel.c). Returns 0 or -EINVAL. */
static int apply_kernel_opt(int opt, const char *arg, struct opts *o)
{
    uint64_t v = 0;
    usec_t d = 0;
    if (opt == O_KDRIVER || opt == O_KPYTHON) {
        if (!*arg)
            return -EINVAL;
        *(opt == O_KDRIVER ? &o->cfg.kernel_driver : &o->cfg.kernel_python) = arg;
        return 0;
    }
    if (opt == O_CODE_KEEPALIVE || opt == O_PROC_KEEPALIVE) {
        if (parse_timeout(arg, &d) < 0 || d == 0 || d > UINT32_MAX * USEC_PER_SEC)
            return -EINVAL;
        *(opt == O_CODE_KEEPALIVE ? &o->cfg.code_keepalive : &o->cfg.proc_keepalive) = d;
        return 0;
    }
    if (parse_u64(arg, &v) < 0 || v == 0 || v > UINT32_MAX)
        return -EINVAL;
    if (opt == O_CONTEXTS)
        o->cfg.max_contexts = (unsigned)v;
    else
        o->cfg.max_code_output = (size_t)v;
    return 0;
}

/* Returns 0 to run, 1 to exit successfully, negative on a usage error. */
static int apply_opt(int opt, const char *arg, struct opts *o)
{
    enum log_level lvl;
    switch (opt) {
    case O_HOST:
        o->cfg.host = arg;
        return 0;
    case O_PORT:
        return set_port(arg, &o->cfg.port, false);
    case O_LPORT:
        return set_port(arg, &o->cfg.legacy_port, true);
    case O_GPORT:
        return set_port(arg, &o->cfg.grpc_port, true);
    case O_ROOT:
        o->cfg.root = arg;
        return 0;
    case O_LROOT:
        o->cfg.legacy_root = arg;
        return 0;
    case O_TOKEN:
        o->token_file = arg;
        return 0;
    case O_CONFIG_TOKEN:
        o->config_token_file = arg;
        return 0;
    case O_MEMMERGE:
        if (sbd_memmerge_parse(arg ? arg : "on", &o->memory_merge) < 0) {
            fprintf(stderr, "sandboxd: --memory-merge takes on, fixed-layout or off\n");
            return -EINVAL;
        }
        return 0;
    case O_PREFIX:
        o->cfg.metadata_prefix = arg;
        return 0;
    case O_LOG:
        if (log_parse_level(arg, &lvl) < 0)
            return -EINVAL;
        log_set_level(lvl);
        return 0;
    case O_LOG_FORMAT:
        return log_flag_format(arg);
    case O_VERSION:
        printf("sandboxd %s\n", AS_VERSION);
        return 1;
    case O_HELP:
        usage(stdout);
        return 1;
    default:
        if (opt >= O_KDRIVER && opt <= O_PROC_KEEPALIVE)
            return apply_kernel_opt(opt, arg, o);
        if (opt >= O_EXEC && opt <= O_SHUT)
            return apply_timeout(opt, arg, o);
        return opt >= O_UPLOAD && opt <= O_BGBUF ? apply_num(opt, arg, o) : -EINVAL;
    }
}

static void env_defaults(struct opts *o)
{
    const char *base = getenv("SANDBOX_BASE_DIR");
    if (base && *base)
        o->cfg.legacy_root = base;
    const char *t = getenv("SANDBOX_EXEC_TIMEOUT_SECONDS");
    uint64_t v;
    if (t && cstr_to_u64(t, &v) == 0 && v > 0)
        o->cfg.exec_timeout_s = (unsigned)v;
    const char *kd = getenv("SANDBOXD_KERNEL_DRIVER"), *kp = getenv("SANDBOXD_KERNEL_PYTHON");
    if (kd && *kd)
        o->cfg.kernel_driver = kd;
    if (kp && *kp)
        o->cfg.kernel_python = kp;
    const char *g = getenv("SANDBOXD_GRPC_PORT");
    if (g && *g)
        (void)set_port(g, &o->cfg.grpc_port, true);
    const char *u = getenv("SANDBOXD_GRPC_MAX_UNSENT");
    if (u && *u) {
        if (cstr_to_u64(u, &v) == 0 && v > 0)
            o->cfg.grpc_max_unsent = (size_t)v;
        else
            log_warn("ignoring $SANDBOXD_GRPC_MAX_UNSENT (not a positive byte count)\tvalue=\"%s\"",
                     u);
    }
    const char *m = getenv("SANDBOXD_MEMORY_MERGE");
    if (m && sbd_memmerge_parse(m, &o->memory_merge) < 0)
        log_warn("ignoring $SANDBOXD_MEMORY_MERGE (not a boolean)\tvalue=\"%s\"", m);
}

/* Page merging is an optimisation: a kernel without it (EINVAL) or a refusal leaves
 * the sandbox working as before, with a warning. */
static void apply_memory_merge(const struct opts *o)
{
    if (o->memory_merge == SBD_MEMMERGE_OFF)
        return;
    int r = sbd_memmerge_enable();
    if (r < 0) {
        (void)log_warn_errno(r, "page merging requested but unavailable");
        return;
    }
    bool fixed = false;
    if (o->memory_merge == SBD_MEMMERGE_FIXED_LAYOUT) {
        r = sbd_memmerge_fix_layout();
        if (r < 0)
            (void)log_warn_errno(r, "fixed layout requested but refused (seccomp?): "
                                    "programs keep a randomized layout");
        fixed = r == 0;
    }
    log_info("page merging on: sandboxd and its processes are mergeable by KSM\tlayout=%s",
             fixed ? "fixed" : "randomized");
}

/* The config token of late-bound claim configuration (a Secret mounted by the
 * controller); the environment names the file when the command line does not. */
static int read_config_token(struct opts *o)
{
    const char *path =
        o->config_token_file ? o->config_token_file : getenv("SANDBOXD_CONFIG_TOKEN_FILE");
    int r;
    if (!path || !*path)
        return 0;
    r = read_token(path, &o->config_token);
    if (r < 0)
        return log_error_errno(r, "cannot read the config token file\tpath=\"%s\"", path);
    o->cfg.config_token = o->config_token;
    return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    sbd_config_defaults(&o->cfg);
    o->shutdown_timeout = 10 * USEC_PER_SEC;
    env_defaults(o);
    int c;
    while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        int r = apply_opt(c == 'h' ? O_HELP : c, optarg, o);
        if (r != 0) {
            if (r < 0)
                usage(stderr);
            return r;
        }
    }
    if (optind < argc || !*o->cfg.root) {
        usage(stderr);
        return -EINVAL;
    }
    if (o->cfg.grpc_port > 0 &&
        (o->cfg.grpc_port == o->cfg.port || o->cfg.grpc_port == o->cfg.legacy_port)) {
        fprintf(stderr, "sandboxd: --grpc-port must differ from the REST and legacy ports\n");
        return -EINVAL;
    }
    const char *env_token = getenv("SANDBOXD_TOKEN");
    if (o->token_file) {
        int r = read_token(o->token_file, &o->token);
        if (r < 0)
            return log_error_errno(r, "cannot read the token file\tpath=\"%s\"", o->token_file);
    } else if (env_token && *env_token) {
        o->token = xstrdup(env_token);
    }
    o->cfg.token = o->token;
    return read_config_token(o);
}

static void on_stopped(void *ctx)
{
    struct app *a = ctx;
    uv_close((uv_handle_t *)&a->sigterm, NULL);
    uv_close((uv_handle_t *)&a->sigint, NULL);
    uv_close((uv_handle_t *)&a->sigchld, NULL);
}

/* Orphans of the commands' process trees are ours to reap (PID 1, or the subreaper). */
static void on_sigchld(uv_signal_t *h, int sig)
{
    struct app *a = h->data;
    (void)sig;
    (void)sbd_reap_orphans(a->d);
}

static void on_signal(uv_signal_t *h, int sig)
{
    struct app *a = h->data;
    if (a->stopping)
        return;
    a->stopping = true;
    log_info("shutting down\tsignal=%d", sig);
    sbd_shutdown(a->d, a->shutdown_timeout, on_stopped, a);
}

static int run(struct opts *o)
{
    struct app a = {.loop = uv_default_loop(), .shutdown_timeout = o->shutdown_timeout};
    int r = sbd_new(a.loop, &o->cfg, &a.d);
    if (r < 0)
        return log_error_errno(r, "cannot start");
    log_info("listening\thost=%s port=%u legacy_port=%u grpc_port=%u root=\"%s\" auth=%s "
             "config_env=%s",
             o->cfg.host, sbd_port(a.d), sbd_legacy_port(a.d), sbd_grpc_port_of(a.d), o->cfg.root,
             o->token ? "bearer" : "none", o->config_token ? "enabled" : "disabled");
    uv_signal_init(a.loop, &a.sigterm);
    uv_signal_init(a.loop, &a.sigint);
    uv_signal_init(a.loop, &a.sigchld);
    a.sigterm.data = a.sigint.data = a.sigchld.data = &a;
    uv_signal_start(&a.sigterm, on_signal, SIGTERM);
    uv_signal_start(&a.sigint, on_signal, SIGINT);
    uv_signal_start(&a.sigchld, on_sigchld, SIGCHLD);
    /* A command's background descendants outlive it: reparented here, not to an init that
     * may not reap them, they are reaped on SIGCHLD rather than left as zombies. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L) < 0)
        log_warn("cannot become the child subreaper: errno %d", errno);
    r = uv_run(a.loop, UV_RUN_DEFAULT);
    sbd_free(a.d);
    (void)uv_loop_close(a.loop);
    return 0;
}

int main(int argc, char **argv)
{
    log_set_component("sandboxd");
    (void)signal(SIGPIPE, SIG_IGN);
    struct opts o = {0};
    int r = parse_args(argc, argv, &o);
    if (r == 0) {
        /* its connection caps (4096 a server, two servers, 256 gRPC) are above the usual
         * soft limit of 1024: past it, accepts fail and so do the authorized requests */
        int e = fdlimit_raise(LIMIT_FDS_WANTED, NULL);
        if (e < 0)
            log_warn_errno(e, "cannot raise the open-file limit");
        apply_memory_merge(&o);
        r = run(&o);
    }
    xfree(o.token);
    xfree(o.config_token);
    return r < 0 ? 1 : 0;
}
