/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection against the real controller binary (a subprocess, restarted like a
 * kubelet would) on the API server of hack/apiserver.sh, with a simulated kubelet that
 * marks Pods Running and Ready. Faults: controller SIGKILLs during pool fill, a claim
 * burst, refill and scale-down; etcd compaction (410) under load; kube-apiserver and
 * etcd restarts mid-burst; the router serving through an API server restart; pod
 * failure, eviction and PVC loss; malformed and malicious objects; a pool asking for
 * 2e9 replicas; claims released (Background, Orphan, Foreground) through kills of a
 * controller that deletes their dependents at once; leader hand-over between two
 * replicas. Each scenario ends with the same
 * audit: every claim Ready (or Failed with a terminal reason), the pool at exactly its
 * replicas, no Sandbox bound twice or owned by two controllers, no orphaned Sandbox,
 * Pod or PVC, no claim lost, no controller crash. Figures go to stdout ("# chaos ...")
 * and, as JSON lines, to $AS_CHAOS_REPORT when set (tests/chaos/report.py renders them).
 *
 * Env: AS_CHAOS_CLAIMS (claims per burst, default 40), AS_CHAOS_KILLS (controller
 * SIGKILLs per scenario, default 3), AS_CHAOS_APISERVER=1 also restarts kube-apiserver
 * and etcd: only on a private API server (AS_APISERVER_DIR other than the default
 * .cache/apiserver; tests/chaos/run.sh sets one up). AS_CHAOS_LOG_DIR keeps the
 * controller, router and sandboxd logs (default: a new /tmp/as-chaos-* dir).
 * AS_CHAOS_LEASE_SECONDS (default 15, the controller's own; at least 3): the controllers'
 * Lease duration, which is how long a SIGKILLed leader holds up its successor; renew
 * deadline and retry period are the controller's defaults (10 s, 2 s) at 15 s or more,
 * else 2 s less than the Lease and 1 s. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include "api/res.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/map.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "support/apiserver.h"
#include "support/ctrl_fixture.h"
#include "support/http_client.h"
#include "support/kube_fixture.h"

extern char **environ;

#define WAIT        (240 * USEC_PER_SEC)
#define KUBELETS    8
#define CREATORS    8
#define MAX_CTRL    2
#define API_VERSION "extensions.agents.x-k8s.io/v1beta1"
#define STANDALONE  "chaos.test/standalone" /* label: a Sandbox of no pool or claim */

static struct kube_client *c;
static char ns[96];
static int nclaims = 40, nkills = 3, pool_size, max_replicas;
static bool api_chaos;
static FILE *report;

/* ---- the simulated kubelet ---------------------------------------------------------- */

static struct it_kubelet *kubelet;

/* Pods being deleted, and those of Sandboxes the test runs itself, are left alone. */
static bool kubelet_skip(void *ctx, const json_t *pod)
{
    (void)ctx;
    return kube_obj_deleting(pod) || kube_obj_label(pod, "chaos.test/kubelet-off");
}

/* Pods become Running and Ready at 10.3.x.y; while the API server is away, again later. */
static void kubelet_start(void)
{
    struct it_kubelet_opts o = {.client = c,
                                .ns = ns,
                                .workers = KUBELETS,
                                .skip = kubelet_skip,
                                .ip_prefix = "10.3",
                                .retry = true};
    assert_int_equal(it_kubelet_start(&o, &kubelet), 0);
}

static void kubelet_stop(void)
{
    it_kubelet_free(kubelet);
    kubelet = NULL;
}

/* ---- controller processes ----------------------------------------------------------- */

static pthread_mutex_t ctrl_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t ctrl_pid[MAX_CTRL];
static char ctrl_id[MAX_CTRL][48]; /* POD_NAME of the process in each slot */
static int ctrl_starts, ctrl_kills, ctrl_crashes, ctrl_exits;
static char log_dir[512];

/* In a forked child: appends stdout and stderr to logf and runs argv with environment
 * envp (NULL: this process's). Never returns. */
static void exec_logged(char *const argv[], char *const envp[], const char *logf)
    __attribute__((noreturn));
static void exec_logged(char *const argv[], char *const envp[], const char *logf)
{
    int fd = open(logf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)dup2(fd, STDOUT_FILENO);
        (void)dup2(fd, STDERR_FILENO);
    }
    execve(argv[0], argv, envp ? envp : environ);
    _exit(127);
}

/* Starts argv (environment envp; NULL: this process's) with its output appended to
 * logf. Returns the pid. */
static pid_t spawn_logged_to(char *const argv[], char *const envp[], const char *logf)
{
    pid_t pid = fork();
    if (pid == 0)
        exec_logged(argv, envp, logf);
    assert_true(pid > 0);
    return pid;
}

static int lease_s = 15; /* AS_CHAOS_LEASE_SECONDS */
static char *ctrl_extra; /* one more controller flag for the starts of a scenario, or NULL */

static pid_t ctrl_spawn(int slot)
{
    char bin[1024], kc[1100], nsf[128], nsl[128], logf[640], maxr[64], ld[64], rd[64], rp[64];
    const char *dir = getenv("AS_BIN_DIR");
    (void)snprintf(bin, sizeof(bin), "%s/agent-sandbox-controller", dir ? dir : ".");
    (void)snprintf(kc, sizeof(kc), "--kubeconfig=%s", it_kubeconfig());
    (void)snprintf(nsf, sizeof(nsf), "--namespace=%s", ns);
    (void)snprintf(nsl, sizeof(nsl), "--leader-election-namespace=%s", ns);
    (void)snprintf(logf, sizeof(logf), "%s/controller-%d.log", log_dir, slot);
    (void)snprintf(maxr, sizeof(maxr), "--max-pool-replicas=%d", max_replicas);
    (void)snprintf(ld, sizeof(ld), "--leader-elect-lease-duration=%ds", lease_s);
    (void)snprintf(rd, sizeof(rd), "--leader-elect-renew-deadline=%ds",
                   lease_s >= 15 ? 10 : lease_s - 2);
    (void)snprintf(rp, sizeof(rp), "--leader-elect-retry-period=%ds", lease_s >= 15 ? 2 : 1);
    char *argv[] = {bin,
                    kc,
                    nsf,
                    nsl,
                    "--leader-election-id=chaos",
                    "--metrics-bind-address=0",
                    "--health-probe-bind-address=0",
                    "--log-level=info",
                    maxr,
                    ld,
                    rd,
                    rp,
                    ctrl_extra, /* NULL: the list ends before it */
                    NULL};
    /* The Lease identity is "<POD_NAME>_<uuid>": a POD_NAME of its own per start tells
     * which process holds the Lease. */
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = xcalloc(n + 2, sizeof(*envp)), pod[80];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "POD_NAME=", 9) != 0)
            envp[k++] = environ[i];
    (void)snprintf(ctrl_id[slot], sizeof(ctrl_id[slot]), "chaos-ctrl-%d-%d", slot, ctrl_starts);
    (void)snprintf(pod, sizeof(pod), "POD_NAME=%s", ctrl_id[slot]);
    envp[k] = pod;
    pid_t pid = spawn_logged_to(argv, envp, logf);
    xfree(envp);
    ctrl_starts++;
    return pid;
}

/* Reaps controllers that exited on their own and starts them again (the restart
 * policy of a Deployment). A death by a signal we did not send is a crash. */
static void supervise(void)
{
    pthread_mutex_lock(&ctrl_lock);
    for (int i = 0; i < MAX_CTRL; i++) {
        int st;
        if (ctrl_pid[i] <= 0 || waitpid(ctrl_pid[i], &st, WNOHANG) != ctrl_pid[i])
            continue;
        if (WIFSIGNALED(st)) {
            ctrl_crashes++;
            printf("# chaos: controller %d died of signal %d (see %s)\n", i, WTERMSIG(st), log_dir);
        } else {
            ctrl_exits++;
            printf("# chaos: controller %d exited with %d; restarting\n", i, WEXITSTATUS(st));
        }
        ctrl_pid[i] = ctrl_spawn(i);
    }
    pthread_mutex_unlock(&ctrl_lock);
}

/* Stops controller slot with sig and waits for it; restarts it unless stop_only.
 * Returns the wait status. */
static int ctrl_signal(int slot, int sig, bool restart)
{
    int st = 0;
    pthread_mutex_lock(&ctrl_lock);
    if (ctrl_pid[slot] > 0) {
        (void)kill(ctrl_pid[slot], sig);
        (void)waitpid(ctrl_pid[slot], &st, 0);
        ctrl_kills += sig == SIGKILL;
        if (WIFSIGNALED(st) && WTERMSIG(st) != sig) {
            ctrl_crashes++;
            printf("# chaos: controller %d died of signal %d\n", slot, WTERMSIG(st));
        }
    }
    ctrl_pid[slot] = restart ? ctrl_spawn(slot) : 0;
    pthread_mutex_unlock(&ctrl_lock);
    return st;
}

static void ctrl_start(int slot)
{
    pthread_mutex_lock(&ctrl_lock);
    ctrl_pid[slot] = ctrl_spawn(slot);
    pthread_mutex_unlock(&ctrl_lock);
}

