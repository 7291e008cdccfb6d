/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox exec NAME -- CMD...: runs CMD through sandboxd's streaming process API
 * (POST /v1/processes, NDJSON events), passing stdout, stderr and the exit code through;
 * -i forwards stdin (POST .../stdin), -t runs on a PTY with the local terminal in raw
 * mode and window resizes forwarded. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sys/ioctl.h>

#include "cli/sbd.h"
#include "cli/stream.h"
#include "common/base64.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/linebuf.h"

struct exec_opts {
    bool in, tty, background;
    const char *cwd;
    json_t *env; /* owned object */
    usec_t timeout;
};

struct exec_state {
    struct cli_sbd *s;
    struct cli_stream st;
    struct buf dec; /* decoded output, reused */
    long id;        /* process id from the start event; -1 before */
    bool exited, timed_out;
    int exit_code, sig;
    int proto_err; /* a malformed stream */
    int write_err; /* writing the output here failed (not -EPIPE): the stream stops */
    /* stdin read but not taken yet (sandboxd's queue was full: 429), sent again from
     * the loop while the output keeps flowing; no more stdin is read meanwhile */
    struct buf pending;
    usec_t retry_at, backoff;
    long stdin_refused; /* the status (or negative errno) that lost stdin; 0 if none (a
                           refusal because the command takes no more input is none) */
    bool close_pending; /* stdin's end to be told (again after a 429: the queue was full) */
};

static volatile sig_atomic_t got_winch, got_int;

static void on_signal(int sig)
{
    if (sig == SIGWINCH)
        got_winch = 1;
    else
        got_int++;
}

/* The raw terminal of exec -t -i: its settings before and raw, for the handlers too. */
static const int tty_sigs[] = {SIGTERM, SIGHUP, SIGQUIT, SIGINT, SIGTSTP, SIGCONT};
static struct termios tty_saved, tty_raw;
static struct sigaction tty_old[ARRAY_SIZE(tty_sigs)];
static volatile sig_atomic_t tty_fd = -1;

/* A fatal signal while the terminal is raw (SIGINT too: keys do not send it, kill and
 * timeout do): restore it (tcsetattr is async-signal-safe), then die of the signal with
 * its default action. */
static void on_fatal(int sig)
{
    if (tty_fd >= 0)
        (void)tcsetattr(tty_fd, TCSANOW, &tty_saved);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    (void)sigaction(sig, &dfl, NULL);
    (void)raise(sig); /* blocked until this handler returns */
}

/* SIGCONT (also after a stop this process did not see coming): raw again. */
static void on_cont(int sig)
{
    (void)sig;
    int e = errno;
    if (tty_fd >= 0)
        (void)tcsetattr(tty_fd, TCSANOW, &tty_raw);
    errno = e;
}

/* SIGTSTP (kill -TSTP; the raw terminal sends none): restore the terminal for the shell,
 * stop with the signal's default action right here, and once continued (or when the
 * stop was discarded, in an orphaned process group) make it raw again. */
static void on_stop(int sig)
{
    int e = errno;
    if (tty_fd >= 0)
        (void)tcsetattr(tty_fd, TCSANOW, &tty_saved);
    struct sigaction dfl = {.sa_handler = SIG_DFL}, mine;
    sigemptyset(&dfl.sa_mask);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    (void)sigaction(sig, &dfl, &mine);
    (void)sigprocmask(SIG_UNBLOCK, &set, NULL);
    (void)raise(sig); /* stops here; SIGCONT's handler waits for this one's end */
    (void)sigprocmask(SIG_BLOCK, &set, NULL);
    (void)sigaction(sig, &mine, NULL);
    on_cont(SIGCONT);
    errno = e;
}

