/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox exec and cp against a real sandboxd process on 127.0.0.1 (direct mode,
 * --sandboxd-url; cp's entry bound runs in this process, set small), plus the pod-proxy
 * and router connection modes against the real API server: a Ready Sandbox whose pod
 * does not exist gives the API server's error, and a "router" that is in fact sandboxd
 * proves router mode's URL and Ready check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "api/res.h"
#include "cli/cli.h"
#include "common/buf.h"
#include "common/xalloc.h"
#include "kube/obj.h"
#include "support/apiserver.h"
#include "support/cli_run.h"
#include "support/kube_fixture.h"

static struct kube_client *client;
static char ns[64];
static pid_t sbd_pid = -1;
static char root[] = "/tmp/cli-sbd-root-XXXXXX";
static char work[] = "/tmp/cli-sbd-work-XXXXXX";
static char logpath[600];
static char url[128];

/* kubectl-sandbox in direct mode against the test's sandboxd, with arguments (shell
 * syntax) formatted from fmt; stdout+stderr into out. Returns the exit code. */
static int run_direct(struct buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run_direct(struct buf *out, const char *fmt, ...)
{
    char a[6000];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(a, sizeof(a), fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof(a));
    return it_cli_runf(out, "--sandboxd-url %s %s", url, a);
}

static bool port_logged(void *ctx)
{
    (void)ctx;
    FILE *f = fopen(logpath, "r");
    char line[1024];
    bool found = false;
    while (f && !found && fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, " port=");
        unsigned port;
        if (strstr(line, "listening") && p && sscanf(p, " port=%u", &port) == 1 && port) {
            (void)snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
            found = true;
        }
    }
    if (f)
        fclose(f);
    return found;
}

static void start_sandboxd(void)
{
    assert_non_null(mkdtemp(root));
    assert_non_null(mkdtemp(work));
    (void)snprintf(logpath, sizeof(logpath), "%s/sandboxd.log", work);
    char bin[1024];
    (void)snprintf(bin, sizeof(bin), "%s/sandboxd", getenv("AS_BIN_DIR"));
    sbd_pid = fork();
    assert_true(sbd_pid >= 0);
    if (sbd_pid == 0) {
        int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        (void)dup2(fd, 2);
        execl(bin, bin, "--host", "127.0.0.1", "--port", "0", "--legacy-port", "-1", "--grpc-port",
              "0", "--root", root, (char *)NULL);
        _exit(127);
    }
    assert_int_equal(it_wait(port_logged, NULL, 20 * USEC_PER_SEC), 0);
}

static void create_sandbox(const char *name, const char *ready)
{
    struct kube_err e;
    json_t *sb = json_pack("{s:s,s:s,s:{s:s},s:{s:{s:{s:[{s:s,s:s}]}}}}", "apiVersion",
                           "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata", "name", name,
                           "spec", "podTemplate", "spec", "containers", "name", "main", "image",
                           "localhost/agent-sandbox/runtime:dev");
    json_t *created = NULL;
    IT_OK(kube_create(client, &API_RES_SANDBOXES, ns, sb, &created, &e), &e);
    json_decref(sb);
    json_t *st = json_pack("{s:[{s:s,s:s,s:s,s:s,s:s}]}", "conditions", "type", "Ready", "status",
                           ready, "reason", "DependenciesReady", "message", "",
                           "lastTransitionTime", "2026-01-01T00:00:00Z");
    (void)json_object_set_new(created, "status", st);
    IT_OK(kube_update_status(client, &API_RES_SANDBOXES, ns, created, NULL, &e), &e);
    json_decref(created);
}

static int setup(void **state)
{
    (void)state;
    struct kube_err e;
    struct it_sandbox_ns_opts o = {.prefix = "cli-sbd", .timeout = 60 * USEC_PER_SEC};
    start_sandboxd();
    IT_OK(it_client_new(NULL, &client, &e), &e);
    IT_OK(it_sandbox_ns_setup(client, &o, ns, sizeof(ns), &e), &e);
    create_sandbox("ready", "True");
    create_sandbox("notready", "False");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (sbd_pid > 0) {
        (void)kill(sbd_pid, SIGTERM);
        (void)waitpid(sbd_pid, NULL, 0);
    }
    char cmd[256];
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", root, work);
    (void)system(cmd);
    (void)it_ns_delete(client, ns, 60 * USEC_PER_SEC);
    kube_client_free(client);
    return 0;
}

static void test_exec_output_and_codes(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    /* stdout and stderr arrive on their own streams */
    assert_int_equal(
        run_direct(&out, "exec x -- sh -c 'echo out; echo err >&2; exit 3' 2>/dev/null"), 3);
    assert_string_equal(buf_str(&out), "out\n");
    assert_int_equal(run_direct(&out, "exec x -- sh -c 'echo err >&2' >/dev/null"), 0);
    assert_string_equal(buf_str(&out), "err\n");
    /* killed by a signal: 128+N; --timeout: 124 */
    assert_int_equal(run_direct(&out, "exec x -- sh -c 'kill -9 $$'"), 137);
    assert_int_equal(run_direct(&out, "exec x --timeout 1s -- sleep 30"), 124);
    /* env and cwd; no -i means the command's stdin is closed (cat ends) */
    char sub[700];
    (void)snprintf(sub, sizeof(sub), "%s/sub", root);
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(run_direct(&out, "exec x -e A=1 --env B=two --cwd sub -- sh -c "
                                      "'echo $A $B; pwd; cat'"),
                     0);
    char want[800];
    (void)snprintf(want, sizeof(want), "1 two\n%s/sub\n", root);
    assert_string_equal(buf_str(&out), want);
    /* an unknown command is refused by sandboxd: exit 5 with its message */
    assert_int_equal(run_direct(&out, "exec x -- /no/such/binary"), 5);
    assert_non_null(strstr(buf_str(&out), "NOT_FOUND"));
    assert_int_equal(run_direct(&out, "exec x"), 2);
    assert_int_equal(run_direct(&out, "exec x -- "), 2);
    buf_done(&out);
}

/* KUBECTL_SANDBOX_CURL_VERBOSE shows the requests' headers on stderr, never the bearer
 * token (it printed "Authorization: Bearer <token>"). */
static void test_verbose_masks_token(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(run_direct(&out,
                                "exec x -- true; AGENT_SANDBOX_SANDBOXD_TOKEN=sekrit-tok3n "
                                "KUBECTL_SANDBOX_CURL_VERBOSE=1 '%s/kubectl-sandbox' "
                                "--sandboxd-url %s exec x -- true",
                                getenv("AS_BIN_DIR"), url),
                     0);
    assert_non_null(strstr(buf_str(&out), "> POST /v1/processes"));
    assert_non_null(strstr(buf_str(&out), "Authorization: <masked>"));
    assert_null(strstr(buf_str(&out), "sekrit-tok3n"));
    buf_done(&out);
}

static void test_exec_stdin(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 4 << 20);
    /* 1 MiB through stdin and back, byte for byte */
    assert_int_equal(
        run_direct(&out,
                   "exec x -i -- sh -c 'cat > in.bin; md5sum < in.bin' < /dev/null; "
                   "head -c 1048576 /dev/urandom > %s/in.bin; "
                   "'%s/kubectl-sandbox' --sandboxd-url %s exec x -i -- md5sum < %s/in.bin; "
                   "md5sum < %s/in.bin",
                   work, getenv("AS_BIN_DIR"), url, work, work),
        0);
    /* three lines: the empty file's sum, then the remote and local sums of in.bin */
    char sums[3][64];
    assert_int_equal(sscanf(buf_str(&out), "%63s - %63s - %63s -", sums[0], sums[1], sums[2]), 3);
    assert_string_equal(sums[0], "d41d8cd98f00b204e9800998ecf8427e");
    assert_string_equal(sums[1], sums[2]);
    /* large output arrives complete */
    assert_int_equal(run_direct(&out, "exec x -- head -c 3000000 /dev/zero | wc -c"), 0);
    assert_string_equal(buf_str(&out), "3000000\n");
    /* a command that reads nothing for 15 s while 12 MiB wait (sandboxd's 8 MiB stdin
     * queue answers 429 all that time): every byte still arrives (the chunk was dropped
     * after about 10 s of 429s, and the exit code said nothing) */
    assert_int_equal(run_direct(&out,
                                "exec x -- true; head -c 12582912 /dev/zero | "
                                "'%s/kubectl-sandbox' --sandboxd-url %s exec x -i -- "
                                "sh -c 'sleep 15; wc -c'",
                                getenv("AS_BIN_DIR"), url),
                     0);
    assert_string_equal(buf_str(&out), "12582912\n");
    /* a reader of the output that goes away (| head) does not kill it (SIGPIPE): the
     * command runs to its end and its exit code comes back */
    assert_int_equal(
        run_direct(&out,
                   "exec x -- true; ( '%s/kubectl-sandbox' --sandboxd-url %s exec x -- "
                   "sh -c 'seq 1 200000; exit 7'; echo \"rc=$?\" > %s/rc.txt ) | "
                   "head -1; cat %s/rc.txt",
                   getenv("AS_BIN_DIR"), url, work, work),
        0);
    assert_string_equal(buf_str(&out), "1\nrc=7\n");
    buf_done(&out);
}