/* ---- restarting the API server's processes ------------------------------------------ */

/* Reads component's pid file and command line from the API server's state dir. */
static int component_argv(const char *comp, pid_t *ret_pid, struct buf *cmdline)
{
    char path[1024];
    int64_t pid;
    FILE *f;
    (void)snprintf(path, sizeof(path), "%s/%s.pid", it_state_dir(), comp);
    if (!(f = fopen(path, "r")))
        return -errno;
    char line[32] = "";
    bool ok = fgets(line, sizeof(line), f) != NULL;
    (void)fclose(f);
    line[strcspn(line, "\n")] = '\0';
    if (!ok || cstr_to_i64(line, &pid) < 0 || pid <= 1)
        return -EINVAL;
    (void)snprintf(path, sizeof(path), "/proc/%lld/cmdline", (long long)pid);
    if (!(f = fopen(path, "r")))
        return -errno;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        (void)buf_append(cmdline, chunk, n);
    (void)fclose(f);
    *ret_pid = (pid_t)pid;
    return cmdline->len > 0 ? 0 : -EINVAL;
}

/* Starts argv (NUL-separated in cmdline) detached: a grandchild in its own session,
 * re-parented to init, so that it outlives this test like the original did. Writes
 * the new pid into the component's pid file. */
static void component_launch(const char *comp, struct buf *cmdline)
{
    char *argv[256], path[1024];
    size_t n = 0;
    int fds[2];
    pid_t pid = 0, mid;
    for (size_t off = 0; off < cmdline->len && n + 1 < 256; off += strlen(cmdline->data + off) + 1)
        argv[n++] = cmdline->data + off;
    argv[n] = NULL;
    (void)snprintf(path, sizeof(path), "%s/%s.log", it_state_dir(), comp);
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    mid = fork();
    if (mid == 0) {
        (void)setsid();
        pid_t g = fork();
        if (g == 0)
            exec_logged(argv, NULL, path);
        _exit(write(fds[1], &g, sizeof(g)) == sizeof(g) ? 0 : 1);
    }
    assert_true(mid > 0);
    (void)close(fds[1]);
    assert_int_equal(read(fds[0], &pid, sizeof(pid)), sizeof(pid));
    (void)close(fds[0]);
    (void)waitpid(mid, NULL, 0);
    assert_true(pid > 0);
    (void)snprintf(path, sizeof(path), "%s/%s.pid", it_state_dir(), comp);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%d\n", (int)pid);
    (void)fclose(f);
}

static bool api_ready(void *ctx)
{
    struct buf b;
    (void)ctx;
    buf_init(&b, 4096);
    int st = it_http_get("/readyz", &b);
    buf_done(&b);
    return st == 200;
}

/* SIGKILLs comp (etcd or kube-apiserver), keeps it down for down, starts it again with
 * the same command line and waits until the API server is ready. */
static void component_restart(const char *comp, usec_t down)
{
    struct buf cmd;
    pid_t pid = 0;
    buf_init(&cmd, 64 * 1024);
    assert_int_equal(component_argv(comp, &pid, &cmd), 0);
    assert_int_equal(kill(pid, SIGKILL), 0);
    for (int i = 0; i < 200 && kill(pid, 0) == 0; i++)
        clock_sleep(50 * USEC_PER_MSEC);
    clock_sleep(down);
    component_launch(comp, &cmd);
    assert_int_equal(it_wait(api_ready, NULL, 120 * USEC_PER_SEC), 0);
    buf_done(&cmd);
}

/* ---- objects ------------------------------------------------------------------------ */

static void create(const struct kube_res *res, json_t *obj)
{
    struct kube_err e;
    IT_OK(kube_create(c, res, ns, obj, NULL, &e), &e);
    json_decref(obj);
}

static void scale(int n)
{
    struct kube_err e;
    json_t *p = json_pack("{s:{s:i}}", "spec", "replicas", n);
    IT_OK(kube_patch(c, &API_RES_SANDBOXWARMPOOLS, ns, "pool", KUBE_PATCH_MERGE, p, NULL, &e), &e);
    json_decref(p);
    pool_size = n;
}

static atomic_int claims_created;

/* Creates claim name, retrying through API outages; AlreadyExists after a lost reply
 * counts as created. */
static void create_claim(const char *name)
{
    json_t *cl = it_claim_new(name, "pool");
    usec_t deadline = clock_now() + WAIT;
    for (;;) {
        struct kube_err e;
        int r = kube_create(c, &API_RES_SANDBOXCLAIMS, ns, cl, NULL, &e);
        if (r >= 0 || kube_err_is_already_exists(&e)) {
            atomic_fetch_add(&claims_created, 1);
            break;
        }
        if (clock_now() > deadline)
            break;
        clock_sleep(200 * USEC_PER_MSEC);
    }
    json_decref(cl);
}

struct creator {
    const char *prefix;
    int from, to;
    usec_t gap; /* pause between creates (0: as fast as possible) */
};

static void *creator_main(void *arg)
{
    struct creator *cr = arg;
    char name[64];
    for (int i = cr->from; i < cr->to; i++) {
        (void)snprintf(name, sizeof(name), "%s-%04d", cr->prefix, i);
        create_claim(name);
        if (cr->gap)
            clock_sleep(cr->gap);
    }
    return NULL;
}

/* Creates n claims prefix-0000.. from CREATORS threads; returns when all are created. */
static void burst(const char *prefix, int n)
{
    pthread_t th[CREATORS];
    struct creator cr[CREATORS];
    int per = (n + CREATORS - 1) / CREATORS;
    for (int i = 0; i < CREATORS; i++) {
        int from = i * per, to = (i + 1) * per > n ? n : (i + 1) * per;
        cr[i] = (struct creator){prefix, from < to ? from : to, to, 0};
        assert_int_equal(pthread_create(&th[i], NULL, creator_main, &cr[i]), 0);
    }
    for (int i = 0; i < CREATORS; i++)
        pthread_join(th[i], NULL);
}

/* ---- the audit ---------------------------------------------------------------------- */

struct audit {
    size_t claims, ready, failed, pending; /* claims by state */
    size_t sandboxes, members, bound;      /* live Sandboxes, pool members, claim-owned */
    size_t double_bound, multi_owner;      /* a Sandbox bound twice / two controllers */
    size_t orphan_sb, orphan_pod, orphan_pvc;
    size_t pool_ready; /* the pool's status.readyReplicas */
};

static bool terminal_reason(const char *r)
{
    static const char *const terminal[] = {"ClaimTimeout",
                                           "ClaimExpired",
                                           "WarmPoolNotFound",
                                           "TemplateNotFound",
                                           "InvalidMetadata",
                                           "EnvVarsInjectionRejected",
                                           "VolumeClaimTemplatesError"};
    for (size_t i = 0; r && i < sizeof(terminal) / sizeof(terminal[0]); i++)
        if (strcmp(r, terminal[i]) == 0)
            return true;
    return false;
}

static json_t *list(const struct kube_res *res)
{
    json_t *l = NULL;
    if (kube_list_all(c, res, ns, NULL, &l, NULL) < 0)
        return NULL;
    return l;
}

/* Deletes the objects of res whose controller has UID uid. */
static void delete_controlled(const struct kube_res *res, const char *uid)
{
    json_t *l = list(res);
    const json_t *o;
    size_t i;
    json_array_foreach(json_object_get(l, "items"), i, o)
    {
        const char *owner = kube_obj_controller_uid(o);
        if (owner && strcmp(owner, uid) == 0)
            (void)kube_delete(c, res, ns, kube_obj_name(o), NULL);
    }
    json_decref(l);
}

/* Deletes Sandbox name, waits until it is gone, then deletes its Pods and PVCs itself.
 * That is the garbage collector's work, but for a Sandbox that lived a second or two the
 * collector was seen to take 37 s (kube-controller-manager 1.34), and the orphan audit
 * of the next scenario waited for it. */
static void delete_sandbox_tree(const char *name)
{
    struct kube_err e;
    json_t *sb = NULL;
    IT_OK(kube_get(c, &API_RES_SANDBOXES, ns, name, &sb, &e), &e);
    char *uid = xstrdup(kube_obj_uid(sb));
    json_decref(sb);
    IT_OK(kube_delete(c, &API_RES_SANDBOXES, ns, name, &e), &e);
    assert_int_equal(it_wait_gone_uid(c, &API_RES_SANDBOXES, ns, name, uid, WAIT), 0);
    delete_controlled(&KUBE_RES_PODS, uid);
    delete_controlled(&KUBE_RES_PVCS, uid);
    xfree(uid);
}

static size_t controllers_of(const json_t *o)
{
    size_t i, n = 0;
    const json_t *ref;
    json_array_foreach(kube_obj_path(o, "metadata.ownerReferences"), i, ref) n +=
        json_is_true(json_object_get(ref, "controller"));
    return n;
}