bool cli_tty_raw(int fd)
{
    if (tty_fd >= 0 || !isatty(fd) || tcgetattr(fd, &tty_saved) < 0)
        return false;
    struct sigaction sa = {0};
    sigemptyset(&sa.sa_mask); /* one handler at a time */
    for (size_t i = 0; i < ARRAY_SIZE(tty_sigs); i++)
        sigaddset(&sa.sa_mask, tty_sigs[i]);
    tty_raw = tty_saved;
    cfmakeraw(&tty_raw);
    tty_fd = fd;
    for (size_t i = 0; i < ARRAY_SIZE(tty_sigs); i++) {
        int sig = tty_sigs[i];
        sa.sa_handler = sig == SIGTSTP ? on_stop : sig == SIGCONT ? on_cont : on_fatal;
        (void)sigaction(sig, NULL, &tty_old[i]);
        if (tty_old[i].sa_handler != SIG_IGN) /* an ignored one (nohup) stays ignored */
            (void)sigaction(sig, &sa, NULL);
    }
    (void)tcsetattr(fd, TCSANOW, &tty_raw);
    return true;
}

void cli_tty_restore(void)
{
    int fd = tty_fd;
    if (fd < 0)
        return;
    sigset_t set, old; /* no handler in between: each finds the terminal as it left it */
    sigemptyset(&set);
    for (size_t i = 0; i < ARRAY_SIZE(tty_sigs); i++)
        sigaddset(&set, tty_sigs[i]);
    (void)sigprocmask(SIG_BLOCK, &set, &old);
    (void)tcsetattr(fd, TCSANOW, &tty_saved);
    tty_fd = -1;
    for (size_t i = 0; i < ARRAY_SIZE(tty_sigs); i++)
        (void)sigaction(tty_sigs[i], &tty_old[i], NULL);
    (void)sigprocmask(SIG_SETMASK, &old, NULL);
}

void cli_help_exec(FILE *out)
{
    fprintf(out,
            "Usage: kubectl-sandbox exec NAME [-i] [-t] [--cwd DIR] [-e K=V]... [--timeout D]\n"
            "                              -- COMMAND [ARG...]\n\n"
            "Runs COMMAND (argv, no shell: use `sh -c '...'` for pipes) in sandbox NAME\n"
            "through its sandboxd, streaming stdout and stderr.\n"
            "  -i, --stdin      forward standard input (EOF closes the command's stdin)\n"
            "  -t, --tty        run on a pseudo-terminal (stdout and stderr merged); with\n"
            "                   -i the local terminal is put in raw mode; resizes are\n"
            "                   forwarded\n"
            "  --cwd DIR        working directory, relative to sandboxd's root\n"
            "  -e, --env K=V    environment variable (repeatable)\n"
            "  --timeout D      kill the command after D (e.g. 30s, 5m)\n"
            "  -d, --background start COMMAND as a background process that outlives this\n"
            "                   client, print its id and return (see ps, logs --process,\n"
            "                   kill; -o json prints its description)\n"
            "Unless the terminal is raw (-i -t), Ctrl-C is sent to the command as SIGINT; a\n"
            "second one exits at once (130), whether or not sandboxd answers.\n"
            "The connection goes through the API server's pod proxy, --router-url, or\n"
            "--sandboxd-url (direct, for debugging).\n"
            "Exit codes: the command's exit code; 128+N when it was killed by signal N; 124\n"
            "when --timeout killed it; 130 after a second Ctrl-C; 1/2/3 as for every\n"
            "command; 5 when sandboxd could not be reached, refused the command, or lost\n"
            "some of its input (-i; a command that exits or closes its stdin before reading\n"
            "all of it is no loss). With -d: 0 started (its id printed), 1/2/3, 5.\n");
}

/* ---- the event stream ---------------------------------------------------------------- */

static int on_line(void *ctx, const char *line, size_t len)
{
    struct exec_state *x = ctx;
    json_t *j = json_loadb(line, len, 0, NULL);
    const char *type = json_string_value(json_object_get(j, "type"));
    int r = 0;
    if (!type) {
        r = -EPROTO;
    } else if (!strcmp(type, "start")) {
        x->id = (long)json_integer_value(json_object_get(j, "id"));
    } else if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
        const char *d = json_string_value(json_object_get(j, "data"));
        buf_reset(&x->dec);
        r = d ? base64_decode(d, strlen(d), &x->dec) : -EPROTO;
        int w = r == 0 ? cli_write_all(type[3] == 'o' ? 1 : 2, x->dec.data ? x->dec.data : "",
                                       x->dec.len)
                       : 0;
        if (w < 0 && w != -EPIPE) { /* EPIPE: the reader went away; the command goes on */
            x->write_err = w;
            json_decref(j);
            return w;
        }
    } else if (!strcmp(type, "exit")) {
        x->exited = true;
        x->exit_code = (int)json_integer_value(json_object_get(j, "exit_code"));
        x->sig = (int)json_integer_value(json_object_get(j, "signal"));
        x->timed_out = json_is_true(json_object_get(j, "timed_out"));
    }
    json_decref(j);
    if (r < 0)
        x->proto_err = r;
    return r;
}

