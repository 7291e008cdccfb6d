/* SPDX-License-Identifier: Apache-2.0 */
/* Background processes of a sandbox's sandboxd: `ps NAME` lists them, `kill NAME ID`
 * signals (and with --rm forgets) one, `exec NAME --background -- CMD` starts one and
 * `logs NAME --process ID [-f]` replays and follows its output (GET
 * /v1/processes/ID/output, NDJSON). */
#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <unistd.h>

#include "cli/output.h"
#include "cli/sbd.h"
#include "cli/stream.h"
#include "common/base64.h"
#include "common/limits.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "kube/linebuf.h"

void cli_help_ps(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox ps NAME [-o json] [-n NS]\n\n"
                 "Lists the processes of sandbox NAME's sandboxd: background processes\n"
                 "(exec --background), running or exited, and attached ones (exec, SDK calls).\n"
                 "Columns: ID, PID, STATE (running, exited N, signal N), BG, AGE, COMMAND.\n"
                 "Exit codes: 0 ok, 1/2/3 as for every command, 5 sandboxd failed.\n");
}

void cli_help_kill(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox kill NAME ID [--signal SIG] [--rm] [-n NS]\n\n"
                 "Sends a signal to process ID (see ps) of sandbox NAME and its process group.\n"
                 "  -s, --signal SIG   signal name or number (default KILL)\n"
                 "  --rm               wait for the exit, then forget the background process\n"
                 "                     and its buffered output\n"
                 "Signalling a background process that already exited is not an error.\n"
                 "Exit codes: 0 ok, 1 no such process (sandboxd's 404) or, with --rm, it did\n"
                 "not exit within 30s, 1/2/3 as for every command, 5 sandboxd failed or could\n"
                 "not be reached (its pod gone).\n");
}

/* ---- shared ------------------------------------------------------------------------- */

void cli_proc_state(const json_t *p, char *out, size_t size)
{
    const json_t *code = json_object_get(p, "exit_code");
    const json_t *sig = json_object_get(p, "signal");
    const char *state = json_string_value(json_object_get(p, "state"));
    bool exited =
        state ? strcmp(state, "exited") == 0 : json_is_false(json_object_get(p, "running"));
    if (!exited)
        (void)snprintf(out, size, "running");
    else if (json_is_integer(sig) && json_integer_value(sig) > 0)
        (void)snprintf(out, size, "signal %lld", (long long)json_integer_value(sig));
    else if (json_is_integer(code))
        (void)snprintf(out, size, "exited %lld", (long long)json_integer_value(code));
    else
        (void)snprintf(out, size, "exited");
}

/* Whether a refusal is sandboxd's own 404 (its {"code":"NOT_FOUND"} body): no such
 * process. The API server's pod proxy answers 404 too when the pod is gone ("pods \"x\"
 * not found"): sandboxd was not reached. */
static bool no_such_process(long status, const char *body, size_t len)
{
    return status == 404 && cli_sbd_error_is(body, len, "NOT_FOUND");
}

/* One buffered request; prints sandboxd's refusal. Returns CLI_OK with *ret_status and
 * the body in resp, CLI_ERR for sandboxd's own 404 (no such process), or CLI_SBD (a
 * proxy's 404 too: the pod is gone, sandboxd cannot be reached). */
static int call(const struct cli_globals *g, struct cli_sbd *s, const char *method,
                const char *path, const char *body, struct buf *resp, long *ret_status)
{
    char err[512], text[600];
    long status = 0;
    int r = cli_sbd_call(s, method, path, body, body ? strlen(body) : 0, NULL, resp, &status, err,
                         sizeof(err));
    if (r < 0) {
        fprintf(g->err, "error: cannot reach %s\n", err);
        return CLI_SBD;
    }
    *ret_status = status;
    if (status < 400 || status == 409)
        return CLI_OK;
    cli_sbd_error_text(status, resp->data, resp->len, text, sizeof(text));
    fprintf(g->err, "error: %s: %s %s: %s\n", s->what, method, path, text);
    return no_such_process(status, resp->data, resp->len) ? CLI_ERR : CLI_SBD;
}