/* Sandboxes: pool members, claim-owned (by a live claim) or orphans. uids: claim uids. */
static void audit_sandboxes(struct audit *a, const json_t *sbs, struct map *claim_uids,
                            struct map *sb_uids)
{
    size_t i;
    const json_t *sb;
    json_array_foreach(json_object_get(sbs, "items"), i, sb)
    {
        const json_t *ref = kube_obj_controller_ref(sb);
        const char *kind = json_string_value(json_object_get(ref, "kind"));
        map_put(sb_uids, kube_obj_uid(sb), (void *)1, NULL);
        if (kube_obj_deleting(sb) || kube_obj_label(sb, STANDALONE))
            continue;
        a->sandboxes++;
        a->multi_owner += controllers_of(sb) > 1;
        if (kind && strcmp(kind, "SandboxWarmPool") == 0)
            a->members++;
        else if (kind && strcmp(kind, "SandboxClaim") == 0 &&
                 map_get(claim_uids, kube_obj_controller_uid(sb)))
            a->bound++;
        else
            a->orphan_sb++;
    }
}

static void audit_claims(struct audit *a, const json_t *cls, const json_t *sbs,
                         struct map *claim_uids)
{
    struct map *seen = map_new(NULL), *by_name = map_new(NULL);
    size_t i;
    const json_t *cl, *sb;
    json_array_foreach(json_object_get(sbs, "items"), i, sb)
        map_put(by_name, kube_obj_name(sb), (void *)sb, NULL);
    json_array_foreach(json_object_get(cls, "items"), i, cl)
    {
        const json_t *cd = kube_obj_condition(cl, "Ready");
        const char *st = json_string_value(json_object_get(cd, "status"));
        const char *reason = json_string_value(json_object_get(cd, "reason"));
        const char *sbn = kube_obj_path_str(cl, "status.sandbox.name");
        map_put(claim_uids, kube_obj_uid(cl), (void *)1, NULL);
        a->claims++;
        if (st && strcmp(st, "True") == 0 && sbn) {
            const json_t *s = map_get(by_name, sbn);
            a->ready++;
            if (!s || !kube_obj_controller_uid(s) ||
                strcmp(kube_obj_controller_uid(s), kube_obj_uid(cl)) != 0 || map_get(seen, sbn))
                a->double_bound++;
            map_put(seen, sbn, (void *)1, NULL);
        } else if (st && strcmp(st, "False") == 0 && terminal_reason(reason)) {
            a->failed++;
        } else {
            a->pending++;
        }
    }
    map_free(seen);
    map_free(by_name);
}

/* Pods and PVCs must belong to a Sandbox that exists. */
static size_t audit_orphans(const struct kube_res *res, struct map *sb_uids)
{
    json_t *l = list(res);
    size_t i, n = 0;
    const json_t *o, *ref;
    json_array_foreach(json_object_get(l, "items"), i, o)
    {
        bool owned = false;
        size_t j;
        if (kube_obj_deleting(o))
            continue;
        json_array_foreach(kube_obj_path(o, "metadata.ownerReferences"), j, ref) owned |=
            map_get(sb_uids, json_string_value(json_object_get(ref, "uid"))) != NULL;
        n += !owned;
    }
    json_decref(l);
    return n;
}

static int audit_run(struct audit *a)
{
    json_t *cls = list(&API_RES_SANDBOXCLAIMS), *sbs = list(&API_RES_SANDBOXES), *pool = NULL;
    struct map *claim_uids = map_new(NULL), *sb_uids = map_new(NULL);
    int r = cls && sbs ? 0 : -EIO;
    *a = (struct audit){0};
    if (r == 0) {
        audit_claims(a, cls, sbs, claim_uids);
        audit_sandboxes(a, sbs, claim_uids, sb_uids);
        a->orphan_pod = audit_orphans(&KUBE_RES_PODS, sb_uids);
        a->orphan_pvc = audit_orphans(&KUBE_RES_PVCS, sb_uids);
        if (kube_get(c, &API_RES_SANDBOXWARMPOOLS, ns, "pool", &pool, NULL) == 0)
            a->pool_ready = (size_t)json_integer_value(kube_obj_path(pool, "status.readyReplicas"));
    }
    json_decref(pool);
    json_decref(cls);
    json_decref(sbs);
    map_free(claim_uids);
    map_free(sb_uids);
    return r;
}

static bool converged(void *ctx)
{
    struct audit *a = ctx;
    supervise();
    return audit_run(a) == 0 && a->pending == 0 && a->members == (size_t)pool_size &&
           a->pool_ready == (size_t)pool_size && a->orphan_sb == 0 && a->orphan_pod == 0 &&
           a->orphan_pvc == 0 && a->claims == (size_t)atomic_load(&claims_created);
}

/* Waits for convergence, prints and records the figures, and asserts the invariants. */
static void audit_check(const char *scenario, usec_t started)
{
    struct audit a;
    int r = it_wait(converged, &a, WAIT);
    usec_t took = clock_now() - started;
    size_t lost = (size_t)atomic_load(&claims_created) - a.claims;
    size_t over = a.sandboxes - a.members - a.bound;
    printf("# chaos %s: %.1f s, claims %zu (ready %zu, failed %zu, pending %zu, lost %zu), "
           "pool %zu/%d (ready %zu), over-created %zu, double-bound %zu, multi-owner %zu, "
           "orphans sb/pod/pvc %zu/%zu/%zu, controller starts %d kills %d exits %d crashes %d\n",
           scenario, (double)took / USEC_PER_SEC, a.claims, a.ready, a.failed, a.pending, lost,
           a.members, pool_size, a.pool_ready, over, a.double_bound, a.multi_owner, a.orphan_sb,
           a.orphan_pod, a.orphan_pvc, ctrl_starts, ctrl_kills, ctrl_exits, ctrl_crashes);
    if (report) {
        fprintf(report,
                "{\"scenario\":\"%s\",\"seconds\":%.1f,\"claims\":%zu,\"ready\":%zu,"
                "\"failed\":%zu,\"pending\":%zu,\"lost\":%zu,\"pool\":%zu,\"replicas\":%d,"
                "\"over_created\":%zu,\"double_bound\":%zu,\"orphans\":%zu,"
                "\"controller_kills\":%d,\"controller_exits\":%d,\"crashes\":%d}\n",
                scenario, (double)took / USEC_PER_SEC, a.claims, a.ready, a.failed, a.pending, lost,
                a.members, pool_size, over, a.double_bound,
                a.orphan_sb + a.orphan_pod + a.orphan_pvc, ctrl_kills, ctrl_exits, ctrl_crashes);
        (void)fflush(report);
    }
    assert_int_equal(r, 0);
    assert_int_equal(lost, 0);
    assert_int_equal(over, 0);
    assert_int_equal(a.double_bound, 0);
    assert_int_equal(a.multi_owner, 0);
    assert_int_equal(ctrl_crashes, 0);
}

/* ---- fault threads ------------------------------------------------------------------ */

struct killer {
    pthread_t th;
    int kills;        /* SIGKILLs to send, spaced by gap */
    usec_t gap;       /* time between kills */
    atomic_bool stop; /* set to end early */
};

static void *killer_main(void *arg)
{
    struct killer *k = arg;
    for (int i = 0; i < k->kills && !atomic_load(&k->stop); i++) {
        /* Spread the kills: gap plus up to half of it, so they hit different phases. */
        usec_t d =
            k->gap + (usec_t)(rand() % (int)(k->gap / USEC_PER_MSEC / 2 + 1)) * USEC_PER_MSEC;
        for (usec_t t = 0; t < d && !atomic_load(&k->stop); t += 50 * USEC_PER_MSEC)
            clock_sleep(50 * USEC_PER_MSEC);
        if (!atomic_load(&k->stop))
            (void)ctrl_signal(0, SIGKILL, true);
    }
    return NULL;
}

static void killer_start(struct killer *k, int kills, usec_t gap)
{
    k->kills = kills;
    k->gap = gap;
    atomic_store(&k->stop, false);
    assert_int_equal(pthread_create(&k->th, NULL, killer_main, k), 0);
}

static void killer_join(struct killer *k)
{
    pthread_join(k->th, NULL);
}

struct compactor {
    pthread_t th;
    atomic_bool stop;
    int done;
};

/* Compacts etcd to its current revision every 300 ms: watches that resume from an old
 * resourceVersion get 410 Gone and must relist. */
static void *compactor_main(void *arg)
{
    struct compactor *k = arg;
    while (!atomic_load(&k->stop)) {
        int64_t rev;
        if (it_etcd_revision(&rev) == 0 && it_etcd_compact(rev) == 0)
            k->done++;
        clock_sleep(300 * USEC_PER_MSEC);
    }
    return NULL;
}

/* ---- scenarios ---------------------------------------------------------------------- */

static bool pool_full(void *ctx)
{
    struct audit a;
    (void)ctx;
    supervise();
    return audit_run(&a) == 0 && a.members == (size_t)pool_size &&
           a.pool_ready == (size_t)pool_size;
}

