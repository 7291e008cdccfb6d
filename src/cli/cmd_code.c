/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox run-code NAME (-c CODE | FILE | -): runs Python code in one of the
 * sandbox's code contexts (POST /v1/code/execute, NDJSON events; docs/code-interpreter.md)
 * and prints stdout and stderr as they come, the value of the last expression, and the
 * traceback of an exception (exit status 1). Ctrl-C interrupts the code. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli/sbd.h"
#include "cli/stream.h"
#include "common/limits.h"
#include "common/pct.h"
#include "common/xalloc.h"
#include "kube/linebuf.h"

struct code_opts {
    const char *context, *code, *file;
    usec_t timeout;
    bool json;
};

struct code_state {
    struct cli_sbd *s;
    const struct code_opts *o;
    struct cli_stream st;
    char *context; /* from the start event (owned); NULL before */
    bool ended, failed, timed_out, truncated;
    int proto_err;
    int write_err; /* writing the output here failed (not -EPIPE): the stream stops */
};

static volatile sig_atomic_t code_ints;

static void on_code_int(int sig)
{
    (void)sig;
    code_ints++;
}

void cli_help_run_code(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox run-code NAME [--code-context ID] [--timeout D] [--json]\n"
                 "                                 (-c CODE | FILE | -)\n\n"
                 "Runs Python code in a code context of sandbox NAME: variables, imports and\n"
                 "functions stay for the next run-code in the same context.\n"
                 "  -c, --code CODE  the code (else FILE, or - for standard input)\n"
                 "  --code-context ID  the code context (default: the sandbox's \"default\"\n"
                 "                   context; --context stays the kubeconfig context)\n"
                 "  --timeout D      interrupt the code after D (e.g. 30s, 5m)\n"
                 "  --json           print the events (NDJSON) instead of the output\n"
                 "stdout and stderr are printed as they come, then the value of the last\n"
                 "expression; rich output (images, HTML) is summarised (use --json for it).\n"
                 "Ctrl-C interrupts the code; a second one exits.\n"
                 "Exit codes: 0; 1 when the code raised (its traceback is printed); 124 when\n"
                 "--timeout interrupted it; 130 after a second Ctrl-C; 1/2/3 as for every\n"
                 "command (2: also a FILE that cannot be read, code over 8 MiB); 5 when\n"
                 "sandboxd could not be reached or refused the code.\n");
}

/* Writes s to fd; the first failure other than EPIPE (the reader went away) is kept in
 * x->write_err. */
static void write_str(struct code_state *x, int fd, const char *s)
{
    int r = s ? cli_write_all(fd, s, strlen(s)) : 0;
    if (r < 0 && r != -EPIPE && !x->write_err)
        x->write_err = r;
}

/* A result or display event: its text, or a summary of what else it has. */
static void print_data(struct code_state *x, const json_t *data, bool is_main)
{
    const char *text = json_string_value(json_object_get(data, "text/plain"));
    const char *k;
    const json_t *v;
    bool rich = false;
    json_object_foreach((json_t *)data, k, v)
    {
        if (strcmp(k, "text/plain") == 0)
            continue;
        char line[160];
        (void)snprintf(line, sizeof(line), "[%s, %zu bytes]\n", k, json_string_length(v));
        write_str(x, 1, line);
        rich = true;
    }
    if (text && (is_main || !rich)) {
        write_str(x, 1, text);
        write_str(x, 1, "\n");
    }
}

static void on_event(struct code_state *x, const char *type, const json_t *j)
{
    if (!strcmp(type, "start")) {
        const char *id = json_string_value(json_object_get(j, "context"));
        xfree(x->context);
        x->context = id && *id ? xstrdup(id) : NULL;
    } else if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
        write_str(x, type[3] == 'o' ? 1 : 2, json_string_value(json_object_get(j, "text")));
    } else if (!strcmp(type, "result") || !strcmp(type, "display")) {
        print_data(x, json_object_get(j, "data"), json_is_true(json_object_get(j, "is_main")));
    } else if (!strcmp(type, "error")) {
        x->failed = true;
        const char *tb = json_string_value(json_object_get(j, "traceback"));
        if (tb && *tb) {
            write_str(x, 2, tb);
        } else {
            write_str(x, 2, json_string_value(json_object_get(j, "name")));
            write_str(x, 2, ": ");
            write_str(x, 2, json_string_value(json_object_get(j, "value")));
            write_str(x, 2, "\n");
        }
    } else if (!strcmp(type, "end")) {
        x->ended = true;
        x->timed_out = json_is_true(json_object_get(j, "timed_out"));
        x->truncated = json_is_true(json_object_get(j, "truncated"));
    }
}