static void test_cp_round_trip(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(
        run_direct(&out,
                   "x >/dev/null 2>&1; mkdir -p %s/src/a/b && echo hi > %s/src/hi.txt && "
                   ": > %s/src/empty && head -c 700000 /dev/urandom > %s/src/a/b/rand && "
                   "printf '#!/bin/sh\\n' > %s/src/a/run.sh && chmod 750 %s/src/a/run.sh && echo",
                   work, work, work, work, work, work),
        0);
    /* upload into a directory (trailing /), then download the tree elsewhere */
    assert_int_equal(run_direct(&out, "cp %s/src x:up/", work), 0);
    char p[1024];
    struct stat st;
    (void)snprintf(p, sizeof(p), "%s/up/src/a/run.sh", root);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0750);
    (void)snprintf(p, sizeof(p), "%s/up/src/empty", root);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 0);
    assert_int_equal(run_direct(&out, "cp x:/up/src %s/back && diff -r %s/src %s/back && echo SAME",
                                work, work, work),
                     0);
    assert_string_equal(buf_str(&out), "SAME\n");
    (void)snprintf(p, sizeof(p), "%s/back/a/run.sh", work);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0750);
    /* a source named ".." goes into the destination directory itself, as GNU cp -r
     * (before: into its parent) */
    (void)snprintf(p, sizeof(p), "%s/dotdot", work);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(run_direct(&out,
                                "cp x:up/src/a/.. %s/dotdot && diff -r %s/src %s/dotdot && "
                                "echo SAME",
                                work, work, work),
                     0);
    assert_string_equal(buf_str(&out), "SAME\n");
    assert_int_equal(run_direct(&out, "cp %s/src/a/.. x:up2/", work), 0);
    (void)snprintf(p, sizeof(p), "%s/up2/a/run.sh", root);
    assert_int_equal(stat(p, &st), 0);
    /* a symlink named as the source is followed, to a file or to a directory (before:
     * nothing copied, exit 0); a special file named so is an error */
    (void)snprintf(p, sizeof(p), "%s/hi.link", work);
    assert_int_equal(symlink("src/hi.txt", p), 0);
    (void)snprintf(p, sizeof(p), "%s/src.link", work);
    assert_int_equal(symlink("src", p), 0);
    assert_int_equal(run_direct(&out, "cp %s/hi.link x:viafile && cat %s/viafile", work, root), 0);
    assert_string_equal(buf_str(&out), "hi\n");
    assert_int_equal(run_direct(&out, "cp %s/src.link x:viadir/", work), 0);
    (void)snprintf(p, sizeof(p), "%s/viadir/src.link/a/run.sh", root);
    assert_int_equal(stat(p, &st), 0);
    (void)snprintf(p, sizeof(p), "%s/fifo", work);
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_int_equal(run_direct(&out, "cp %s/fifo x:fifo", work), 1);
    assert_non_null(strstr(buf_str(&out), "is not a regular file or directory"));
    /* a single file to a name, and into an existing local directory */
    assert_int_equal(run_direct(&out, "cp %s/src/hi.txt x:one.txt && cat %s/one.txt", work, root),
                     0);
    assert_string_equal(buf_str(&out), "hi\n");
    assert_int_equal(run_direct(&out, "cp x:one.txt %s && cat %s/one.txt", work, work), 0);
    assert_string_equal(buf_str(&out), "hi\n");
    /* a single file keeps its mode (0600 stays private), also over an existing file, and
     * arrives through a temporary file that does not stay behind */
    assert_int_equal(
        run_direct(&out,
                   "x >/dev/null 2>&1; echo secret > %s/secret && chmod 600 %s/secret && "
                   "echo old > %s/secret.local && chmod 644 %s/secret.local && echo",
                   root, root, work, work),
        0);
    assert_int_equal(run_direct(&out, "cp x:secret %s/secret.new", work), 0);
    assert_int_equal(run_direct(&out, "cp x:/secret %s/secret.local", work), 0);
    (void)snprintf(p, sizeof(p), "%s/secret.new", work);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    (void)snprintf(p, sizeof(p), "%s/secret.local", work);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(run_direct(&out,
                                "x >/dev/null 2>&1; cat %s/secret.local; ls -a %s | grep -c cp-",
                                work, work),
                     1);
    assert_string_equal(buf_str(&out), "secret\n0\n");
    /* through a sandbox symlink: the mode of the file (not the link's 0777); a setuid
     * file loses the bit; a local symlink destination is written through (kept a link) */
    assert_int_equal(
        run_direct(&out,
                   "x >/dev/null 2>&1; echo pub > %s/pub && chmod 644 %s/pub && "
                   "ln -s pub %s/pub.link && echo t > %s/suid && chmod 4755 %s/suid && "
                   "echo old > %s/target && ln -s target %s/dest.link && echo",
                   root, root, root, root, root, work, work),
        0);
    assert_int_equal(run_direct(&out, "cp x:pub.link %s/pub.out", work), 0);
    assert_int_equal(run_direct(&out, "cp x:suid %s/suid.out", work), 0);
    assert_int_equal(run_direct(&out, "cp x:pub %s/dest.link", work), 0);
    (void)snprintf(p, sizeof(p), "%s/pub.out", work);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    (void)snprintf(p, sizeof(p), "%s/suid.out", work);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07000, 0);
    (void)snprintf(p, sizeof(p), "%s/dest.link", work);
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(run_direct(&out, "x >/dev/null 2>&1; cat %s/target", work), 0);
    assert_string_equal(buf_str(&out), "pub\n");
    /* the umask applies (077: a 0644 file arrives 0600); a name near NAME_MAX (250
     * bytes) still fits the temporary name beside it */
    char longname[251];
    memset(longname, 'n', 250);
    longname[250] = '\0';
    assert_int_equal(run_direct(&out,
                                "x >/dev/null 2>&1; cp %s/pub %s/%s && umask 077 && "
                                "'%s/kubectl-sandbox' --sandboxd-url %s cp x:pub %s/pub.077 && "
                                "'%s/kubectl-sandbox' --sandboxd-url %s cp x:%s %s/ && echo OK",
                                root, root, longname, getenv("AS_BIN_DIR"), url, work,
                                getenv("AS_BIN_DIR"), url, longname, work),
                     0);
    assert_non_null(strstr(buf_str(&out), "OK"));
    (void)snprintf(p, sizeof(p), "%s/pub.077", work);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    (void)snprintf(p, sizeof(p), "%s/%s", work, longname);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 4);
    /* errors; a failed download leaves an existing file alone */
    assert_int_equal(run_direct(&out, "cp x:missing %s/secret.local", work), 5);
    assert_non_null(strstr(buf_str(&out), "missing"));
    assert_int_equal(run_direct(&out, "x >/dev/null 2>&1; cat %s/secret.local", work), 0);
    assert_string_equal(buf_str(&out), "secret\n");
    assert_int_equal(run_direct(&out, "cp a b"), 2);
    assert_int_equal(run_direct(&out, "cp x:a y:b"), 2);
    assert_int_equal(run_direct(&out, "cp x:../escape %s/e", work), 5);
    buf_done(&out);
}