static void test_pool_fills_through_kills(void **state)
{
    struct killer k;
    usec_t t0 = clock_now();
    (void)state;
    kubelet_start();
    ctrl_start(0);
    create(&API_RES_SANDBOXTEMPLATES,
           json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion", API_VERSION,
                     "kind", "SandboxTemplate", "metadata", "name", "tpl", "spec", "podTemplate",
                     "spec", "containers", "name", "runtime", "image", "registry.local/rt:1"));
    pool_size = nclaims / 2;
    create(&API_RES_SANDBOXWARMPOOLS, it_pool_new("pool", "tpl", pool_size));
    killer_start(&k, nkills, 700 * USEC_PER_MSEC);
    killer_join(&k);
    assert_int_equal(it_wait(pool_full, NULL, WAIT), 0);
    audit_check("pool-fill-with-controller-kills", t0);
}

static void test_burst_with_kills(void **state)
{
    struct killer k;
    usec_t t0 = clock_now();
    (void)state;
    killer_start(&k, nkills, 1500 * USEC_PER_MSEC);
    burst("kill", nclaims);
    killer_join(&k);
    audit_check("claim-burst-with-controller-kills", t0);
}

static void test_refill_with_kills(void **state)
{
    struct killer k;
    usec_t t0 = clock_now();
    (void)state;
    scale(pool_size + nclaims / 2);
    killer_start(&k, nkills, 700 * USEC_PER_MSEC);
    killer_join(&k);
    audit_check("pool-scale-up-with-controller-kills", t0);
    t0 = clock_now();
    scale(pool_size - nclaims / 4);
    killer_start(&k, nkills, 500 * USEC_PER_MSEC);
    killer_join(&k);
    audit_check("pool-scale-down-with-controller-kills", t0);
}

/* Static: the compactor keeps running through the audit's wait (load plus relists), and
 * a failed assertion there must not leave it pointing into a dead stack frame. */
static struct compactor compactor;

static void test_burst_with_compaction(void **state)
{
    usec_t t0 = clock_now();
    (void)state;
    atomic_store(&compactor.stop, false);
    assert_int_equal(pthread_create(&compactor.th, NULL, compactor_main, &compactor), 0);
    burst("compact", nclaims);
    (void)ctrl_signal(0, SIGKILL, true); /* a relist while compaction goes on */
    audit_check("claim-burst-with-etcd-compaction", t0);
    atomic_store(&compactor.stop, true);
    pthread_join(compactor.th, NULL);
    printf("# chaos: %d etcd compactions during the burst and the recovery\n", compactor.done);
    assert_true(compactor.done > 0);
}

struct outage {
    pthread_t th;
    const char *comp;
    usec_t after, down;
};

static void *outage_main(void *arg)
{
    struct outage *o = arg;
    clock_sleep(o->after);
    component_restart(o->comp, o->down);
    return NULL;
}

static void burst_through_outage(const char *comp, const char *scenario)
{
    struct outage o = {.comp = comp, .after = 300 * USEC_PER_MSEC, .down = 3 * USEC_PER_SEC};
    usec_t t0 = clock_now();
    char prefix[32];
    if (!api_chaos) {
        printf("# chaos %s: skipped (set AS_CHAOS_APISERVER=1 on a private API server)\n",
               scenario);
        skip();
    }
    (void)snprintf(prefix, sizeof(prefix), "%.8s", comp);
    assert_int_equal(pthread_create(&o.th, NULL, outage_main, &o), 0);
    burst(prefix, nclaims);
    pthread_join(o.th, NULL);
    audit_check(scenario, t0);
}

static void test_apiserver_restart(void **state)
{
    (void)state;
    burst_through_outage("kube-apiserver", "claim-burst-with-apiserver-restart");
}

static void test_etcd_restart(void **state)
{
    (void)state;
    burst_through_outage("etcd", "claim-burst-with-etcd-restart");
}

/* ---- leader hand-over --------------------------------------------------------------- */

/* The slot whose process holds the Lease (identity "<host>_<pid>"), or -1. */
static int leader_slot(void)
{
    json_t *l = NULL;
    int slot = -1;
    if (kube_get(c, &KUBE_RES_LEASES, ns, "chaos", &l, NULL) < 0)
        return -1;
    const char *id = kube_obj_path_str(l, "spec.holderIdentity");
    const char *us = id ? strrchr(id, '_') : NULL;
    if (us) {
        pthread_mutex_lock(&ctrl_lock);
        for (int i = 0; i < MAX_CTRL; i++)
            if (ctrl_pid[i] > 0 && strlen(ctrl_id[i]) == (size_t)(us - id) &&
                strncmp(id, ctrl_id[i], (size_t)(us - id)) == 0)
                slot = i;
        pthread_mutex_unlock(&ctrl_lock);
    }
    json_decref(l);
    return slot;
}

static bool have_leader(void *ctx)
{
    int *slot = ctx;
    supervise();
    return (*slot = leader_slot()) >= 0;
}

/* Longest create -> first Ready time (seconds) of the claims named prefix-*: the
 * controller's claim-first-ready-at annotation against the API's creationTimestamp.
 * (Not the claim's Ready lastTransitionTime, although a warm claim's Ready now carries
 * its own time rather than the pool Sandbox's: that time moves again whenever Ready
 * flips while controllers are killed and stopped, and it has whole seconds only.) */
/* it_wait: every claim named prefix-* carries the first-ready annotation (it is written
 * after Ready, held while other claims are served: --side-write-hold). */
static bool all_first_ready(void *ctx)
{
    const char *prefix = ctx;
    json_t *l = list(&API_RES_SANDBOXCLAIMS);
    const json_t *cl;
    size_t i;
    bool all = l != NULL;
    json_array_foreach(json_object_get(l, "items"), i, cl)
    {
        const char *n = kube_obj_name(cl);
        if (n && strncmp(n, prefix, strlen(prefix)) == 0 &&
            !kube_obj_annotation(cl, "agents.x-k8s.io/claim-first-ready-at"))
            all = false;
    }
    json_decref(l);
    return all;
}

static int64_t worst_latency_s(const char *prefix)
{
    json_t *l;
    assert_int_equal(it_wait(all_first_ready, (void *)prefix, WAIT), 0);
    l = list(&API_RES_SANDBOXCLAIMS);
    const json_t *cl;
    size_t i, plen = strlen(prefix);
    int64_t worst = 0;
    json_array_foreach(json_object_get(l, "items"), i, cl)
    {
        const char *n = kube_obj_name(cl);
        const char *created = kube_obj_path_str(cl, "metadata.creationTimestamp");
        const char *ready = kube_obj_annotation(cl, "agents.x-k8s.io/claim-first-ready-at");
        usec_t tc, tr;
        if (!n || strncmp(n, prefix, plen) != 0)
            continue;
        assert_non_null(ready); /* every claim of the run became Ready */
        assert_int_equal(clock_parse_rfc3339(created, &tc), 0);
        assert_int_equal(clock_parse_rfc3339(ready, &tr), 0);
        if (tr > tc && (int64_t)((tr - tc + USEC_PER_SEC / 2) / USEC_PER_SEC) > worst)
            worst = (int64_t)((tr - tc + USEC_PER_SEC / 2) / USEC_PER_SEC);
    }
    json_decref(l);
    return worst;
}

/* Claims trickle in (one per 200 ms) while the leader is stopped with sig; returns the
 * worst claim latency in seconds. */
static int64_t handover(const char *prefix, int sig, int n)
{
    struct creator cr = {prefix, 0, n, 200 * USEC_PER_MSEC};
    pthread_t th;
    int slot = -1, st;
    assert_int_equal(it_wait(have_leader, &slot, WAIT), 0);
    assert_int_equal(pthread_create(&th, NULL, creator_main, &cr), 0);
    clock_sleep(2 * USEC_PER_SEC);
    st = ctrl_signal(slot, sig, false);
    if (sig == SIGTERM) /* a clean shutdown: exit status 0, Lease released */
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pthread_join(th, NULL);
    ctrl_start(slot); /* back to two replicas */
    return worst_latency_s(prefix);
}

static void test_leader_handover(void **state)
{
    usec_t t0 = clock_now();
    (void)state;
    ctrl_start(1);
    int64_t term = handover("ho-term", SIGTERM, 50);
    audit_check("leader-handover-sigterm", t0);
    t0 = clock_now();
    int64_t killed = handover("ho-kill", SIGKILL, 125);
    audit_check("leader-handover-sigkill", t0);
    /* The Lease (lease_s), a retry period plus jitter; 10 s of slack for the new
     * leader's list and sync. creationTimestamp has whole-second resolution. */
    printf("# chaos: worst claim latency across a hand-over: %lld s after SIGTERM "
           "(released Lease), %lld s after SIGKILL (Lease expiry)\n",
           (long long)term, (long long)killed);
    if (report)
        fprintf(report,
                "{\"scenario\":\"leader-handover-gap\",\"sigterm_s\":%lld,"
                "\"sigkill_s\":%lld}\n",
                (long long)term, (long long)killed);
    assert_true(term <= 2 + 8);
    assert_true(killed <= lease_s + 3 + 10);
}

/* ---- the router across an API server restart --------------------------------------- */