/* ---- control requests ------------------------------------------------------------------ */

/* A second Ctrl-C leaves: a request to sandboxd in flight is given up (within about a
 * second: libcurl's progress callback). */
static bool leaving(void *ctx)
{
    (void)ctx;
    return got_int > 1;
}

/* POSTs to /v1/processes/ID/action; the answer's body goes to resp (may be NULL). A
 * control request (signal, resize, stdin close) gives up after LIMIT_CLI_SBD_CONTROL, so
 * a sandboxd that stops answering cannot hold the session; stdin has the stall limit
 * only. Returns the HTTP status or a negative errno (-ETIMEDOUT, -ECANCELED: leaving). */
static long control_resp(struct exec_state *x, const char *action, const void *body, size_t len,
                         const char *ctype, struct buf *resp)
{
    char path[96], err[512];
    struct buf own;
    long status = 0;
    buf_init(&own, LIMIT_CLI_SBD_ERROR);
    (void)snprintf(path, sizeof(path), "/v1/processes/%ld/%s", x->id, action);
    struct sbd_client_req req = {.method = "POST",
                                 .path = path,
                                 .body = body ? body : "",
                                 .len = len,
                                 .content_type = ctype,
                                 .timeout = strcmp(action, "stdin") ? LIMIT_CLI_SBD_CONTROL : 0,
                                 .cancel = leaving};
    int r = cli_sbd_request(x->s, &req, resp ? resp : &own, &status, err, sizeof(err));
    buf_done(&own);
    return r < 0 ? r : status;
}

static long control(struct exec_state *x, const char *action, const void *body, size_t len,
                    const char *ctype)
{
    return control_resp(x, action, body, len, ctype, NULL);
}

static void send_json(struct exec_state *x, const char *action, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (s)
        (void)control(x, action, s, strlen(s), "application/json");
    xfree(s); /* jansson allocates with malloc: see output.c */
}

/* The terminal's size, from stdin (the terminal exec -t makes raw), else stdout. */
static bool term_size(struct winsize *ws)
{
    return (ioctl(0, TIOCGWINSZ, ws) == 0 || ioctl(1, TIOCGWINSZ, ws) == 0) && ws->ws_col &&
           ws->ws_row;
}

static void send_resize(struct exec_state *x)
{
    struct winsize ws;
    if (term_size(&ws))
        send_json(x, "resize", json_pack("{s:i,s:i}", "cols", ws.ws_col, "rows", ws.ws_row));
}

/* After a 429: the next try after a back-off, 10 ms doubling to 200 ms. */
static void back_off(struct exec_state *x)
{
    x->backoff = x->backoff ? x->backoff * 2 : 10 * USEC_PER_MSEC;
    if (x->backoff > 200 * USEC_PER_MSEC)
        x->backoff = 200 * USEC_PER_MSEC;
    x->retry_at = clock_now() + x->backoff;
}

/* Tells sandboxd that stdin ended. A 429 (its stdin queue is full: on a PTY the end is a
 * ^D queued behind the input) or no answer in time keeps it to be told again after a
 * back-off (a close is idempotent); before, it was lost and the command waited for an
 * end that never came. Other failures are left as they were (the process may have
 * exited already: nothing waits for the end then). */
static void send_close(struct exec_state *x)
{
    long st = control(x, "stdin/close", NULL, 0, NULL);
    x->close_pending = st == 429 || st == -ETIMEDOUT;
    if (x->close_pending)
        back_off(x);
    else
        x->backoff = 0;
}