/* cp in this process (the code of kubectl-sandbox cp, main only passes its exit code
 * on) against the test's sandboxd, copying at most max entries; stdout and stderr into
 * out. Returns cp's exit code. */
static int cp_with(const struct cli_cp_opts *o, const char *src, const char *dst, struct buf *out);
static const char *cp_url; /* cp_with's sandboxd when not the test's (NULL: url) */

static int cp_bounded(unsigned max, const char *src, const char *dst, struct buf *out)
{
    const struct cli_cp_opts o = {.max_entries = max};
    return cp_with(&o, src, dst, out);
}

/* cp with options o, as cp_bounded. */
static int cp_with(const struct cli_cp_opts *o, const char *src, const char *dst, struct buf *out)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    char cmd[] = "cp", *s = xstrdup(src), *d = xstrdup(dst);
    char *argv[] = {cmd, s, d, NULL};
    struct cli_globals g = {
        .output = "", .sandboxd_url = cp_url ? cp_url : url, .out = f, .err = f};
    int rc = cli_cp_run(&g, o, 3, argv);
    assert_int_equal(fclose(f), 0);
    buf_reset(out);
    assert_int_equal(buf_append(out, text, len), 0);
    xfree(text);
    xfree(s);
    xfree(d);
    return rc;
}

/* Writes text into dir/rel (dir/rel's directory must exist). */
static void write_at(const char *dir, const char *rel, const char *text)
{
    char p[1024];
    (void)snprintf(p, sizeof(p), "%s/%s", dir, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Creates dir/rel as a directory. */
static void mkdir_at(const char *dir, const char *rel)
{
    char p[1024];
    (void)snprintf(p, sizeof(p), "%s/%s", dir, rel);
    assert_int_equal(mkdir(p, 0755), 0);
}

/* The content of dir/rel (at most 63 bytes) into out, or "<absent>". */
static const char *read_at(const char *dir, const char *rel, char *out, size_t size)
{
    char p[1024];
    (void)snprintf(p, sizeof(p), "%s/%s", dir, rel);
    FILE *f = fopen(p, "r");
    if (!f)
        return errno == ENOENT ? "<absent>" : "<unreadable>";
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    (void)fclose(f);
    return out;
}

/* How many names in dir/rel start with '.' (other than . and ..): cp's temporary files
 * are ".NAME.cp-XXXXXX". */
static int dot_names(const char *dir, const char *rel)
{
    char p[1024];
    (void)snprintf(p, sizeof(p), "%s/%s", dir, rel);
    DIR *d = opendir(p);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_name[0] == '.' && strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    (void)closedir(d);
    return n;
}

/* a, b and sub/c of the tree lim (below dir), as cp's bound test writes them. */
static const char *const lim_files[] = {"a", "b", "sub/c"};
static const char *const lim_texts[] = {"file a\n", "file b\n", "file c\n"};

/* cp stops at its bound of entries (LIMIT_CLI_CP_ENTRIES, set small here) with an error
 * and exit 1, in both directions; exactly the bound is copied whole. A download counts
 * the directories too (lim, a, b, sub, sub/c: 5, in sandboxd's name order) and writes
 * nothing of the entries past the bound: an existing local file stays as it was and no
 * temporary file is left. An upload counts files (3). */
static void test_cp_entry_bound(void **state)
{
    (void)state;
    struct buf out;
    char dst[700], got[64];
    buf_init(&out, 1 << 20);
    mkdir_at(root, "lim");
    mkdir_at(root, "lim/sub");
    (void)snprintf(dst, sizeof(dst), "%s/lim", root);
    for (int i = 0; i < 3; i++)
        write_at(dst, lim_files[i], lim_texts[i]);
    /* download: 5 entries under a bound of 5 */
    (void)snprintf(dst, sizeof(dst), "%s/dl5", work);
    assert_int_equal(cp_bounded(5, "x:lim", dst, &out), CLI_OK);
    assert_string_equal(buf_str(&out), "");
    for (int i = 0; i < 3; i++)
        assert_string_equal(read_at(dst, lim_files[i], got, sizeof(got)), lim_texts[i]);
    /* under a bound of 4 into a fresh directory: a and b complete, sub made, no sub/c */
    (void)snprintf(dst, sizeof(dst), "%s/dl4", work);
    assert_int_equal(cp_bounded(4, "x:lim", dst, &out), CLI_ERR);
    assert_string_equal(buf_str(&out), "error: cp: more than 4 files and directories\n");
    assert_string_equal(read_at(dst, "a", got, sizeof(got)), "file a\n");
    assert_string_equal(read_at(dst, "b", got, sizeof(got)), "file b\n");
    assert_string_equal(read_at(dst, "sub/c", got, sizeof(got)), "<absent>");
    assert_int_equal(dot_names(dst, "."), 0);
    assert_int_equal(dot_names(dst, "sub"), 0);
    /* the same over an existing local copy (into directory pre: pre/lim): its sub/c,
     * past the bound, is left alone */
    (void)snprintf(dst, sizeof(dst), "%s/pre", work);
    mkdir_at(work, "pre");
    mkdir_at(work, "pre/lim");
    mkdir_at(work, "pre/lim/sub");
    write_at(work, "pre/lim/a", "old a\n");
    write_at(work, "pre/lim/sub/c", "old c\n");
    assert_int_equal(cp_bounded(4, "x:lim", dst, &out), CLI_ERR);
    assert_string_equal(buf_str(&out), "error: cp: more than 4 files and directories\n");
    assert_string_equal(read_at(dst, "lim/a", got, sizeof(got)), "file a\n");
    assert_string_equal(read_at(dst, "lim/sub/c", got, sizeof(got)), "old c\n");
    assert_int_equal(dot_names(dst, "lim"), 0);
    assert_int_equal(dot_names(dst, "lim/sub"), 0);
    /* upload: 3 files (directories do not count) under a bound of 3, then of 2 */
    mkdir_at(work, "ul");
    mkdir_at(work, "ul/sub");
    (void)snprintf(dst, sizeof(dst), "%s/ul", work);
    for (int i = 0; i < 3; i++)
        write_at(dst, lim_files[i], lim_texts[i]);
    assert_int_equal(cp_bounded(3, dst, "x:up3/", &out), CLI_OK);
    assert_string_equal(buf_str(&out), "");
    (void)snprintf(dst, sizeof(dst), "%s/up3/ul", root);
    for (int i = 0; i < 3; i++)
        assert_string_equal(read_at(dst, lim_files[i], got, sizeof(got)), lim_texts[i]);
    (void)snprintf(dst, sizeof(dst), "%s/ul", work);
    assert_int_equal(cp_bounded(2, dst, "x:up2/", &out), CLI_ERR);
    assert_string_equal(buf_str(&out), "error: cp: more than 2 files\n");
    /* the local directory's order decides which two arrive; the third does not */
    (void)snprintf(dst, sizeof(dst), "%s/up2/ul", root);
    int arrived = 0;
    for (int i = 0; i < 3; i++) {
        const char *t = read_at(dst, lim_files[i], got, sizeof(got));
        if (strcmp(t, "<absent>") != 0) {
            assert_string_equal(t, lim_texts[i]);
            arrived++;
        }
    }
    assert_int_equal(arrived, 2);
    buf_done(&out);
}

/* A directory larger than one listing page (sandboxd's "continue"; pages of 2 names
 * asked here, its default is 10,000) is copied whole, every page followed, below as at
 * the top; the entries bound counts across pages. */
static void test_cp_listing_pages(void **state)
{
    (void)state;
    static const char *const names[] = {"e", "a", "d", "b", "c", "sub/z", "sub/x", "sub/y"};
    struct buf out;
    char dst[700], got[64];
    buf_init(&out, 1 << 20);
    mkdir_at(root, "pages");
    mkdir_at(root, "pages/sub");
    (void)snprintf(dst, sizeof(dst), "%s/pages", root);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        write_at(dst, names[i], names[i]);
    const struct cli_cp_opts paged = {.listing_page = 2};
    (void)snprintf(dst, sizeof(dst), "%s/paged", work);
    assert_int_equal(cp_with(&paged, "x:pages", dst, &out), CLI_OK);
    assert_string_equal(buf_str(&out), "");
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        assert_string_equal(read_at(dst, names[i], got, sizeof(got)), names[i]);
    /* the bound across pages: pages, a, b, c, d (5) of 10 */
    const struct cli_cp_opts bounded = {.listing_page = 2, .max_entries = 5};
    (void)snprintf(dst, sizeof(dst), "%s/paged5", work);
    assert_int_equal(cp_with(&bounded, "x:pages", dst, &out), CLI_ERR);
    assert_string_equal(buf_str(&out), "error: cp: more than 5 files and directories\n");
    assert_string_equal(read_at(dst, "d", got, sizeof(got)), "d");
    assert_string_equal(read_at(dst, "e", got, sizeof(got)), "<absent>");
    buf_done(&out);
}

/* A stand-in sandboxd whose listings never end: /v1/files/loop's pages repeat their
 * token (their one entry, ".", is skipped), /v1/files/empty's hold nothing; GET /quit
 * ends it. Prints its port first. */
static const char fake_lister[] =
    "import http.server, json, os, sys\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def log_message(self, *a): pass\n"
    "    def do_GET(self):\n"
    "        if self.path == '/quit':\n"
    "            os._exit(0)\n"
    "        e = [] if self.path.startswith('/v1/files/empty') else [{'name': '.'}]\n"
    "        b = json.dumps({'path': '/x', 'entries': e, 'continue': '61'}).encode()\n"
    "        self.send_response(200)\n"
    "        self.send_header('Content-Type', 'application/json')\n"
    "        self.send_header('Content-Length', str(len(b)))\n"
    "        self.end_headers()\n"
    "        self.wfile.write(b)\n"
    "s = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
    "print(s.server_address[1], flush=True)\n"
    "s.timeout = 60\n"
    "while True:\n"
    "    s.handle_request()\n";

/* cp stops, with an error, at a listing whose pages do not advance (a token that does not
 * grow, a page with nothing in it) instead of asking for pages for ever. */
static void test_cp_listing_must_advance(void **state)
{
    (void)state;
    char script[700], fake[64], dst[700];
    struct buf out;
    (void)snprintf(script, sizeof(script), "%s/fake_lister.py", work);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    assert_true(fputs(fake_lister, f) >= 0);
    assert_int_equal(fclose(f), 0);
    char cmd[800];
    (void)snprintf(cmd, sizeof(cmd), "python3 '%s'", script);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int port = 0;
    assert_int_equal(fscanf(p, "%d", &port), 1);
    (void)snprintf(fake, sizeof(fake), "http://127.0.0.1:%d", port);
    buf_init(&out, 1 << 20);
    cp_url = fake;
    const struct cli_cp_opts o = {0};
    static const char *const dirs[] = {"x:loop", "x:empty"};
    for (size_t i = 0; i < 2; i++) {
        (void)snprintf(dst, sizeof(dst), "%s/adv%zu", work, i);
        assert_int_equal(cp_with(&o, dirs[i], dst, &out), CLI_ERR);
        assert_non_null(strstr(buf_str(&out), "has a listing whose pages do not advance"));
    }
    cp_url = NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    static const char quit[] = "GET /quit HTTP/1.0\r\n\r\n";
    assert_int_equal(write(fd, quit, sizeof(quit) - 1), (ssize_t)sizeof(quit) - 1);
    (void)close(fd);
    (void)pclose(p);
    buf_done(&out);
}

/* kubectl-sandbox cp SRC DST under umask 022, stdout+stderr into out. Returns the exit
 * code. */
static int cp_umask022(struct buf *out, const char *src, const char *dst)
{
    return run_direct(out,
                      "x >/dev/null 2>&1; umask 022 && '%s/kubectl-sandbox' --sandboxd-url %s "
                      "cp %s %s",
                      getenv("AS_BIN_DIR"), url, src, dst);
}

/* The permission bits of dir/rel (lstat). */
static unsigned mode_at(const char *dir, const char *rel)
{
    char p[1024];
    struct stat st;
    (void)snprintf(p, sizeof(p), "%s/%s", dir, rel);
    assert_int_equal(lstat(p, &st), 0);
    return (unsigned)(st.st_mode & 07777);
}

/* Creates dir/rel as a symlink to target. */
static void symlink_at(const char *target, const char *dir, const char *rel)
{
    char p[1024];
    (void)snprintf(p, sizeof(p), "%s/%s", dir, rel);
    assert_int_equal(symlink(target, p), 0);
}

/* A file read through a symlink in the sandbox gets the mode of the file sandboxd served
 * (its X-File-Mode), less the umask: a 0600 target stays private (not 0644 from a 0666
 * default), a 0750 one keeps its x bits, an empty 0700 one (no body) too. */
static void test_cp_link_modes(void **state)
{
    (void)state;
    struct buf out;
    char src[64], dst[700];
    buf_init(&out, 1 << 20);
    mkdir_at(root, "lm");
    mkdir_at(work, "lm");
    static const char *const names[] = {"secret", "run.sh", "empty"};
    static const char *const texts[] = {"secret\n", "#!/bin/sh\n", ""};
    static const unsigned modes[] = {0600, 0750, 0700};
    char p[1024];
    for (int i = 0; i < 3; i++) {
        (void)snprintf(src, sizeof(src), "lm/%s", names[i]);
        write_at(root, src, texts[i]);
        (void)snprintf(p, sizeof(p), "%s/%s", root, src);
        assert_int_equal(chmod(p, modes[i]), 0);
        (void)snprintf(src, sizeof(src), "lm/%s.link", names[i]);
        symlink_at(names[i], root, src);
        (void)snprintf(src, sizeof(src), "x:lm/%s.link", names[i]);
        (void)snprintf(dst, sizeof(dst), "%s/lm/%s", work, names[i]);
        assert_int_equal(cp_umask022(&out, src, dst), 0);
        assert_string_equal(buf_str(&out), "");
        (void)snprintf(src, sizeof(src), "lm/%s", names[i]);
        assert_int_equal(mode_at(work, src), modes[i]);
    }
    buf_done(&out);
}

/* A download over existing local files and directories never opens them up: a private
 * 0600 file or 0700 directory is not made 0644 or 0755 by the sandbox's modes (the mode
 * is what both allow; test_cp_round_trip: a private remote file arrives private over a
 * 0644 one); new ones take the sandbox's (less the umask). */
static void test_cp_keeps_existing_modes(void **state)
{
    (void)state;
    struct buf out;
    char p[1024];
    buf_init(&out, 1 << 20);
    mkdir_at(root, "km");
    mkdir_at(root, "km/sub");
    write_at(root, "km/f", "remote f\n");
    write_at(root, "km/new", "remote new\n");
    (void)snprintf(p, sizeof(p), "%s/km/f", root);
    assert_int_equal(chmod(p, 0644), 0);
    (void)snprintf(p, sizeof(p), "%s/km/new", root);
    assert_int_equal(chmod(p, 0640), 0);
    (void)snprintf(p, sizeof(p), "%s/km/sub", root);
    assert_int_equal(chmod(p, 0755), 0);
    mkdir_at(work, "kmdst");
    mkdir_at(work, "kmdst/km");
    mkdir_at(work, "kmdst/km/sub");
    write_at(work, "kmdst/km/f", "local f\n");
    (void)snprintf(p, sizeof(p), "%s/kmdst/km/f", work);
    assert_int_equal(chmod(p, 0600), 0);
    (void)snprintf(p, sizeof(p), "%s/kmdst/km/sub", work);
    assert_int_equal(chmod(p, 0700), 0);
    (void)snprintf(p, sizeof(p), "%s/kmdst", work);
    assert_int_equal(cp_umask022(&out, "x:km", p), 0);
    assert_string_equal(buf_str(&out), "");
    char got[64];
    assert_string_equal(read_at(work, "kmdst/km/f", got, sizeof(got)), "remote f\n");
    assert_int_equal(mode_at(work, "kmdst/km/f"), 0600);
    assert_int_equal(mode_at(work, "kmdst/km/sub"), 0700);
    assert_int_equal(mode_at(work, "kmdst/km/new"), 0640);
    buf_done(&out);
}

/* A local destination that is a dangling symlink is refused, as GNU cp refuses it ("not
 * writing through dangling symlink"): exit 1, the link stays a link, nothing appears
 * where it points, no temporary file is left; for a file with content and an empty one,
 * a link to a missing name and one into a missing directory. */
static void test_cp_dangling_dest(void **state)
{
    (void)state;
    struct buf out;
    char dst[700], want[800], got[64];
    buf_init(&out, 1 << 20);
    mkdir_at(work, "dd");
    symlink_at("nowhere", work, "dd/dangling");
    symlink_at("gone/x", work, "dd/deep");
    write_at(root, "dd.txt", "data\n");
    write_at(root, "dd.empty", "");
    static const char *const links[] = {"dangling", "deep"};
    static const char *const srcs[] = {"x:dd.txt", "x:dd.empty"};
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++) {
            (void)snprintf(dst, sizeof(dst), "%s/dd/%s", work, links[i]);
            assert_int_equal(cp_bounded(0, srcs[j], dst, &out), CLI_ERR);
            (void)snprintf(want, sizeof(want),
                           "error: cp: not writing through dangling symlink %s\n", dst);
            assert_string_equal(buf_str(&out), want);
        }
    }
    /* the binary's exit code */
    (void)snprintf(dst, sizeof(dst), "%s/dd/dangling", work);
    assert_int_equal(run_direct(&out, "cp x:dd.txt %s", dst), 1);
    assert_non_null(strstr(buf_str(&out), "not writing through dangling symlink"));
    char p[1024];
    struct stat st;
    (void)snprintf(p, sizeof(p), "%s/dd/dangling", work);
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    (void)snprintf(p, sizeof(p), "%s/dd/deep", work);
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_string_equal(read_at(work, "dd/nowhere", got, sizeof(got)), "<absent>");
    assert_string_equal(read_at(work, "dd/gone", got, sizeof(got)), "<absent>");
    assert_int_equal(dot_names(work, "dd"), 0);
    buf_done(&out);
}