static pid_t spawn_logged(char *const argv[], const char *logname)
{
    char logf[640];
    (void)snprintf(logf, sizeof(logf), "%s/%s", log_dir, logname);
    return spawn_logged_to(argv, NULL, logf);
}

static uint16_t free_port(void)
{
    uint16_t port = 0;
    assert_int_equal(test_http_free_port(&port), 0);
    return port;
}

/* A Sandbox whose pod (ignored by the simulated kubelet) is marked Ready at 127.0.0.1,
 * where a real sandboxd listens. */
static bool pod_exists(void *ctx)
{
    json_t *p = NULL;
    supervise(); /* the controller may have stepped down during the outage */
    bool ok = kube_get(c, &KUBE_RES_PODS, ns, ctx, &p, NULL) == 0;
    json_decref(p);
    return ok;
}

static void routed_sandbox(const char *name)
{
    char now[64];
    struct kube_err e;
    json_t *sb =
        json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:{s:{s:{s:s}}, s:{s:[{s:s, s:s}]}}}}",
                  "apiVersion", "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata", "name",
                  name, "labels", STANDALONE, "1", "spec", "podTemplate", "metadata", "labels",
                  "chaos.test/kubelet-off", "1", "spec", "containers", "name", "r", "image", "i");
    IT_OK(kube_create(c, &API_RES_SANDBOXES, ns, sb, NULL, &e), &e);
    json_decref(sb);
    assert_int_equal(it_wait(pod_exists, (void *)name, WAIT), 0);
    clock_format_rfc3339_sec(clock_wall_now(), now, sizeof(now));
    json_t *p =
        json_pack("{s:{s:s, s:s, s:[{s:s}], s:[{s:s, s:s, s:s}]}}", "status", "phase", "Running",
                  "podIP", "127.0.0.1", "podIPs", "ip", "127.0.0.1", "conditions", "type", "Ready",
                  "status", "True", "lastTransitionTime", now);
    IT_OK(it_merge_patch(c, &KUBE_RES_PODS, ns, name, "status", p, &e), &e);
    json_decref(p);
}

struct routed {
    uint16_t router, sbd;
    const char *name;
    char token[256];
};

static int route_status(const struct routed *rt, const char *name)
{
    char req[1024];
    struct test_http_resp resp;
    test_http_resp_init(&resp);
    (void)snprintf(req, sizeof(req),
                   "GET /s/%s/%s/%u/v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Connection: close\r\n\r\n",
                   ns, name, rt->sbd, rt->token);
    int r = test_http_request(rt->router, req, 10 * USEC_PER_SEC, &resp);
    int st = r < 0 ? r : resp.status;
    test_http_resp_done(&resp);
    return st;
}

static bool routes_ok(void *ctx)
{
    struct routed *rt = ctx;
    supervise();
    return route_status(rt, rt->name) == 200;
}

/* During the outage: every request through the router (cached route, cached review). */
static void route_during_outage(struct routed *rt, int *ret_ok, int *ret_total)
{
    struct outage o = {.comp = "kube-apiserver", .after = 0, .down = 5 * USEC_PER_SEC};
    int ok = 0, total = 0;
    assert_int_equal(pthread_create(&o.th, NULL, outage_main, &o), 0);
    for (usec_t end = clock_now() + 6 * USEC_PER_SEC; clock_now() < end; total++) {
        ok += route_status(rt, "routed") == 200;
        clock_sleep(100 * USEC_PER_MSEC);
    }
    pthread_join(o.th, NULL);
    *ret_ok = ok;
    *ret_total = total;
}