static int parse_id(const struct cli_globals *g, const char *s, uint64_t *ret)
{
    if (cstr_to_u64(s, ret) < 0 || *ret == 0 || *ret > UINT32_MAX) {
        fprintf(g->err, "error: bad process id %s\n", s);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* ---- ps ----------------------------------------------------------------------------- */

static void print_procs(const struct cli_globals *g, const json_t *procs)
{
    struct out_table t;
    out_table_init(&t, 6);
    const char *head[] = {"ID", "PID", "STATE", "BG", "AGE", "COMMAND"};
    out_table_add(&t, head);
    size_t i;
    json_t *p;
    json_array_foreach(procs, i, p)
    {
        char id[24], pid[24], state[40], age[16];
        (void)snprintf(id, sizeof(id), "%lld",
                       (long long)json_integer_value(json_object_get(p, "id")));
        (void)snprintf(pid, sizeof(pid), "%lld",
                       (long long)json_integer_value(json_object_get(p, "pid")));
        cli_proc_state(p, state, sizeof(state));
        struct buf cmd;
        buf_init(&cmd, 200);
        size_t k;
        json_t *a;
        json_array_foreach(json_object_get(p, "command"), k, a)
        {
            if (buf_printf(&cmd, "%s%s", k ? " " : "", json_string_value(a)) < 0)
                break;
        }
        const char *row[] = {
            id,
            pid,
            state,
            json_is_true(json_object_get(p, "background")) ? "yes" : "no",
            out_age(json_string_value(json_object_get(p, "started_at")), age, sizeof(age)),
            buf_str(&cmd)};
        out_table_add(&t, row);
        buf_done(&cmd);
    }
    out_table_print(g->out, &t);
    out_table_done(&t);
}

int cli_cmd_ps(struct cli_globals *g, int argc, char **argv)
{
    static const char *const formats[] = {"", "json", NULL};
    if (argc != 2 || argv[1][0] == '-') {
        cli_help_ps(g->err);
        return CLI_USAGE;
    }
    int rc = cli_check_output(g, formats);
    struct cli_sbd *s = NULL;
    if (rc == CLI_OK)
        rc = cli_sbd_open(g, argv[1], &s);
    struct buf resp;
    buf_init(&resp, LIMIT_CLI_SBD_JSON);
    long status = 0;
    if (rc == CLI_OK)
        rc = call(g, s, "GET", "/v1/processes", NULL, &resp, &status);
    json_t *j = rc == CLI_OK ? json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL) : NULL;
    json_t *procs = json_object_get(j, "processes");
    if (rc == CLI_OK && !json_is_array(procs)) {
        fprintf(g->err, "error: %s: malformed process list\n", s->what);
        rc = CLI_SBD;
    }
    if (rc == CLI_OK && g->output && !strcmp(g->output, "json"))
        out_json(g->out, j);
    else if (rc == CLI_OK)
        print_procs(g, procs);
    json_decref(j);
    buf_done(&resp);
    cli_sbd_free(s);
    return rc;
}

/* ---- kill --------------------------------------------------------------------------- */

struct kill_opts {
    const char *sig;
    bool rm;
};

static int parse_kill(const struct cli_globals *g, int argc, char **argv, struct kill_opts *o)
{
    static const struct option lo[] = {
        {"signal", required_argument, NULL, 's'},
        {"rm", no_argument, NULL, 'r'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "s:", lo, NULL)) != -1) {
        if (ch == 's') {
            o->sig = optarg;
        } else if (ch == 'r') {
            o->rm = true;
        } else {
            fprintf(g->err, "error: bad option %s; see kill --help\n", argv[optind - 1]);
            return CLI_USAGE;
        }
    }
    if (argc - optind != 2) {
        cli_help_kill(g->err);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* With --rm: waits for the exit, then DELETE forgets the entry. */
static int remove_proc(const struct cli_globals *g, struct cli_sbd *s, uint64_t id)
{
    char path[96];
    struct buf resp;
    buf_init(&resp, LIMIT_CLI_SBD_ERROR);
    long status = 0;
    (void)snprintf(path, sizeof(path), "/v1/processes/%llu/wait?timeout=30",
                   (unsigned long long)id);
    int rc = call(g, s, "GET", path, NULL, &resp, &status);
    json_t *j = rc == CLI_OK ? json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL) : NULL;
    const char *state = json_string_value(json_object_get(j, "state"));
    if (rc == CLI_OK && (!state || strcmp(state, "exited") != 0)) {
        fprintf(g->err, "error: process %llu did not exit within 30s; not removed\n",
                (unsigned long long)id);
        rc = CLI_ERR;
    }
    json_decref(j);
    (void)snprintf(path, sizeof(path), "/v1/processes/%llu", (unsigned long long)id);
    buf_reset(&resp);
    if (rc == CLI_OK)
        rc = call(g, s, "DELETE", path, NULL, &resp, &status);
    buf_done(&resp);
    return rc;
}

int cli_cmd_kill(struct cli_globals *g, int argc, char **argv)
{
    struct kill_opts o = {.sig = "KILL"};
    int rc = parse_kill(g, argc, argv, &o);
    uint64_t id = 0;
    if (rc == CLI_OK)
        rc = parse_id(g, argv[optind + 1], &id);
    const char *name = rc == CLI_OK ? argv[optind] : NULL;
    struct cli_sbd *s = NULL;
    if (rc == CLI_OK)
        rc = cli_sbd_open(g, name, &s);
    struct buf resp;
    buf_init(&resp, LIMIT_CLI_SBD_ERROR);
    long status = 0;
    if (rc == CLI_OK) {
        char path[96];
        (void)snprintf(path, sizeof(path), "/v1/processes/%llu/signal", (unsigned long long)id);
        json_t *b = json_pack("{s:s}", "signal", o.sig);
        char *body = json_dumps(b, JSON_COMPACT);
        json_decref(b);
        rc = call(g, s, "POST", path, body, &resp, &status);
        xfree(body); /* jansson allocates with malloc: see output.c */
    }
    if (rc == CLI_OK && o.rm)
        rc = remove_proc(g, s, id);
    buf_done(&resp);
    cli_sbd_free(s);
    return rc;
}

/* ---- exec --background ---------------------------------------------------------------- */

int cli_proc_start_bg(const struct cli_globals *g, struct cli_sbd *s, json_t *body)
{
    (void)json_object_set_new(body, "background", json_true());
    char *text = json_dumps(body, JSON_COMPACT);
    struct buf resp;
    buf_init(&resp, LIMIT_CLI_SBD_JSON);
    long status = 0;
    int rc = call(g, s, "POST", "/v1/processes", text, &resp, &status);
    xfree(text);
    json_t *j = rc == CLI_OK ? json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL) : NULL;
    if (rc == CLI_OK && !json_is_integer(json_object_get(j, "id"))) {
        fprintf(g->err, "error: %s: malformed answer to the start\n", s->what);
        rc = CLI_SBD;
    }
    if (rc == CLI_OK && g->output && !strcmp(g->output, "json"))
        out_json(g->out, j);
    else if (rc == CLI_OK)
        fprintf(g->out, "%lld\n", (long long)json_integer_value(json_object_get(j, "id")));
    json_decref(j);
    buf_done(&resp);
    return rc;
}