static int on_line(void *ctx, const char *line, size_t len)
{
    struct code_state *x = ctx;
    json_t *j = json_loadb(line, len, 0, NULL);
    const char *type = json_string_value(json_object_get(j, "type"));
    if (!type) {
        json_decref(j);
        return x->proto_err = -EPROTO;
    }
    if (x->o->json) {
        int r = cli_write_all(1, line, len);
        if (r == 0)
            r = cli_write_all(1, "\n", 1);
        if (r < 0 && r != -EPIPE && !x->write_err)
            x->write_err = r;
        if (!strcmp(type, "end") || !strcmp(type, "error"))
            on_event(x, type, j); /* the exit status only */
    } else {
        on_event(x, type, j);
    }
    json_decref(j);
    return x->write_err;
}

int cli_code_interrupt_path(const char *id, struct buf *out)
{
    if (!id || !*id || !strcmp(id, ".") || !strcmp(id, ".."))
        return -EINVAL;
    int r = buf_puts(out, "/v1/contexts/");
    if (r == 0)
        r = pct_encode(out, id, NULL);
    return r == 0 ? buf_puts(out, "/interrupt") : r;
}

/* libcurl's progress callback of the interrupt request: a second Ctrl-C leaves at once. */
static bool leaving(void *ctx)
{
    (void)ctx;
    return code_ints > 1;
}

/* Asks sandboxd to interrupt the context's code: a control request, given up after
 * LIMIT_CLI_SBD_CONTROL or on a second Ctrl-C, so a sandboxd that stops answering cannot
 * hold the user. */
static void interrupt(struct code_state *x)
{
    char err[512];
    struct buf path, resp;
    long status = 0;
    buf_init(&path, LIMIT_KUBE_URL);
    buf_init(&resp, LIMIT_CLI_SBD_ERROR);
    if (cli_code_interrupt_path(x->context, &path) == 0) {
        struct sbd_client_req req = {.method = "POST",
                                     .path = buf_str(&path),
                                     .body = "{}",
                                     .len = 2,
                                     .content_type = "application/json",
                                     .timeout = LIMIT_CLI_SBD_CONTROL,
                                     .cancel = leaving};
        (void)cli_sbd_request(x->s, &req, &resp, &status, err, sizeof(err));
    }
    buf_done(&path);
    buf_done(&resp);
}

struct loop {
    struct code_state *x;
    int ints_sent;
};

/* Ctrl-C interrupts the code (once the context is known); a second one stops. */
static bool loop_turn(void *ctx, bool running, int *ret_fd)
{
    struct loop *l = ctx;
    *ret_fd = -1;
    if (l->ints_sent < code_ints && l->x->context && !l->x->ended) {
        l->ints_sent = code_ints;
        interrupt(l->x);
    }
    return running && code_ints <= 1;
}

static int code_loop(struct code_state *x)
{
    struct loop l = {.x = x};
    return cli_stream_run(x->st.h, loop_turn, NULL, &l);
}

static int code_finish(const struct cli_globals *g, struct code_state *x, int cc,
                       const char *errbuf)
{
    char text[600];
    if (x->st.status && x->st.status != 200) {
        cli_sbd_error_text(x->st.status, x->st.errbody.data, x->st.errbody.len, text, sizeof(text));
        fprintf(g->err, "error: %s refused the code: %s\n", x->s->what, text);
        return CLI_SBD;
    }
    if (x->write_err) {
        char eb[128];
        fprintf(g->err, "error: cannot write the output: %s\n",
                strerror_r(-x->write_err, eb, sizeof(eb)));
        return CLI_ERR;
    }
    if (x->ended) {
        if (x->truncated && !x->o->json)
            fprintf(g->err, "[output truncated at sandboxd's limit]\n");
        if (x->timed_out)
            fprintf(g->err, "error: the code ran past --timeout and was interrupted\n");
        return x->timed_out ? 124 : x->failed ? CLI_ERR : CLI_OK;
    }
    if (code_ints > 1)
        return 130;
    fprintf(g->err, "error: the stream from %s ended early: %s\n", x->s->what,
            cli_stream_why(x->proto_err ? x->proto_err : x->st.err, (CURLcode)cc, errbuf));
    return CLI_SBD;
}