static void test_router_through_apiserver_restart(void **state)
{
    struct routed rt = {.router = free_port(), .sbd = free_port(), .name = "routed"};
    char bin_r[1024], bin_s[1024], kc[1100], nsf[128], http[64], health[64], sport[16], root[640];
    const char *dir = getenv("AS_BIN_DIR") ? getenv("AS_BIN_DIR") : ".";
    int ok, total, st;
    (void)state;
    if (!api_chaos)
        skip();
    assert_int_equal(it_user_token("admin", rt.token, sizeof(rt.token)), 0);
    (void)snprintf(bin_s, sizeof(bin_s), "%s/sandboxd", dir);
    (void)snprintf(sport, sizeof(sport), "%u", rt.sbd);
    (void)snprintf(root, sizeof(root), "%s/sandboxd-root", log_dir);
    char *sargv[] = {bin_s,  "--host",      "127.0.0.1", "--port", sport, "--legacy-port",
                     "-1",   "--grpc-port", "0",         "--root", root,  "--log-level",
                     "warn", NULL};
    pid_t sbd = spawn_logged(sargv, "sandboxd.log");
    (void)snprintf(bin_r, sizeof(bin_r), "%s/sandbox-router", dir);
    (void)snprintf(kc, sizeof(kc), "--kubeconfig=%s", it_kubeconfig());
    (void)snprintf(nsf, sizeof(nsf), "--namespace=%s", ns);
    (void)snprintf(http, sizeof(http), "--http-bind-address=127.0.0.1:%u", rt.router);
    (void)snprintf(health, sizeof(health), "--health-probe-bind-address=127.0.0.1:%u", free_port());
    char *rargv[] = {bin_r, kc, nsf, http, health, "--allow-loopback-upstreams", "--log-level=info",
                     NULL};
    pid_t router = spawn_logged(rargv, "router.log");
    routed_sandbox("routed");
    assert_int_equal(it_wait(routes_ok, &rt, WAIT), 0);
    route_during_outage(&rt, &ok, &total);
    printf("# chaos router across a kube-apiserver restart (5 s down): %d of %d requests "
           "served from the route and review caches\n",
           ok, total);
    /* After the restart the router has re-watched: a new Sandbox becomes routable. */
    routed_sandbox("routed2");
    rt.name = "routed2";
    assert_int_equal(it_wait(routes_ok, &rt, WAIT), 0);
    if (report)
        fprintf(report, "{\"scenario\":\"router-apiserver-restart\",\"ok\":%d,\"total\":%d}\n", ok,
                total);
    assert_int_equal(ok, total);
    (void)kill(router, SIGTERM);
    assert_int_equal(waitpid(router, &st, 0), router);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    (void)kill(sbd, SIGTERM);
    assert_int_equal(waitpid(sbd, &st, 0), sbd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- pod failure, eviction and PVC loss on a standalone Sandbox --------------------- */

struct sb_want {
    const char *status;  /* Ready condition status */
    const char *not_pod; /* pod uid that must have been replaced (NULL: any) */
    char reason[64];     /* out: the Ready reason seen */
    char pod_uid[64];    /* out: the current pod's uid */
};

static bool sandbox_is(void *ctx)
{
    struct sb_want *w = ctx;
    json_t *sb = NULL, *pod = NULL;
    bool ok = false;
    supervise();
    if (kube_get(c, &API_RES_SANDBOXES, ns, "disrupt", &sb, NULL) < 0)
        return false;
    const json_t *cd = kube_obj_condition(sb, "Ready");
    const char *st = json_string_value(json_object_get(cd, "status"));
    const char *reason = json_string_value(json_object_get(cd, "reason"));
    (void)str_copy(w->reason, sizeof(w->reason), reason ? reason : "");
    if (kube_get(c, &KUBE_RES_PODS, ns, "disrupt", &pod, NULL) == 0)
        (void)str_copy(w->pod_uid, sizeof(w->pod_uid), kube_obj_uid(pod) ?: "");
    ok = st && strcmp(st, w->status) == 0 && reason && reason[0] &&
         (!w->not_pod || (pod && strcmp(w->pod_uid, w->not_pod) != 0));
    json_decref(pod);
    json_decref(sb);
    return ok;
}

static void wait_sandbox(struct sb_want *w, const char *what)
{
    if (it_wait(sandbox_is, w, WAIT) < 0)
        fail_msg("%s: Sandbox never Ready=%s (reason %s)", what, w->status, w->reason);
    printf("# chaos disruption %s: Ready=%s reason=%s\n", what, w->status, w->reason);
}

/* The uid of the PVC owned by the Sandbox with uid sb_uid ("" when none) into out. */
static void pvc_of(const char *sb_uid, char *name, char *uid, size_t size)
{
    json_t *l = list(&KUBE_RES_PVCS);
    const json_t *p;
    size_t i;
    name[0] = uid[0] = '\0';
    json_array_foreach(json_object_get(l, "items"), i, p)
    {
        if (!kube_obj_deleting(p) && sb_uid && kube_obj_controller_uid(p) &&
            strcmp(kube_obj_controller_uid(p), sb_uid) == 0) {
            (void)str_copy(name, size, kube_obj_name(p));
            (void)str_copy(uid, size, kube_obj_uid(p));
        }
    }
    json_decref(l);
}

struct pvc_want {
    const char *sb_uid, *old_uid;
};

static bool pvc_replaced(void *ctx)
{
    struct pvc_want *w = ctx;
    char name[256], uid[256];
    supervise();
    pvc_of(w->sb_uid, name, uid, sizeof(name));
    return uid[0] && strcmp(uid, w->old_uid) != 0;
}

static void create_disrupt_sandbox(json_t **ret_sb)
{
    json_t *sb = json_pack(
        "{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:{s:{s:[{s:s, s:s}]}}, s:[{s:{s:s}, "
        "s:{s:[s], s:{s:{s:s}}}}]}}",
        "apiVersion", "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata", "name", "disrupt",
        "labels", STANDALONE, "true", "spec", "podTemplate", "spec", "containers", "name",
        "runtime", "image", "registry.local/rt:1", "volumeClaimTemplates", "metadata", "name",
        "data", "spec", "accessModes", "ReadWriteOnce", "resources", "requests", "storage", "1Gi");
    struct kube_err e;
    IT_OK(kube_create(c, &API_RES_SANDBOXES, ns, sb, ret_sb, &e), &e);
    json_decref(sb);
}

static void evict(const char *pod)
{
    struct kube_req r;
    struct kube_err e;
    json_t *ev = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "policy/v1", "kind",
                           "Eviction", "metadata", "name", pod, "namespace", ns);
    kube_req_init(&r, "POST", &KUBE_RES_PODS);
    r.ns = ns;
    r.name = pod;
    r.subresource = "eviction";
    r.body = ev;
    IT_OK(kube_request(c, &r, NULL, &e), &e);
    json_decref(ev);
}

static void test_disruptions(void **state)
{
    struct sb_want w = {.status = "True"};
    struct kube_err e;
    json_t *sb = NULL;
    char pvc[256], pvc_uid[256], first_pod[64];
    int crashes = ctrl_crashes, exits = ctrl_exits;
    (void)state;
    create_disrupt_sandbox(&sb);
    wait_sandbox(&w, "created");
    (void)str_copy(first_pod, sizeof(first_pod), w.pod_uid);
    /* Disk full: the kubelet evicts the pod for ephemeral storage; status says so. */
    json_t *p =
        json_pack("{s:{s:s, s:s, s:s, s:[{s:s, s:s}]}}", "status", "phase", "Failed", "reason",
                  "Evicted", "message", "The node was low on resource: ephemeral-storage.",
                  "conditions", "type", "Ready", "status", "False");
    struct kube_req r;
    kube_req_init(&r, "PATCH", &KUBE_RES_PODS);
    r.ns = ns;
    r.name = "disrupt";
    r.subresource = "status";
    r.body = p;
    r.patch_type = KUBE_PATCH_MERGE;
    IT_OK(kube_request(c, &r, NULL, &e), &e);
    json_decref(p);
    w = (struct sb_want){.status = "False"};
    wait_sandbox(&w, "pod failed (ephemeral storage full)");
    /* The failed pod is removed: a new one replaces it and the Sandbox recovers. */
    IT_OK(kube_delete(c, &KUBE_RES_PODS, ns, "disrupt", &e), &e);
    w = (struct sb_want){.status = "True", .not_pod = first_pod};
    wait_sandbox(&w, "failed pod deleted");
    /* Eviction through the API: same. */
    (void)str_copy(first_pod, sizeof(first_pod), w.pod_uid);
    evict("disrupt");
    w = (struct sb_want){.status = "True", .not_pod = first_pod};
    wait_sandbox(&w, "pod evicted");
    /* PVC deleted under a running Sandbox: recreated, no crash loop. */
    pvc_of(kube_obj_uid(sb), pvc, pvc_uid, sizeof(pvc));
    assert_true(pvc[0] != '\0');
    IT_OK(kube_delete(c, &KUBE_RES_PVCS, ns, pvc, &e), &e);
    /* kubernetes.io/pvc-protection holds it Terminating while the pod uses it: the
     * Sandbox keeps a clear status meanwhile. Then the protection is released (as the
     * PVC protection controller does once the pod is gone) and the PVC must come back. */
    w = (struct sb_want){.status = "True"};
    wait_sandbox(&w, "PVC terminating under a running pod");
    json_t *fin = json_pack("{s:{s:n}}", "metadata", "finalizers");
    (void)kube_patch(c, &KUBE_RES_PVCS, ns, pvc, KUBE_PATCH_MERGE, fin, NULL, NULL);
    json_decref(fin);
    struct pvc_want pw = {kube_obj_uid(sb), pvc_uid};
    assert_int_equal(it_wait(pvc_replaced, &pw, WAIT), 0);
    printf("# chaos disruption PVC %s deleted: recreated\n", pvc);
    delete_sandbox_tree("disrupt");
    json_decref(sb);
    supervise();
    assert_int_equal(ctrl_crashes, crashes);
    assert_int_equal(ctrl_exits, exits); /* no crash loop: the process stayed up */
}

/* ---- malformed and malicious objects ------------------------------------------------ */

enum expect {
    REJECTED,   /* the API server refuses the object (schema, validation) */
    REASON,     /* Ready=False with exactly this reason */
    ANY_REASON, /* a Ready condition with some reason (True or False) */
    REJECTED_OR_REASON,
};

struct hostile {
    const char *what;
    const struct kube_res *res;
    const char *name;
    const char *json; /* the object, "%s" = a big generated string (may be NULL) */
    enum expect expect;
    const char *reason;
};

#define CLAIM_HEAD "{\"apiVersion\":\"" API_VERSION "\",\"kind\":\"SandboxClaim\",\"metadata\":"
#define SB_HEAD    "{\"apiVersion\":\"agents.x-k8s.io/v1beta1\",\"kind\":\"Sandbox\",\"metadata\":"
#define SB_SPEC \
    "\"spec\":{\"podTemplate\":{\"spec\":{\"containers\":[{\"name\":\"r\",\"image\":\"i\"}]}}}"

static const struct hostile hostile_rows[] = {
    {"reserved-prefix label", &API_RES_SANDBOXCLAIMS, "h-reserved",
     CLAIM_HEAD "{\"name\":\"h-reserved\"},\"spec\":{\"warmPoolRef\":{\"name\":\"pool\"},"
                "\"additionalPodMetadata\":{\"labels\":{\"agents.x-k8s.io/sandbox-name-hash\":"
                "\"x\"}}}}",
     REJECTED_OR_REASON, "InvalidMetadata"},
    {"kubernetes.io annotation", &API_RES_SANDBOXCLAIMS, "h-k8sann",
     CLAIM_HEAD "{\"name\":\"h-k8sann\"},\"spec\":{\"warmPoolRef\":{\"name\":\"pool\"},"
                "\"additionalPodMetadata\":{\"annotations\":{\"kubernetes.io/psp\":\"x\"}}}}",
     REJECTED_OR_REASON, "InvalidMetadata"},
    {"huge label value", &API_RES_SANDBOXCLAIMS, "h-huge",
     CLAIM_HEAD "{\"name\":\"h-huge\"},\"spec\":{\"warmPoolRef\":{\"name\":\"pool\"},"
                "\"additionalPodMetadata\":{\"labels\":{\"sandbox.users.io/x\":\"%s\"}}}}",
     REJECTED_OR_REASON, "InvalidMetadata"},
    {"wrong type for warmPoolRef", &API_RES_SANDBOXCLAIMS, "h-type",
     CLAIM_HEAD "{\"name\":\"h-type\"},\"spec\":{\"warmPoolRef\":42}}", REJECTED, NULL},
    {"cross-namespace pool ref", &API_RES_SANDBOXCLAIMS, "h-xns",
     CLAIM_HEAD "{\"name\":\"h-xns\"},\"spec\":{\"warmPoolRef\":{\"name\":\"kube-system/pool\"}}}",
     REJECTED_OR_REASON, "WarmPoolNotFound"},
    {"path-like pool ref", &API_RES_SANDBOXCLAIMS, "h-dots",
     CLAIM_HEAD "{\"name\":\"h-dots\"},\"spec\":{\"warmPoolRef\":{\"name\":\"../pool\"}}}",
     REJECTED_OR_REASON, "WarmPoolNotFound"},
    {"253-byte claim name", &API_RES_SANDBOXCLAIMS, NULL,
     CLAIM_HEAD "{\"name\":\"%s\"},\"spec\":{\"warmPoolRef\":{\"name\":\"pool\"}}}", ANY_REASON,
     NULL},
    {"owner reference to a foreign object", &API_RES_SANDBOXES, "h-owner",
     SB_HEAD "{\"name\":\"h-owner\",\"labels\":{\"" STANDALONE "\":\"1\"},\"ownerReferences\":[{"
             "\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"foreign\",\"uid\":"
             "\"%s\",\"controller\":true}]}," SB_SPEC "}",
     ANY_REASON, NULL},
    {"pod-name annotation naming a foreign pod (#265)", &API_RES_SANDBOXES, "h-podname",
     SB_HEAD "{\"name\":\"h-podname\",\"labels\":{\"" STANDALONE "\":\"1\"},\"annotations\":{"
             "\"agents.x-k8s.io/pod-name\":\"victim\"}}," SB_SPEC "}",
     ANY_REASON, NULL},
    {"containers of the wrong type", &API_RES_SANDBOXES, "h-badspec",
     SB_HEAD "{\"name\":\"h-badspec\"},\"spec\":{\"podTemplate\":{\"spec\":{\"containers\":"
             "\"x\"}}}}",
     REJECTED, NULL},
};

struct cond_seen {
    const struct kube_res *res;
    const char *name;
    char status[16], reason[128];
};

static bool has_condition(void *ctx)
{
    struct cond_seen *w = ctx;
    json_t *o = NULL;
    supervise();
    if (kube_get(c, w->res, ns, w->name, &o, NULL) < 0)
        return false;
    const json_t *cd = kube_obj_condition(o, "Ready");
    (void)str_copy(w->status, sizeof(w->status),
                   json_string_value(json_object_get(cd, "status")) ?: "");
    (void)str_copy(w->reason, sizeof(w->reason),
                   json_string_value(json_object_get(cd, "reason")) ?: "");
    json_decref(o);
    return w->reason[0] != '\0' && strcmp(w->reason, "SandboxCreatePending") != 0;
}

/* tmpl with its "%s" (if any) replaced by big; returns new. */
static char *subst(const char *tmpl, const char *big)
{
    struct buf b;
    const char *at = strstr(tmpl, "%s");
    buf_init(&b, 1024 * 1024);
    if (at) {
        assert_int_equal(buf_append(&b, tmpl, (size_t)(at - tmpl)), 0);
        assert_int_equal(buf_puts(&b, big), 0);
        assert_int_equal(buf_puts(&b, at + 2), 0);
    } else {
        assert_int_equal(buf_puts(&b, tmpl), 0);
    }
    char *s = xstrdup(buf_str(&b));
    buf_done(&b);
    return s;
}

static void hostile_one(const struct hostile *h, const char *big)
{
    char *text = subst(h->json, big);
    json_error_t je;
    json_t *obj = json_loads(text, 0, &je), *out = NULL;
    struct kube_err e;
    assert_non_null(obj);
    int r = kube_create(c, h->res, ns, obj, &out, &e);
    if (r < 0) {
        printf("# hostile %-48s rejected by the API server: HTTP %ld %s\n", h->what, e.http_status,
               e.reason);
        assert_true(h->expect == REJECTED || h->expect == REJECTED_OR_REASON);
        assert_true(e.http_status == 422 || e.http_status == 400);
    } else {
        struct cond_seen w = {h->res, kube_obj_name(out)};
        if (h->res == &API_RES_SANDBOXCLAIMS)
            atomic_fetch_add(&claims_created, 1); /* the audits count it */
        assert_true(h->expect != REJECTED);
        if (it_wait(has_condition, &w, 60 * USEC_PER_SEC) < 0)
            fail_msg("%s: no Ready condition with a reason", h->what);
        printf("# hostile %-48s Ready=%s reason=%s\n", h->what, w.status, w.reason);
        if (h->expect != ANY_REASON)
            assert_string_equal(w.reason, h->reason);
    }
    json_decref(out);
    json_decref(obj);
    xfree(text);
}

static void test_hostile_objects(void **state)
{
    char *big = xmalloc(256 * 1024 + 1), *victim_ref = NULL;
    int crashes = ctrl_crashes, exits = ctrl_exits;
    json_t *victim = NULL;
    struct kube_err e;
    (void)state;
    /* A pod the controller does not own, named by the #265 row's annotation. */
    json_t *pod =
        json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind",
                  "Pod", "metadata", "name", "victim", "labels", "chaos.test/kubelet-off", "1",
                  "spec", "containers", "name", "v", "image", "i");
    IT_OK(kube_create(c, &KUBE_RES_PODS, ns, pod, NULL, &e), &e);
    json_decref(pod);
    /* A real foreign owner: with a missing one the garbage collector would delete the
     * Sandbox before the controller is tested. */
    json_t *cm = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                           "metadata", "name", "foreign"),
           *cm_out = NULL;
    IT_OK(kube_create(c, &KUBE_RES_CONFIGMAPS, ns, cm, &cm_out, &e), &e);
    json_decref(cm);
    for (size_t i = 0; i < sizeof(hostile_rows) / sizeof(hostile_rows[0]); i++) {
        const struct hostile *h = &hostile_rows[i];
        size_t n = strstr(h->json, "\"name\":\"%s\"") ? 253 : 256 * 1024;
        memset(big, 'a', n);
        big[n] = '\0';
        hostile_one(h, strstr(h->json, "\"uid\":\"%s\"") ? kube_obj_uid(cm_out) : big);
    }
    json_decref(cm_out);
    /* #265: the foreign pod is neither adopted nor deleted, not even when the Sandbox
     * that names it goes away. */
    delete_sandbox_tree("h-podname");
    IT_OK(kube_get(c, &KUBE_RES_PODS, ns, "victim", &victim, &e), &e);
    assert_false(kube_obj_deleting(victim));
    assert_null(kube_obj_controller_ref(victim));
    victim_ref = json_dumps(kube_obj_path(victim, "metadata.ownerReferences"), JSON_ENCODE_ANY);
    printf("# hostile victim pod ownerReferences after: %s\n", victim_ref ? victim_ref : "none");
    supervise();
    assert_int_equal(ctrl_crashes, crashes);
    assert_int_equal(ctrl_exits, exits);
    xfree(victim_ref);
    json_decref(victim);
    xfree(big);
}