/* ---- logs --process ------------------------------------------------------------------- */

struct out_stream {
    const struct cli_globals *g;
    struct cli_stream st;
    struct buf dec;
    int proto_err;
    int write_err; /* writing the output here failed (-EPIPE: the reader went away) */
    bool exited;
    uint64_t offset; /* where the next request starts (past the events printed) */
    unsigned events; /* events of the current request */
};

/* Proxies cut long requests (the router: 60 s without a byte): logs -f reopens the stream
 * from its offset; this many quick ends in a row without an event give up. */
#define LOGS_RESUMES  3
#define LOGS_QUICKEND (5 * USEC_PER_SEC)

static int on_out_line(void *ctx, const char *line, size_t len)
{
    struct out_stream *x = ctx;
    json_t *j = json_loadb(line, len, 0, NULL);
    const char *type = json_string_value(json_object_get(j, "type"));
    int r = 0;
    json_int_t off = json_integer_value(json_object_get(j, "offset"));
    x->events++;
    if (!type) {
        r = x->proto_err = -EPROTO;
    } else if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
        const char *d = json_string_value(json_object_get(j, "data"));
        buf_reset(&x->dec);
        r = d ? base64_decode(d, strlen(d), &x->dec) : -EPROTO;
        if (r == 0)
            r = x->write_err =
                cli_write_all(type[3] == 'o' ? 1 : 2, x->dec.data ? x->dec.data : "", x->dec.len);
        else
            x->proto_err = r;
        x->offset = (uint64_t)off + x->dec.len;
    } else if (!strcmp(type, "dropped")) {
        json_int_t lost = json_integer_value(json_object_get(j, "bytes"));
        fprintf(x->g->err, "[%lld bytes of output were dropped: the buffer overflowed]\n",
                (long long)lost);
        x->offset = (uint64_t)(off + lost);
    } else if (!strcmp(type, "exit")) {
        x->exited = true;
    }
    json_decref(j);
    return r;
}