static int do_code(const struct cli_globals *g, struct cli_sbd *s, const struct code_opts *o,
                   const struct buf *code)
{
    struct code_state x = {.s = s, .o = o};
    char errbuf[CURL_ERROR_SIZE] = "";
    const char *extra[] = {"Content-Type: application/json", "Accept: application/x-ndjson", NULL};
    struct curl_slist *hdrs = NULL;
    json_t *body = json_pack("{s:s%}", "code", code->data ? code->data : "", code->len);
    if (o->context)
        (void)json_object_set_new(body, "context", json_string(o->context));
    if (o->timeout)
        (void)json_object_set_new(body, "timeout", json_real((double)o->timeout / USEC_PER_SEC));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    cli_stream_init(&x.st, LIMIT_CLI_CODE_LINE, on_line, &x);
    CURL *h = curl_easy_init();
    cli_stream_start(&x.st, h);
    (void)cli_sbd_setup(s, h, "POST", "/v1/code/execute", extra, &hdrs, errbuf);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cli_stream_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x.st);
    int cc = code_loop(&x);
    cli_stream_settle(&x.st); /* a refusal with an empty body */
    int rc = code_finish(g, &x, cc, errbuf);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    xfree(text); /* jansson allocates with malloc: see output.c */
    xfree(x.context);
    cli_stream_done(&x.st);
    return rc;
}

/* Reads the code from -c, FILE or - (stdin) into out. Returns CLI_OK or prints why not. */
static int read_code(const struct cli_globals *g, const struct code_opts *o, struct buf *out)
{
    if (o->code)
        return buf_puts(out, o->code) == 0
                   ? CLI_OK
                   : (fprintf(g->err, "error: code too large\n"), CLI_USAGE);
    int fd = strcmp(o->file, "-") == 0 ? 0 : open(o->file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(g->err, "error: %s: %s\n", o->file, strerror(errno));
        return CLI_USAGE;
    }
    char chunk[65536];
    int rc = CLI_OK;
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || buf_append(out, chunk, (size_t)n) < 0) {
            if (n != 0)
                fprintf(g->err, "error: %s: %s\n", o->file,
                        n < 0 ? strerror(errno) : "code over 8 MiB");
            rc = n == 0 ? CLI_OK : CLI_USAGE;
            break;
        }
    }
    if (fd > 0)
        (void)close(fd);
    return rc;
}

static const struct option code_long[] = {
    {"code", required_argument, NULL, 'c'},
    {"code-context", required_argument, NULL, 'X'},
    {"timeout", required_argument, NULL, 'T'},
    {"json", no_argument, NULL, 'J'},
    {NULL, 0, NULL, 0},
};

static int parse_code(const struct cli_globals *g, int argc, char **argv, struct code_opts *o,
                      const char **ret_name)
{
    int ch;
    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "c:", code_long, NULL)) != -1) {
        if (ch == 'c')
            o->code = optarg;
        else if (ch == 'X')
            o->context = optarg;
        else if (ch == 'J')
            o->json = true;
        else if (ch == 'T') {
            if (cli_parse_timeout(g, optarg, true, &o->timeout) != CLI_OK)
                return CLI_USAGE;
        } else {
            fprintf(g->err, "error: bad option %s; see run-code --help\n", argv[optind - 1]);
            return CLI_USAGE;
        }
    }
    int rest = argc - optind;
    if (rest < 1 || rest > 2 || (rest == 2) == (o->code != NULL)) {
        fprintf(g->err, "error: usage: kubectl-sandbox run-code NAME (-c CODE | FILE | -)\n");
        return CLI_USAGE;
    }
    *ret_name = argv[optind];
    if (rest == 2)
        o->file = argv[optind + 1];
    return CLI_OK;
}

int cli_cmd_run_code(struct cli_globals *g, int argc, char **argv)
{
    struct code_opts o = {0};
    const char *name = NULL;
    struct buf code;
    buf_init(&code, LIMIT_CLI_CODE);
    int rc = parse_code(g, argc, argv, &o, &name);
    if (rc == CLI_OK)
        rc = read_code(g, &o, &code);
    struct cli_sbd *s = NULL;
    if (rc == CLI_OK)
        rc = cli_sbd_open(g, name, &s);
    if (rc == CLI_OK) {
        struct sigaction sa = {.sa_handler = on_code_int};
        sigemptyset(&sa.sa_mask);
        (void)sigaction(SIGINT, &sa, NULL);
        rc = do_code(g, s, &o, &code);
    }
    cli_sbd_free(s);
    buf_done(&code);
    return rc;
}