/* Removes what the table leaves behind even when a row failed, so that the audits of
 * later scenarios do not count the foreign pod as an orphan. */
static int hostile_teardown(void **state)
{
    (void)state;
    (void)kube_delete(c, &KUBE_RES_PODS, ns, "victim", NULL);
    return 0;
}

/* #251: a pool asking for two billion replicas gets --max-pool-replicas, no more. */
static void test_unbounded_replicas(void **state)
{
    int before = pool_size;
    usec_t t0 = clock_now();
    (void)state;
    scale(2000000000);
    pool_size = max_replicas;
    assert_int_equal(it_wait(pool_full, NULL, WAIT), 0);
    audit_check("pool-replicas-2e9-capped", t0);
    t0 = clock_now();
    scale(before);
    audit_check("pool-back-from-cap", t0);
}

/* ---- claims released through controller kills ------------------------------------- */

/* One released claim and what it held when it was deleted. */
struct released {
    char claim[64], claim_uid[64], sb[256], sb_uid[64], pod_uid[64];
    const char *policy; /* the DELETE's propagationPolicy */
};

static const char *const release_policy[] = {"Background", "Background", "Orphan", "Foreground"};

struct release_state {
    struct released *r;
    size_t n;
    size_t kept_sb, kept_pod; /* Orphan: the Sandboxes and Pods found again, same UID */
};

/* The item of list whose metadata field (uid, name) is val, or the one controlled by the
 * UID val (field NULL); borrowed from list. */
static const json_t *find_item(const json_t *list, const char *field, const char *val)
{
    size_t i;
    const json_t *o;
    json_array_foreach(json_object_get(list, "items"), i, o)
    {
        const char *v =
            field ? json_string_value(kube_obj_path(o, field)) : kube_obj_controller_uid(o);
        if (v && strcmp(v, val) == 0)
            return o;
    }
    return NULL;
}

static const json_t *find_uid(const json_t *list, const char *uid)
{
    return find_item(list, "metadata.uid", uid);
}

static const json_t *find_controlled(const json_t *list, const char *uid)
{
    return find_item(list, NULL, uid);
}

static bool owned_by(const json_t *o, const char *uid)
{
    size_t i;
    const json_t *ref;
    json_array_foreach(kube_obj_path(o, "metadata.ownerReferences"), i, ref)
    {
        const char *u = json_string_value(json_object_get(ref, "uid"));
        if (u && strcmp(u, uid) == 0)
            return true;
    }
    return false;
}

/* Records the Ready claims kill-0000.. (test_burst_with_kills), their Sandboxes and Pods,
 * and the policy each is to be deleted with. */
static void release_gather(struct release_state *st)
{
    json_t *cls = list(&API_RES_SANDBOXCLAIMS), *sbs = list(&API_RES_SANDBOXES),
           *pods = list(&KUBE_RES_PODS);
    size_t i;
    const json_t *cl;
    assert_true(cls && sbs && pods);
    st->r = xcalloc((size_t)nclaims, sizeof(*st->r));
    json_array_foreach(json_object_get(cls, "items"), i, cl)
    {
        const char *name = kube_obj_name(cl), *sbn = kube_obj_path_str(cl, "status.sandbox.name");
        const json_t *sb, *pod;
        int64_t idx;
        if (strncmp(name, "kill-", 5) != 0 || cstr_to_i64(name + 5, &idx) < 0 || !sbn ||
            !(sb = find_item(sbs, "metadata.name", sbn)))
            continue;
        pod = find_controlled(pods, kube_obj_uid(sb));
        assert_non_null(pod);
        assert_true(st->n < (size_t)nclaims);
        struct released *r = &st->r[st->n++];
        (void)snprintf(r->claim, sizeof(r->claim), "%s", name);
        (void)snprintf(r->claim_uid, sizeof(r->claim_uid), "%s", kube_obj_uid(cl));
        (void)snprintf(r->sb, sizeof(r->sb), "%s", sbn);
        (void)snprintf(r->sb_uid, sizeof(r->sb_uid), "%s", kube_obj_uid(sb));
        (void)snprintf(r->pod_uid, sizeof(r->pod_uid), "%s", kube_obj_uid(pod));
        r->policy = release_policy[idx % 4];
    }
    assert_int_equal(st->n, (size_t)nclaims);
    json_decref(cls);
    json_decref(sbs);
    json_decref(pods);
}