/* Whether sandboxd's refusal of stdin (status, body resp) says the command takes no
 * more input: the process is gone (404 NOT_FOUND: it exited) or its stdin is closed
 * (400/409 FAILED_PRECONDITION: it exited or closed it). That ends the input as a pipe's
 * reader going away does (`yes | head`); it is no loss. A proxy's refusal (its 404 is
 * another body) is not such an end. */
static bool stdin_ended(long st, const struct buf *resp)
{
    if (st == 404)
        return cli_sbd_error_is(resp->data, resp->len, "NOT_FOUND");
    if (st == 400 || st == 409)
        return cli_sbd_error_is(resp->data, resp->len, "FAILED_PRECONDITION");
    return false;
}

/* Sends the pending stdin chunk. A 429 (sandboxd's stdin queue is full: the command is
 * not reading, perhaps because its own output waits for this loop) keeps it pending, to
 * be sent again after a back-off (back_off) while the loop reads output. A refusal
 * because the command takes no more input (stdin_ended, or its exit already seen) ends
 * the forwarding quietly, as EOF would. Any other failure loses stdin: it is told,
 * stdin is no longer forwarded, and the exit code says so (finish). Returns false once
 * stdin is no longer forwarded. */
static bool send_pending(struct exec_state *x)
{
    struct buf resp;
    buf_init(&resp, LIMIT_CLI_SBD_ERROR);
    long st = control_resp(x, "stdin", x->pending.data, x->pending.len, "application/octet-stream",
                           &resp);
    bool ended = stdin_ended(st, &resp);
    buf_done(&resp);
    if (st == 429) {
        back_off(x);
        return true;
    }
    buf_reset(&x->pending);
    x->backoff = 0;
    if (st >= 200 && st < 300)
        return true;
    if (!ended && !x->exited && st != -ECANCELED) /* -ECANCELED: leaving (finish) */
        x->stdin_refused = st ? st : -EIO;
    return false;
}

/* Forwards what stdin has. Returns false at EOF (stdin closed remotely) or once stdin is
 * given up (send_pending). */
static bool pump_stdin(struct exec_state *x)
{
    char chunk[LIMIT_CLI_STDIN_CHUNK];
    ssize_t n = read(0, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0) {
        send_close(x);
        return false;
    }
    buf_reset(&x->pending);
    (void)buf_append(&x->pending, chunk, (size_t)n);
    return send_pending(x);
}

/* ---- the run --------------------------------------------------------------------------- */

static json_t *request_body(const struct exec_opts *o, int argc, char **argv)
{
    json_t *cmd = json_array();
    for (int i = 0; i < argc; i++)
        (void)json_array_append_new(cmd, json_string(argv[i]));
    json_t *j = json_pack("{s:o}", "command", cmd);
    if (o->env)
        (void)json_object_set(j, "env", o->env);
    if (o->cwd)
        (void)json_object_set_new(j, "cwd", json_string(o->cwd));
    if (o->timeout)
        (void)json_object_set_new(j, "timeout_seconds",
                                  json_real((double)o->timeout / USEC_PER_SEC));
    struct winsize ws;
    if (o->tty && term_size(&ws))
        (void)json_object_set_new(j, "pty",
                                  json_pack("{s:i,s:i}", "cols", ws.ws_col, "rows", ws.ws_row));
    else if (o->tty)
        (void)json_object_set_new(j, "pty", json_true());
    return j;
}

struct loop {
    struct exec_state *x;
    const struct exec_opts *o;
    bool stdin_open, closed_stdin;
    int ints_sent;
};

/* One turn of the loop after the stream made progress: start-up actions, signals,
 * resizes; stdin is watched while it is open. */