static int out_finish(struct out_stream *x, struct cli_sbd *s, CURLcode cc, const char *errbuf)
{
    char text[600];
    if (x->st.status && x->st.status != 200) {
        cli_sbd_error_text(x->st.status, x->st.errbody.data, x->st.errbody.len, text, sizeof(text));
        fprintf(x->g->err, "error: %s: %s\n", s->what, text);
        return no_such_process(x->st.status, x->st.errbody.data, x->st.errbody.len) ? CLI_ERR
                                                                                    : CLI_SBD;
    }
    if (x->write_err == -EPIPE)
        return CLI_OK; /* the reader went away (| head) */
    if (x->write_err) {
        char eb[128];
        fprintf(x->g->err, "error: cannot write the output: %s\n",
                strerror_r(-x->write_err, eb, sizeof(eb)));
        return CLI_ERR;
    }
    if (cc == CURLE_OK && !x->proto_err)
        return CLI_OK;
    fprintf(x->g->err, "error: the output stream from %s broke: %s\n", s->what,
            cli_stream_why(x->proto_err ? x->proto_err : x->st.err, cc, errbuf));
    return CLI_SBD;
}

/* One GET of the output from x->offset. */
static CURLcode logs_once(struct out_stream *x, struct cli_sbd *s, uint64_t id, bool follow,
                          char *errbuf)
{
    char path[160];
    (void)snprintf(path, sizeof(path), "/v1/processes/%llu/output?follow=%s&offset=%llu",
                   (unsigned long long)id, follow ? "true" : "false",
                   (unsigned long long)x->offset);
    const char *extra[] = {"Accept: application/x-ndjson", NULL};
    struct curl_slist *hdrs = NULL;
    CURL *h = curl_easy_init();
    cli_stream_start(&x->st, h);
    x->events = 0;
    (void)cli_sbd_setup(s, h, "GET", path, extra, &hdrs, errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cli_stream_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x->st);
    CURLcode cc = curl_easy_perform(h);
    cli_stream_settle(&x->st); /* a refusal with an empty body */
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    x->st.h = NULL;
    return cc;
}

/* Whether a follow that ended before the exit is reopened (see LOGS_RESUMES). */
static bool logs_resume(const struct out_stream *x, CURLcode cc, usec_t started, unsigned *quick)
{
    if (x->exited || x->proto_err || (x->st.status && x->st.status != 200) ||
        cc == CURLE_WRITE_ERROR || cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST)
        return false;
    if (x->events || clock_now() - started >= LOGS_QUICKEND)
        *quick = 0;
    return ++*quick <= LOGS_RESUMES;
}

int cli_proc_logs(const struct cli_globals *g, const char *name, const char *id, bool follow)
{
    uint64_t n;
    int rc = parse_id(g, id, &n);
    struct cli_sbd *s = NULL;
    if (rc == CLI_OK)
        rc = cli_sbd_open(g, name, &s);
    if (rc != CLI_OK)
        return rc;
    struct out_stream x = {.g = g};
    char errbuf[CURL_ERROR_SIZE];
    cli_stream_init(&x.st, LIMIT_CLI_SBD_LINE, on_out_line, &x);
    buf_init(&x.dec, LIMIT_CLI_SBD_LINE);
    unsigned quick = 0;
    CURLcode cc;
    for (;;) {
        usec_t started = clock_now();
        cc = logs_once(&x, s, n, follow, errbuf);
        if (!follow || !logs_resume(&x, cc, started, &quick))
            break;
        clock_sleep(200 * USEC_PER_MSEC * (quick - 1));
    }
    rc = follow && !x.exited && cc == CURLE_OK && !x.proto_err && x.st.status == 200
             ? (fprintf(g->err, "error: the output stream from %s keeps ending early\n", s->what),
                CLI_SBD)
             : out_finish(&x, s, cc, errbuf);
    cli_stream_done(&x.st);
    buf_done(&x.dec);
    cli_sbd_free(s);
    return rc;
}