static void release_delete(const struct release_state *st)
{
    for (size_t i = 0; i < st->n; i++) {
        const struct released *r = &st->r[i];
        json_t *obj = json_pack("{s:{s:s, s:s, s:s}}", "metadata", "name", r->claim, "namespace",
                                ns, "uid", r->claim_uid);
        struct kube_err e;
        IT_OK(kube_delete_obj(c, &API_RES_SANDBOXCLAIMS, obj, false, r->policy, &e), &e);
        json_decref(obj);
    }
}

/* Settled: every released claim gone; the Sandbox and Pod of each one deleted with
 * Background or Foreground gone; each Orphan's Sandbox without the claim's reference. */
static bool release_settled(void *ctx)
{
    struct release_state *st = ctx;
    json_t *cls, *sbs, *pods;
    bool done = true;
    supervise();
    cls = list(&API_RES_SANDBOXCLAIMS), sbs = list(&API_RES_SANDBOXES), pods = list(&KUBE_RES_PODS);
    done = cls && sbs && pods;
    for (size_t i = 0; done && i < st->n; i++) {
        const struct released *r = &st->r[i];
        const json_t *sb = find_uid(sbs, r->sb_uid);
        if (find_uid(cls, r->claim_uid))
            done = false;
        else if (strcmp(r->policy, "Orphan") != 0)
            done = !sb && !find_controlled(pods, r->sb_uid);
        else
            done = !sb || !owned_by(sb, r->claim_uid);
    }
    json_decref(cls);
    json_decref(sbs);
    json_decref(pods);
    return done;
}

/* Counts the Orphan claims' Sandboxes and Pods still there, the same objects, not being
 * deleted. */
static void release_count_kept(struct release_state *st)
{
    json_t *sbs = list(&API_RES_SANDBOXES), *pods = list(&KUBE_RES_PODS);
    assert_true(sbs && pods);
    st->kept_sb = st->kept_pod = 0;
    for (size_t i = 0; i < st->n; i++) {
        const struct released *r = &st->r[i];
        const json_t *sb = find_uid(sbs, r->sb_uid), *pod = find_uid(pods, r->pod_uid);
        if (strcmp(r->policy, "Orphan") != 0)
            continue;
        st->kept_sb += sb && !kube_obj_deleting(sb) && !owned_by(sb, r->claim_uid);
        st->kept_pod += pod && !kube_obj_deleting(pod);
    }
    json_decref(sbs);
    json_decref(pods);
}

static void ctrl_restart_with(char *extra)
{
    pthread_mutex_lock(&ctrl_lock);
    ctrl_extra = extra;
    pthread_mutex_unlock(&ctrl_lock);
    (void)ctrl_signal(0, SIGTERM, true);
}

/* The claims of the first burst are deleted, a half with the default (Background), a
 * quarter with Orphan and a quarter with Foreground, while the controller, which deletes
 * a released claim's Sandbox and Pod at once here (--dependent-deletion-delay=0s), is
 * killed. The garbage collector deletes the same objects: the two race. An Orphan
 * claim's Sandbox and Pod must stay (the same objects), everything else of the released
 * claims must go, and the rest must be as before. */
static void test_release_with_kills(void **state)
{
    struct release_state st = {0};
    struct killer k;
    usec_t t0 = clock_now(), settled;
    size_t orphans = 0;
    (void)state;
    release_gather(&st);
    ctrl_restart_with("--dependent-deletion-delay=0s");
    killer_start(&k, nkills, 1000 * USEC_PER_MSEC);
    release_delete(&st);
    killer_join(&k);
    atomic_fetch_sub(&claims_created, (int)st.n);
    assert_int_equal(it_wait(release_settled, &st, WAIT), 0);
    settled = clock_now() - t0;
    /* The controller looks at a refused owner again a second later, three times. */
    clock_sleep(5 * USEC_PER_SEC);
    release_count_kept(&st);
    for (size_t i = 0; i < st.n; i++)
        orphans += strcmp(st.r[i].policy, "Orphan") == 0;
    printf("# chaos claim-release: %zu claims deleted (%zu Orphan) through %d kills, settled in "
           "%.1f s; Orphan's Sandboxes kept %zu/%zu, Pods kept %zu/%zu\n",
           st.n, orphans, nkills, (double)settled / USEC_PER_SEC, st.kept_sb, orphans, st.kept_pod,
           orphans);
    if (report)
        fprintf(report,
                "{\"scenario\":\"claim-release-kept\",\"released\":%zu,\"orphan\":%zu,"
                "\"kept_sandboxes\":%zu,\"kept_pods\":%zu}\n",
                st.n, orphans, st.kept_sb, st.kept_pod);
    assert_int_equal(st.kept_sb, orphans);
    assert_int_equal(st.kept_pod, orphans);
    ctrl_restart_with(NULL);
    for (size_t i = 0; i < st.n; i++)
        if (strcmp(st.r[i].policy, "Orphan") == 0)
            delete_sandbox_tree(st.r[i].sb);
    xfree(st.r);
    audit_check("claim-release-with-controller-kills", t0);
}

/* ---- setup -------------------------------------------------------------------------- */

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    int64_t n;
    return v && cstr_to_i64(v, &n) == 0 && n > 0 && n < 100000 ? (int)n : def;
}

/* Restarting the API server is only allowed on a private one. */
static bool private_apiserver(void)
{
    const char *dir = getenv("AS_APISERVER_DIR");
    size_t n = dir ? strlen(dir) : 0, k = strlen("/.cache/apiserver");
    return n > 0 && !(n >= k && strcmp(dir + n - k, "/.cache/apiserver") == 0);
}

static int setup_dirs(void)
{
    const char *ld = getenv("AS_CHAOS_LOG_DIR"), *rp = getenv("AS_CHAOS_REPORT");
    if (ld) {
        (void)snprintf(log_dir, sizeof(log_dir), "%s", ld);
    } else {
        (void)snprintf(log_dir, sizeof(log_dir), "/tmp/as-chaos-XXXXXX");
        if (!mkdtemp(log_dir))
            return -1;
    }
    if (rp && !(report = fopen(rp, "a")))
        return -1;
    return 0;
}

static int group_setup(void **state)
{
    struct it_sandbox_ns_opts so = {
        .prefix = "chaos", .extensions = true, .default_sa = true, .timeout = WAIT};
    struct kube_client_opts co = {.qps = 0};
    struct kube_err e;
    (void)state;
    log_set_level(LOG_WARN);
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines as they happen */
    nclaims = env_int("AS_CHAOS_CLAIMS", 40);
    nkills = env_int("AS_CHAOS_KILLS", 3);
    lease_s = env_int("AS_CHAOS_LEASE_SECONDS", 15);
    lease_s = lease_s < 3 ? 3 : lease_s;
    max_replicas = nclaims + 5; /* above every pool size the scenarios use */
    api_chaos = getenv("AS_CHAOS_APISERVER") && strcmp(getenv("AS_CHAOS_APISERVER"), "1") == 0;
    if (api_chaos && !private_apiserver()) {
        fprintf(stderr, "AS_CHAOS_APISERVER=1 needs a private AS_APISERVER_DIR\n");
        return -1;
    }
    if (setup_dirs() < 0 || it_client_new(&co, &c, &e) < 0)
        return -1;
    printf("# chaos: %d claims per burst, %d kills per scenario, API server restarts %s, "
           "controller logs in %s\n",
           nclaims, nkills, api_chaos ? "on" : "off", log_dir);
    if (it_sandbox_ns_setup(c, &so, ns, sizeof(ns), &e) < 0) {
        fprintf(stderr, "setup: %s\n", e.message);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < MAX_CTRL; i++)
        (void)ctrl_signal(i, SIGTERM, false);
    kubelet_stop();
    if (c && ns[0])
        (void)it_ns_delete(c, ns, 120 * USEC_PER_SEC);
    kube_client_free(c);
    if (report)
        (void)fclose(report);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_fills_through_kills),
        cmocka_unit_test(test_burst_with_kills),
        cmocka_unit_test(test_refill_with_kills),
        cmocka_unit_test(test_burst_with_compaction),
        cmocka_unit_test(test_apiserver_restart),
        cmocka_unit_test(test_etcd_restart),
        cmocka_unit_test(test_router_through_apiserver_restart),
        cmocka_unit_test(test_disruptions),
        cmocka_unit_test_teardown(test_hostile_objects, hostile_teardown),
        cmocka_unit_test(test_unbounded_replicas),
        cmocka_unit_test(test_release_with_kills),
        cmocka_unit_test(test_leader_handover),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