/* Writes work/tok.kubeconfig: alice's kubeconfig with admin's static bearer token. */
static void write_token_kubeconfig(void)
{
    char cmd[2048], dir[400];
    (void)snprintf(dir, sizeof(dir), "%s", it_kubeconfig());
    *strrchr(dir, '/') = '\0';
    (void)snprintf(
        cmd, sizeof(cmd),
        "sed \"s/token: .*/token: $(awk -F, '$2 ~ /^admin$/ {print $1}' %s/tokens.csv)/\" "
        "%s/kubeconfig-alice >%s/tok.kubeconfig",
        dir, dir, work);
    assert_int_equal(system(cmd), 0);
}

/* port-forward against the API server: it resolves the sandbox, listens, prints the
 * kubectl line, and reports the API server's refusal of the upgrade (no such pod). */
static void test_port_forward_api(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(it_cli_runf(&out, "port-forward notready 8080 -n %s", ns), 1);
    assert_non_null(strstr(buf_str(&out), "is not Ready"));
    assert_int_equal(it_cli_runf(&out, "port-forward missing 8080 -n %s", ns), 1);
    assert_int_equal(it_cli_runf(&out, "port-forward ready 0 -n %s", ns), 2);
    assert_int_equal(
        it_cli_runf(&out,
                    "port-forward ready :8080 -n %s >%s/pf.out 2>&1 & pf=$!; i=0; "
                    "while ! grep -q Forwarding %s/pf.out && [ $i -lt 100 ]; do sleep 0.1; "
                    "i=$((i+1)); done; "
                    "p=$(sed -n 's/^Forwarding from 127.0.0.1:\\([0-9]*\\) -> 8080$/\\1/p' "
                    "%s/pf.out); curl -s -m 20 http://127.0.0.1:$p/ >/dev/null; "
                    "kill $pf; wait $pf; echo rc=$?; cat %s/pf.out",
                    ns, work, work, work, work),
        0);
    const char *o = buf_str(&out);
    assert_non_null(strstr(o, "rc=0\nForwarding from 127.0.0.1:"));
    assert_non_null(strstr(o, "Handling connection for 8080"));
    assert_non_null(strstr(o, "refused: HTTP 404"));
    assert_non_null(strstr(o, "pods \"ready\" not found"));
    /* The same with a bearer token in the kubeconfig (it goes into each connection's
     * upgrade request; freed twice there before). */
    write_token_kubeconfig();
    assert_int_equal(
        it_cli_runf(&out,
                    "--kubeconfig %s/tok.kubeconfig port-forward ready :8080 -n %s >%s/pf.out 2>&1 "
                    "& pf=$!; i=0; "
                    "while ! grep -q Forwarding %s/pf.out && [ $i -lt 100 ]; do sleep 0.1; "
                    "i=$((i+1)); done; "
                    "p=$(sed -n 's/^Forwarding from 127.0.0.1:\\([0-9]*\\) -> 8080$/\\1/p' "
                    "%s/pf.out); curl -s -m 20 http://127.0.0.1:$p/ >/dev/null; "
                    "curl -s -m 20 http://127.0.0.1:$p/ >/dev/null; "
                    "kill $pf; wait $pf; echo rc=$?; cat %s/pf.out",
                    work, ns, work, work, work, work),
        0);
    o = buf_str(&out);
    assert_non_null(strstr(o, "rc=0\nForwarding from 127.0.0.1:"));
    assert_non_null(strstr(o, "pods \"ready\" not found"));
    assert_null(strstr(o, "AddressSanitizer"));
    buf_done(&out);
}