static bool loop_turn(void *ctx, bool running, int *ret_fd)
{
    struct loop *l = ctx;
    struct exec_state *x = l->x;
    *ret_fd = -1;
    if (got_int > 1)
        return false; /* the second Ctrl-C leaves at once: no more requests */
    if (x->id >= 0 && !x->exited) {
        if (!l->o->in && !l->closed_stdin) {
            send_close(x);
            l->closed_stdin = true;
        }
        if (x->close_pending && clock_now() >= x->retry_at)
            send_close(x);
        if (got_winch) {
            got_winch = 0;
            send_resize(x);
        }
        if (l->ints_sent < got_int) { /* the first Ctrl-C, passed on */
            l->ints_sent = got_int;
            send_json(x, "signal", json_pack("{s:s}", "signal", "SIGINT"));
        }
        if (l->stdin_open && x->pending.len && clock_now() >= x->retry_at)
            l->stdin_open = send_pending(x);
        if (l->stdin_open && !x->pending.len)
            *ret_fd = 0;
    }
    return running && got_int <= 1;
}

static void loop_stdin(void *ctx)
{
    struct loop *l = ctx;
    l->stdin_open = pump_stdin(l->x);
}

static int run_loop(struct exec_state *x, const struct exec_opts *o)
{
    struct loop l = {.x = x, .o = o, .stdin_open = o->in};
    return cli_stream_run(x->st.h, loop_turn, loop_stdin, &l);
}

static int finish(const struct cli_globals *g, struct exec_state *x, int cc, const char *errbuf)
{
    char text[600];
    if (x->st.status && x->st.status != 200) {
        cli_sbd_error_text(x->st.status, x->st.errbody.data, x->st.errbody.len, text, sizeof(text));
        fprintf(g->err, "error: %s refused the command: %s\n", x->s->what, text);
        return CLI_SBD;
    }
    if (x->write_err) {
        char eb[128];
        fprintf(g->err, "error: cannot write the command's output: %s\n",
                strerror_r(-x->write_err, eb, sizeof(eb)));
        return CLI_ERR;
    }
    if (!x->exited && got_int > 1)
        return 130;         /* a request given up on the way out is no failure to report */
    if (x->stdin_refused) { /* the command did not get all of its input */
        char eb[128];
        if (x->stdin_refused > 0)
            (void)snprintf(text, sizeof(text), "HTTP %ld", x->stdin_refused);
        else
            (void)snprintf(text, sizeof(text), "%s",
                           strerror_r((int)-x->stdin_refused, eb, sizeof(eb)));
        fprintf(g->err, "error: %s did not take the command's input (%s): stdin was cut\n",
                x->s->what, text);
        return CLI_SBD;
    }
    if (x->exited)
        return x->timed_out ? 124 : x->sig > 0 ? 128 + x->sig : x->exit_code;
    if (x->st.status == 0) {
        fprintf(g->err, "error: cannot reach %s: %s\n", x->s->what,
                errbuf[0] ? errbuf : curl_easy_strerror((CURLcode)cc));
        return CLI_SBD;
    }
    fprintf(g->err, "error: the stream from %s ended without an exit status: %s\n", x->s->what,
            cli_stream_why(x->proto_err ? x->proto_err : x->st.err, (CURLcode)cc, errbuf));
    return CLI_SBD;
}

static int do_exec(const struct cli_globals *g, struct cli_sbd *s, const struct exec_opts *o,
                   int argc, char **argv)
{
    struct exec_state x = {.s = s, .id = -1};
    char errbuf[CURL_ERROR_SIZE];
    const char *extra[] = {"Content-Type: application/json", "Accept: application/x-ndjson", NULL};
    struct curl_slist *hdrs = NULL;
    json_t *body = request_body(o, argc, argv);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    cli_stream_init(&x.st, LIMIT_CLI_SBD_LINE, on_line, &x);
    buf_init(&x.dec, LIMIT_CLI_SBD_LINE);
    buf_init(&x.pending, LIMIT_CLI_STDIN_CHUNK);
    CURL *h = curl_easy_init();
    cli_stream_start(&x.st, h);
    (void)cli_sbd_setup(s, h, "POST", "/v1/processes", extra, &hdrs, errbuf);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cli_stream_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x.st);
    int cc = run_loop(&x, o);
    cli_stream_settle(&x.st); /* a refusal with an empty body */
    int rc = finish(g, &x, cc, errbuf);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    xfree(text);
    cli_stream_done(&x.st);
    buf_done(&x.dec);
    buf_done(&x.pending);
    return rc;
}