/* shell NAME attaches (a PTY: stdout and stderr merged) and passes the exit code through;
 * it deletes nothing and refuses bad arguments. */
static void test_shell_attach(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(run_direct(&out, "shell x -- sh -c 'tty; echo in-$((6*7)) >&2; exit 7' "
                                      "</dev/null"),
                     7);
    assert_non_null(strstr(buf_str(&out), "/dev/pts/"));
    assert_non_null(strstr(buf_str(&out), "in-42"));
    assert_null(strstr(buf_str(&out), "deleted"));
    assert_int_equal(run_direct(&out, "shell"), 2);
    assert_int_equal(run_direct(&out, "shell x --pool p"), 2);
    assert_int_equal(run_direct(&out, "shell --pool p --template t"), 2);
    buf_done(&out);
}

static void test_unreachable(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(it_cli_run("--sandboxd-url http://127.0.0.1:1 exec x -- true", &out), 5);
    assert_non_null(strstr(buf_str(&out), "cannot reach sandboxd at http://127.0.0.1:1"));
    buf_done(&out);
}

/* The kubeconfig's bearer token goes to an http router URL only on a loopback host,
 * unless a router token is given or AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN=true:
 * 0.0.0.0 reaches this machine's sandboxd (as the "router") but is not a loopback name,
 * so it stands for a remote host here. */
#define ROUTER_EXEC                                                                       \
    "--kubeconfig %s/tok.kubeconfig exec ready --router-url http://%s:%s/ -n %s -- echo " \
    "via-router"
static void test_router_plaintext_token(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    write_token_kubeconfig();
    const char *port = strrchr(url, ':') + 1;
    assert_int_equal(it_cli_runf(&out, ROUTER_EXEC, work, "0.0.0.0", port, ns), 2);
    assert_non_null(strstr(buf_str(&out), "refusing to send the kubeconfig's credentials in "
                                          "clear text to http://0.0.0.0:"));
    assert_null(strstr(buf_str(&out), "via-router"));
    assert_int_equal(it_cli_runf(&out, ROUTER_EXEC, work, "localhost", port, ns), 0);
    assert_string_equal(buf_str(&out), "via-router\n");
    assert_int_equal(setenv("AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN", "true", 1), 0);
    assert_int_equal(it_cli_runf(&out, ROUTER_EXEC, work, "0.0.0.0", port, ns), 0);
    assert_int_equal(unsetenv("AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN"), 0);
    assert_int_equal(setenv("AGENT_SANDBOX_ROUTER_TOKEN", "router-only", 1), 0);
    assert_int_equal(it_cli_runf(&out, ROUTER_EXEC, work, "0.0.0.0", port, ns), 0);
    assert_string_equal(buf_str(&out), "via-router\n");
    assert_int_equal(unsetenv("AGENT_SANDBOX_ROUTER_TOKEN"), 0);
    buf_done(&out);
}