/* ---- options and terminal ---------------------------------------------------------------- */

static const struct option exec_long[] = {
    {"stdin", no_argument, NULL, 'i'},
    {"tty", no_argument, NULL, 't'},
    {"cwd", required_argument, NULL, 'C'},
    {"env", required_argument, NULL, 'e'},
    {"timeout", required_argument, NULL, 'T'},
    {"background", no_argument, NULL, 'd'},
    {NULL, 0, NULL, 0},
};

static int parse_exec(const struct cli_globals *g, int argc, char **argv, struct exec_opts *o)
{
    int ch;
    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "ite:d", exec_long, NULL)) != -1) {
        const char *eq = ch == 'e' ? strchr(optarg, '=') : NULL;
        if (ch == 'd') {
            o->background = true;
        } else if (ch == 'i') {
            o->in = true;
        } else if (ch == 't') {
            o->tty = true;
        } else if (ch == 'C') {
            o->cwd = optarg;
        } else if (ch == 'e' && eq && eq != optarg) {
            if (!o->env)
                o->env = json_object();
            char *k = xstrndup(optarg, (size_t)(eq - optarg));
            (void)json_object_set_new(o->env, k, json_string(eq + 1));
            xfree(k);
        } else if (ch == 'e') {
            fprintf(g->err, "error: -e/--env takes K=V, not %s\n", optarg);
            return CLI_USAGE;
        } else if (ch == 'T') {
            if (cli_parse_timeout(g, optarg, false, &o->timeout) != CLI_OK)
                return CLI_USAGE;
        } else {
            fprintf(g->err, "error: bad option %s; see exec --help\n", argv[optind - 1]);
            return CLI_USAGE;
        }
    }
    return CLI_OK;
}

int cli_cmd_exec(struct cli_globals *g, int argc, char **argv)
{
    struct exec_opts o = {0};
    /* getopt sees only what precedes "--" (a copy it may permute), never the command */
    int dd = 1;
    while (dd < argc && strcmp(argv[dd], "--") != 0)
        dd++;
    char **head = xcalloc((size_t)dd + 1, sizeof(char *));
    memcpy(head, argv, (size_t)dd * sizeof(char *));
    int rc = parse_exec(g, dd, head, &o);
    if (rc == CLI_OK && (dd - optind != 1 || dd + 1 >= argc)) {
        fprintf(g->err, "error: usage: kubectl-sandbox exec NAME [options] -- COMMAND [ARG...]\n");
        rc = CLI_USAGE;
    }
    if (rc == CLI_OK && o.background && (o.in || o.tty)) {
        fprintf(g->err, "error: --background cannot be combined with -i or -t\n");
        rc = CLI_USAGE;
    }
    struct cli_sbd *s = NULL;
    if (rc == CLI_OK)
        rc = cli_sbd_open(g, head[optind], &s);
    if (rc == CLI_OK && o.background) {
        json_t *body = request_body(&o, argc - dd - 1, argv + dd + 1);
        rc = cli_proc_start_bg(g, s, body);
        json_decref(body);
    } else if (rc == CLI_OK) {
        /* raw only when the keys go to the command (-i), as kubectl: else Ctrl-C must
         * still reach this process (ISIG), which passes it on */
        bool raw = o.tty && o.in && cli_tty_raw(0);
        struct sigaction sa = {.sa_handler = on_signal}, ign = {.sa_handler = SIG_IGN};
        sigemptyset(&sa.sa_mask);
        sigemptyset(&ign.sa_mask);
        (void)sigaction(SIGWINCH, &sa, NULL);
        /* a reader of the output that went away (| head) is an EPIPE the stream survives,
         * not a death that would leave the terminal raw */
        (void)sigaction(SIGPIPE, &ign, NULL);
        if (!raw)
            (void)sigaction(SIGINT, &sa, NULL);
        rc = do_exec(g, s, &o, argc - dd - 1, argv + dd + 1);
        if (raw)
            cli_tty_restore();
    }
    cli_sbd_free(s);
    json_decref(o.env);
    xfree(head);
    return rc;
}