static void test_cluster_modes(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    /* not Ready: refused before any connection, with a hint */
    assert_int_equal(it_cli_runf(&out, "exec notready -n %s -- true", ns), 1);
    assert_non_null(strstr(buf_str(&out), "is not Ready"));
    assert_int_equal(it_cli_runf(&out, "exec missing -n %s -- true", ns), 1);
    assert_non_null(strstr(buf_str(&out), "sandbox \"missing\""));
    /* pod proxy: the request reaches the API server, which has no such pod */
    assert_int_equal(it_cli_runf(&out, "exec ready -n %s -- true", ns), 5);
    assert_non_null(strstr(buf_str(&out), "pods \"ready\" not found"));
    assert_int_equal(it_cli_runf(&out, "cp ready:x %s/x -n %s", work, ns), 5);
    assert_non_null(strstr(buf_str(&out), "not found"));
    /* router mode: the "router" here is sandboxd itself, which ignores the headers */
    assert_int_equal(
        it_cli_runf(&out, "exec ready --router-url %s/ -n %s -- echo via-router", url, ns), 0);
    assert_string_equal(buf_str(&out), "via-router\n");
    buf_done(&out);
}

/* exec --background, ps, logs --process [-f], kill [--signal] [--rm] */
static void test_background(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(run_direct(&out, "exec x --background -- sh -c "
                                      "'echo bg-out; echo bg-err >&2; exec sleep 30'"),
                     0);
    char *end = NULL;
    long id = strtol(buf_str(&out), &end, 10);
    assert_true(id > 0 && end && *end == '\n');
    assert_int_equal(run_direct(&out, "exec x -d -- sh -c 'exit 7'"), 0);
    long id2 = strtol(buf_str(&out), NULL, 10);
    /* the first one outlived the CLI that started it */
    assert_true(id2 > id);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(run_direct(&out, "ps x"), 0);
        if (strstr(buf_str(&out), "exited 7"))
            break;
        usleep(20000);
    }
    assert_non_null(strstr(buf_str(&out), "STATE"));
    assert_non_null(strstr(buf_str(&out), "running"));
    assert_non_null(strstr(buf_str(&out), "exited 7"));
    assert_non_null(strstr(buf_str(&out), "sh -c echo bg-out"));
    /* logs --process: stdout and stderr on their own streams, without -f it returns */
    for (int i = 0; i < 100; i++) {
        assert_int_equal(run_direct(&out, "logs x --process %ld 2>/dev/null", id), 0);
        if (strstr(buf_str(&out), "bg-out"))
            break;
        usleep(20000);
    }
    assert_string_equal(buf_str(&out), "bg-out\n");
    assert_int_equal(run_direct(&out, "logs x --process %ld 2>&1 >/dev/null", id), 0);
    assert_string_equal(buf_str(&out), "bg-err\n");
    /* kill --signal TERM; logs -f then replays and ends at the exit */
    assert_int_equal(run_direct(&out, "kill x %ld --signal TERM", id), 0);
    assert_int_equal(run_direct(&out, "logs x --process %ld -f 2>/dev/null", id), 0);
    assert_string_equal(buf_str(&out), "bg-out\n");
    assert_int_equal(run_direct(&out, "ps x -o json"), 0);
    assert_non_null(strstr(buf_str(&out), "\"signal\": 15"));
    /* kill --rm forgets an exited one; unknown ids are errors */
    assert_int_equal(run_direct(&out, "kill x %ld --rm", id), 0);
    assert_int_equal(run_direct(&out, "kill x %ld --rm", id2), 0);
    assert_int_equal(run_direct(&out, "ps x -o json"), 0);
    assert_null(strstr(buf_str(&out), "\"background\": true"));
    assert_int_equal(run_direct(&out, "kill x %ld", id), 1);
    assert_int_equal(run_direct(&out, "logs x --process %ld", id), 1);
    assert_int_equal(run_direct(&out, "logs x --process nope"), 2);
    assert_int_equal(run_direct(&out, "exec x -d -t -- true"), 2);
    buf_done(&out);
}

/* A local write that fails (stdout on /dev/full) is an error, a reader that went away
 * (| head) is not. */
static void test_write_errors(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(run_direct(&out, "version --client >/dev/full"), 1);
    assert_non_null(strstr(buf_str(&out), "cannot write the output"));
    assert_int_equal(run_direct(&out, "completion bash >/dev/full"), 1);
    assert_int_equal(run_direct(&out, "exec x -- echo hi >/dev/full"), 1);
    assert_non_null(strstr(buf_str(&out), "cannot write"));
    assert_int_equal(run_direct(&out, "exec x -- sh -c 'echo hi >&2' 2>/dev/full"), 1);
    assert_int_equal(run_direct(&out, "exec x -d -- sh -c 'echo bg-out; exec sleep 30'"), 0);
    long id = strtol(buf_str(&out), NULL, 10);
    assert_true(id > 0);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(run_direct(&out, "logs x --process %ld 2>/dev/null", id), 0);
        if (strstr(buf_str(&out), "bg-out"))
            break;
        usleep(20000);
    }
    assert_int_equal(run_direct(&out, "logs x --process %ld >/dev/full", id), 1);
    assert_non_null(strstr(buf_str(&out), "cannot write the output"));
    assert_int_equal(run_direct(&out, "kill x %ld --rm", id), 0);
    buf_done(&out);
}

static void test_fs_commands(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1 << 20);
    /* mkdir: no parent without -p (404: exit 5), then with -p and a mode */
    assert_int_equal(run_direct(&out, "mkdir x fs/a/b"), 5);
    assert_non_null(strstr(buf_str(&out), "NOT_FOUND"));
    assert_int_equal(run_direct(&out, "mkdir x -p fs/a/b --mode 0700"), 0);
    assert_int_equal(run_direct(&out, "stat x fs/a/b"), 0);
    assert_non_null(strstr(buf_str(&out), "/fs/a/b  directory  "));
    assert_non_null(strstr(buf_str(&out), "  0700  "));
    assert_int_equal(run_direct(&out, "stat x fs/none"), 5);
    /* watch in the background while a file is written and moved */
    assert_int_equal(run_direct(&out,
                                "watch x fs -r > %s/w.out 2>&1 & p=$!; sleep 0.5; "
                                "echo hi > %s/fs/a/f; '%s/kubectl-sandbox' --sandboxd-url %s "
                                "mv x fs/a/f fs/g; sleep 0.5; kill $p; cat %s/w.out",
                                work, root, getenv("AS_BIN_DIR"), url, work),
                     0);
    assert_non_null(strstr(buf_str(&out), "create    a/f\nmodify    a/f\nmove      a/f -> g\n"));
    /* mv: no replacing without -f; the result in the root */
    assert_int_equal(run_direct(&out, "mkdir x fs/d && echo x > %s/fs/h && : ", root), 0);
    assert_int_equal(run_direct(&out, "mv x fs/g fs/h"), 5);
    assert_non_null(strstr(buf_str(&out), "CONFLICT"));
    assert_int_equal(run_direct(&out, "mv x -f fs/g fs/h && cat %s/fs/h", root), 0);
    assert_string_equal(buf_str(&out), "hi\n");
    assert_int_equal(run_direct(&out, "mv x fs/a"), 2);
    assert_int_equal(run_direct(&out, "watch x fs/none"), 5);
    buf_done(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exec_output_and_codes),
        cmocka_unit_test(test_exec_stdin),
        cmocka_unit_test(test_verbose_masks_token),
        cmocka_unit_test(test_cp_round_trip),
        cmocka_unit_test(test_cp_entry_bound),
        cmocka_unit_test(test_cp_listing_pages),
        cmocka_unit_test(test_cp_listing_must_advance),
        cmocka_unit_test(test_cp_link_modes),
        cmocka_unit_test(test_cp_keeps_existing_modes),
        cmocka_unit_test(test_cp_dangling_dest),
        cmocka_unit_test(test_unreachable),
        cmocka_unit_test(test_cluster_modes),
        cmocka_unit_test(test_router_plaintext_token),
        cmocka_unit_test(test_shell_attach),
        cmocka_unit_test(test_port_forward_api),
        cmocka_unit_test(test_background),
        cmocka_unit_test(test_fs_commands),
        cmocka_unit_test(test_write_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
