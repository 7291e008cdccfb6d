/* SPDX-License-Identifier: Apache-2.0 */
/* Integration tests of late-bound claim configuration against the local kube-apiserver:
 * the manager runs in-process (loopback delivery allowed by its test option), and a
 * small "kubelet" stands in for the node: for every Pod that mounts a config token it
 * starts a real sandboxd binary on its own loopback address (127.0.0.N, one shared
 * port) with the token from the Pod's Secret, then marks the Pod Running and Ready with
 * that address. Claims with env must be served warm and their processes must see the
 * values; values must appear in no object, Event, log line or metadata answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/random.h>
#include <sys/wait.h>

#include <curl/curl.h>

#include "api/res.h"
#include "common/base64.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "controller/ext_names.h"
#include "controller/latebind_spec.h"
#include "controller/manager.h"
#include "controller/template_build.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "support/apiserver.h"
#include "support/ctrl_fixture.h"
#include "support/http_client.h"
#include "support/kube_fixture.h"

#define WAIT      (60 * USEC_PER_SEC)
#define MAX_PODS  64
#define EXEC_BODY "{\"command\":[\"sh\",\"-c\",\"echo \\\"$PLAIN|$API_KEY|$MODE\\\"\"]}"

extern char **environ;

static struct kube_client *c, *mgr_client;
static struct ctrl_manager *mgr;
static char ns[96], tmpdir[64], secret_value[64], logpath[128];
static uint16_t sbd_port;
static int logfd = -1;

/* ---- the simulated kubelet: a real sandboxd per late-bound Pod ---------------------- */

static struct it_kubelet *kubelet;
static pid_t pids[MAX_PODS];
static atomic_uint npids;

static uint16_t free_port(void)
{
    uint16_t port = 0;
    if (test_http_free_port(&port) < 0)
        abort();
    return port;
}

/* One HTTP request to http://ip:port path; returns the status, body appended to out. */
static size_t collect(char *p, size_t size, size_t n, void *ctx)
{
    return buf_append(ctx, p, size * n) < 0 ? 0 : size * n;
}

static long http(const char *method, const char *ip, uint16_t port, const char *path,
                 const char *auth, const char *body, struct buf *out)
{
    char url[256], hdr[256];
    CURL *h = curl_easy_init();
    struct curl_slist *hl = NULL;
    long status = 0;
    (void)snprintf(url, sizeof(url), "http://%s:%u%s", ip, port, path);
    hl = curl_slist_append(hl, "Content-Type: application/json");
    if (auth) {
        (void)snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", auth);
        hl = curl_slist_append(hl, hdr);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return status;
}

struct health {
    const char *ip;
};

static bool healthy(void *ctx)
{
    struct health *hc = ctx;
    struct buf b;
    long st;
    buf_init(&b, 4096);
    st = http("GET", hc->ip, sbd_port, "/v1/health", NULL, NULL, &b);
    buf_done(&b);
    return st == 200;
}

/* The token of Secret name (new string) or NULL. */
static char *secret_token(const char *name)
{
    json_t *s = NULL;
    struct buf b;
    const char *v;
    char *t = NULL;
    if (kube_get(c, &KUBE_RES_SECRETS, ns, name, &s, NULL) < 0)
        return NULL;
    v = kube_obj_path_str(s, "data.token");
    buf_init(&b, 4096);
    if (v && base64_decode(v, strlen(v), &b) == 0)
        t = xstrdup(buf_str(&b));
    buf_done(&b);
    json_decref(s);
    return t;
}

static const char *pod_token_secret(const json_t *pod)
{
    const json_t *v;
    size_t i;
    json_array_foreach(kube_obj_path(pod, "spec.volumes"), i, v)
    {
        const char *n = json_string_value(json_object_get(v, "name"));
        if (n && strcmp(n, LB_VOLUME) == 0)
            return kube_obj_path_str(v, "secret.secretName");
    }
    return NULL;
}

/* Starts sandboxd on ip with the config token of the Pod's Secret. */
static int start_sandboxd(const char *name, const char *secret, const char *ip)
{
    char bin[512], root[256], tokfile[256], port[16], *tok = NULL;
    char *argv[] = {bin,     "--host",      (char *)ip, "--port", port, "--legacy-port",
                    "-1",    "--grpc-port", "0",        "--root", root, "--config-token-file",
                    tokfile, "--log-level", "warn",     NULL};
    FILE *f;
    pid_t pid;
    struct health hc = {ip};
    unsigned slot;
    for (int i = 0; i < 100 && !(tok = secret_token(secret)); i++)
        clock_sleep(50 * USEC_PER_MSEC); /* the pool creates the Secret right after */
    if (!tok)
        return -ENOENT;
    (void)snprintf(bin, sizeof(bin), "%s/sandboxd", getenv("AS_BIN_DIR"));
    (void)snprintf(root, sizeof(root), "%s/%s", tmpdir, name);
    (void)snprintf(tokfile, sizeof(tokfile), "%s/%s.token", tmpdir, name);
    (void)snprintf(port, sizeof(port), "%u", sbd_port);
    f = fopen(tokfile, "w");
    if (!f || fputs(tok, f) < 0 || fclose(f) != 0)
        abort();
    xfree(tok);
    if (posix_spawn(&pid, bin, NULL, NULL, argv, environ) != 0)
        return -errno;
    slot = atomic_fetch_add(&npids, 1);
    if (slot < MAX_PODS)
        pids[slot] = pid;
    return it_wait(healthy, &hc, 20 * USEC_PER_SEC);
}

/* Runs Pod name: a sandboxd on its own loopback address when it mounts a config token,
 * then Running and Ready with that address. */
static int kubelet_run(void *ctx, const char *name, unsigned seq)
{
    json_t *pod = NULL;
    char ip[32];
    const char *secret;
    (void)ctx;
    if (kube_get(c, &KUBE_RES_PODS, ns, name, &pod, NULL) < 0)
        return 0;
    (void)snprintf(ip, sizeof(ip), "127.0.%u.%u", 10 + seq / 200, seq % 200 + 2);
    secret = pod_token_secret(pod);
    if (!secret || start_sandboxd(name, secret, ip) == 0)
        (void)it_pod_ready(c, ns, name, ip, NULL);
    else
        fprintf(stderr, "kubelet: sandboxd for %s did not start\n", name);
    json_decref(pod);
    return 0;
}

static bool kubelet_skip(void *ctx, const json_t *pod)
{
    (void)ctx;
    return kube_obj_deleting(pod);
}

static void kubelet_start(void)
{
    struct it_kubelet_opts o = {
        .client = c, .ns = ns, .workers = 1, .skip = kubelet_skip, .run = kubelet_run};
    assert_int_equal(it_kubelet_start(&o, &kubelet), 0);
}

static void kubelet_stop(void)
{
    unsigned n = atomic_load(&npids);
    it_kubelet_free(kubelet);
    kubelet = NULL;
    for (unsigned i = 0; i < n && i < MAX_PODS; i++) {
        (void)kill(pids[i], SIGTERM);
        (void)waitpid(pids[i], NULL, 0);
    }
}

static int dump_cb(const char *p, size_t n, void *ctx)
{
    return buf_append(ctx, p, n) < 0 ? -1 : 0;
}

/* Returns j as compact JSON (new, xfree). */
static char *dump(const json_t *j)
{
    struct buf b;
    buf_init(&b, 256u * 1024 * 1024);
    if (json_dump_callback(j, dump_cb, &b, JSON_COMPACT | JSON_SORT_KEYS) < 0)
        abort();
    return buf_steal(&b);
}

/* ---- objects ------------------------------------------------------------------------ */

static json_t *get(const struct kube_res *res, const char *name)
{
    return it_obj_get(c, res, ns, name);
}

/* Creates o (taken) in the namespace. */
static void create_obj(const struct kube_res *res, json_t *o)
{
    struct kube_err e;
    IT_OK(kube_create(c, res, ns, o, NULL, &e), &e);
    json_decref(o);
}

static void create(const struct kube_res *res, const char *yaml_json)
{
    json_error_t je;
    json_t *o = json_loads(yaml_json, 0, &je);
    if (!o)
        fail_msg("bad JSON: %s", je.text);
    create_obj(res, o);
}

static void create_template(const char *name, const char *delivery, uint16_t port)
{
    char buf[2048];
    (void)snprintf(
        buf, sizeof(buf),
        "{\"apiVersion\":\"extensions.agents.x-k8s.io/v1beta1\",\"kind\":\"SandboxTemplate\","
        "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"envVarsInjectionPolicy\":\"Allowed\","
        "\"claimConfigDelivery\":{\"mode\":\"LateBound\",\"onFailure\":\"%s\",\"port\":%u},"
        "\"podTemplate\":{\"spec\":{\"containers\":[{\"name\":\"sandbox\",\"image\":\"x\"}]}}}}",
        name, delivery, port);
    create(&API_RES_SANDBOXTEMPLATES, buf);
}

static void create_pool(const char *name, const char *tpl, int replicas)
{
    create_obj(&API_RES_SANDBOXWARMPOOLS, it_pool_new(name, tpl, replicas));
}

/* A claim on pool; with plain, env PLAIN=plain, API_KEY (Secret creds) and MODE
 * (ConfigMap cfg). */
static void create_claim(const char *name, const char *pool, const char *plain)
{
    json_t *cl = it_claim_new(name, pool);
    if (plain)
        (void)json_object_set_new(
            json_object_get(cl, "spec"), "env",
            json_pack("[{s:s, s:s}, {s:s, s:{s:{s:s, s:s}}}, {s:s, s:{s:{s:s, s:s}}}]", "name",
                      "PLAIN", "value", plain, "name", "API_KEY", "valueFrom", "secretKeyRef",
                      "name", "creds", "key", "api-key", "name", "MODE", "valueFrom",
                      "configMapKeyRef", "name", "cfg", "key", "mode"));
    create_obj(&API_RES_SANDBOXCLAIMS, cl);
}

static bool pool_ready(void *ctx)
{
    json_t *p = get(&API_RES_SANDBOXWARMPOOLS, ctx);
    const json_t *want = kube_obj_path(p, "spec.replicas");
    bool ok = p && json_integer_value(kube_obj_path(p, "status.readyReplicas")) ==
                       (want ? json_integer_value(want) : 1);
    json_decref(p);
    return ok;
}

static void wait_pool(const char *name)
{
    if (it_wait(pool_ready, (void *)name, WAIT) < 0)
        fail_msg("pool %s never filled", name);
}

static json_t *wait_claim(const char *name, const char *status, const char *reason)
{
    struct it_cond want = {&API_RES_SANDBOXCLAIMS, name, SB_COND_READY, status, reason};
    if (it_cond_wait(c, ns, &want, WAIT) < 0) {
        json_t *cl = get(&API_RES_SANDBOXCLAIMS, name);
        char *s = dump(json_object_get(cl, "status") ?: json_null());
        fail_msg("claim %s: no Ready=%s/%s; status %s", name, status, reason ? reason : "*", s);
    }
    return get(&API_RES_SANDBOXCLAIMS, name);
}

/* The bound Sandbox of a Ready claim (new reference). */
static json_t *bound(const json_t *claim)
{
    return get(&API_RES_SANDBOXES, kube_obj_path_str(claim, "status.sandbox.name"));
}

/* Runs EXEC_BODY in the Sandbox's sandboxd; returns its stdout (new). */
static char *run_env(const json_t *sb)
{
    const char *ip = json_string_value(json_array_get(kube_obj_path(sb, "status.podIPs"), 0));
    struct buf b;
    json_t *j;
    char *out;
    buf_init(&b, 1u << 20);
    assert_non_null(ip);
    assert_int_equal(http("POST", ip, sbd_port, "/v1/processes/run", NULL, EXEC_BODY, &b), 200);
    j = json_loads(buf_str(&b), 0, NULL);
    out = xstrdup(json_string_value(json_object_get(j, "stdout")) ?: "");
    json_decref(j);
    buf_done(&b);
    return out;
}

/* ---- setup -------------------------------------------------------------------------- */

static void start_manager(void)
{
    struct ctrl_opts o = {.client = mgr_client,
                          .workers = 8,
                          .ns = ns,
                          .leader_elect = false,
                          .metrics_addr = "127.0.0.1:0",
                          .health_addr = "0",
                          .events = true,
                          .extensions = true,
                          .ext = {.claim_workers = 8,
                                  .claim_timeout = 120 * USEC_PER_SEC,
                                  .latebind_loopback = true,
                                  .latebind_timeout = 2 * USEC_PER_SEC}};
    assert_int_equal(ctrl_manager_new(&o, &mgr), 0);
    assert_int_equal(ctrl_manager_start(mgr), 0);
    assert_int_equal(ctrl_manager_wait_synced(mgr, WAIT), 0);
}

static int create_fixtures(void)
{
    uint8_t rnd[8];
    char buf[512];
    struct kube_err e;
    json_t *o;
    if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
        return -1;
    (void)snprintf(secret_value, sizeof(secret_value), "s3cr3t-%02x%02x%02x%02x%02x%02x%02x%02x",
                   rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    (void)snprintf(buf, sizeof(buf),
                   "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"creds\"},"
                   "\"stringData\":{\"api-key\":\"%s\"}}",
                   secret_value);
    o = json_loads(buf, 0, NULL);
    if (kube_create(c, &KUBE_RES_SECRETS, ns, o, NULL, &e) < 0)
        return -1;
    json_decref(o);
    o = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                  "metadata", "name", "cfg", "data", "mode", "fast");
    if (kube_create(c, &KUBE_RES_CONFIGMAPS, ns, o, NULL, &e) < 0)
        return -1;
    json_decref(o);
    (void)it_default_sa_create(c, ns, NULL);
    return 0;
}

static int group_setup(void **state)
{
    struct it_sandbox_ns_opts so = {.prefix = "latebind", .extensions = true, .timeout = WAIT};
    struct kube_client_opts co = {.qps = 0}, mo = {.qps = 0, .fault = it_lose_answer};
    struct kube_err e;
    (void)state;
    (void)snprintf(tmpdir, sizeof(tmpdir), "/tmp/it-latebind-XXXXXX");
    if (!mkdtemp(tmpdir) || !getenv("AS_BIN_DIR"))
        return -1;
    /* Every log line of the controller goes to a file that the last test searches. */
    (void)snprintf(logpath, sizeof(logpath), "%s/controller.log", tmpdir);
    logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    log_set_fd(logfd);
    log_set_level(LOG_DEBUG);
    if (it_client_new(&co, &c, &e) < 0 || it_client_new(&mo, &mgr_client, &e) < 0)
        return -1;
    if (it_sandbox_ns_setup(c, &so, ns, sizeof(ns), &e) < 0 || create_fixtures() < 0)
        return -1;
    sbd_port = free_port();
    return 0;
}

static int group_teardown(void **state)
{
    char cmd[128];
    (void)state;
    ctrl_manager_free(mgr);
    kubelet_stop();
    if (c && ns[0])
        (void)it_ns_delete(c, ns, 120 * USEC_PER_SEC);
    kube_client_free(c);
    kube_client_free(mgr_client);
    log_set_fd(2);
    if (logfd >= 0)
        (void)close(logfd);
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        return -1;
    return 0;
}

/* ---- tests -------------------------------------------------------------------------- */

static usec_t claim_latency(const char *name, const char *pool, const char *plain)
{
    usec_t t0 = clock_now();
    json_t *cl;
    create_claim(name, pool, plain);
    cl = wait_claim(name, "True", NULL);
    json_decref(cl);
    return clock_now() - t0;
}

static void test_warm_claim_gets_env(void **state)
{
    json_t *cl, *sb;
    char *out, want[128];
    (void)state;
    kubelet_start();
    start_manager();
    create_template("lb", "ColdStart", sbd_port);
    create_pool("lb-pool", "lb", 2);
    wait_pool("lb-pool");
    create_claim("c1", "lb-pool", "one");
    cl = wait_claim("c1", "True", NULL);
    sb = bound(cl);
    assert_non_null(sb);
    /* Warm: an adopted pool member, not a Sandbox named after the claim. */
    assert_string_equal(kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE), "warm");
    assert_string_not_equal(kube_obj_name(sb), "c1");
    assert_non_null(kube_obj_annotation(sb, EXT_ANN_TOKEN_SECRET));
    out = run_env(sb);
    (void)snprintf(want, sizeof(want), "one|%s|fast\n", secret_value);
    assert_string_equal(out, want);
    xfree(out);
    json_decref(sb);
    json_decref(cl);
}

static void test_second_claim_own_values(void **state)
{
    json_t *c1, *c2, *s1, *s2;
    char *o1, *o2, want[128];
    (void)state;
    create_claim("c2", "lb-pool", "two");
    c2 = wait_claim("c2", "True", NULL);
    c1 = get(&API_RES_SANDBOXCLAIMS, "c1");
    s1 = bound(c1);
    s2 = bound(c2);
    assert_string_not_equal(kube_obj_name(s1), kube_obj_name(s2));
    assert_string_equal(kube_obj_label(s2, SB_LABEL_LAUNCH_TYPE), "warm");
    o1 = run_env(s1);
    o2 = run_env(s2);
    (void)snprintf(want, sizeof(want), "one|%s|fast\n", secret_value);
    assert_string_equal(o1, want);
    (void)snprintf(want, sizeof(want), "two|%s|fast\n", secret_value);
    assert_string_equal(o2, want);
    xfree(o1);
    xfree(o2);
    json_decref(s1);
    json_decref(s2);
    json_decref(c1);
    json_decref(c2);
}

/* A late-bound member whose create was carried out but whose answer was lost is read
 * back and gets its config-token Secret as if the create had answered: a claim adopts it
 * warm and its env arrives through the token. */
static void test_create_answer_lost(void **state)
{
    json_t *cl, *sb;
    char *out, want[128], in_ns[128];
    (void)state;
    wait_pool("lb-pool"); /* its refill done: the lost answer is lb-lost's create */
    (void)snprintf(in_ns, sizeof(in_ns), "/namespaces/%s/sandboxes", ns);
    assert_int_equal(it_lose_answers("POST", &API_RES_SANDBOXES, in_ns, 1), 0);
    create_pool("lb-lost", "lb", 1);
    wait_pool("lb-lost");
    assert_int_equal(it_answers_lost(), 1);
    create_claim("c-lost", "lb-lost", "lost");
    cl = wait_claim("c-lost", "True", NULL);
    sb = bound(cl);
    assert_non_null(sb);
    assert_string_equal(kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE), "warm");
    assert_true(strncmp(kube_obj_name(sb), "lb-lost-", 8) == 0);
    out = run_env(sb);
    (void)snprintf(want, sizeof(want), "lost|%s|fast\n", secret_value);
    assert_string_equal(out, want);
    xfree(out);
    json_decref(sb);
    json_decref(cl);
    (void)kube_delete(c, &API_RES_SANDBOXCLAIMS, ns, "c-lost", NULL);
    (void)kube_delete(c, &API_RES_SANDBOXWARMPOOLS, ns, "lb-lost", NULL);
}

/* One Sandbox's config token does not open another's config endpoint. */
static void test_tokens_are_per_sandbox(void **state)
{
    json_t *c1 = get(&API_RES_SANDBOXCLAIMS, "c1"), *c2 = get(&API_RES_SANDBOXCLAIMS, "c2");
    json_t *s1 = bound(c1), *s2 = bound(c2);
    char *t2 = secret_token(kube_obj_annotation(s2, EXT_ANN_TOKEN_SECRET));
    const char *ip1 = json_string_value(json_array_get(kube_obj_path(s1, "status.podIPs"), 0));
    const char *ip2 = json_string_value(json_array_get(kube_obj_path(s2, "status.podIPs"), 0));
    struct buf b;
    (void)state;
    assert_non_null(t2);
    buf_init(&b, 1u << 16);
    assert_int_equal(http("PUT", ip1, sbd_port, "/v1/config/env", t2, "{\"env\":{}}", &b), 401);
    assert_int_equal(http("GET", ip2, sbd_port, "/v1/config/env", t2, NULL, &b), 200);
    xfree(t2);
    buf_done(&b);
    json_decref(s1);
    json_decref(s2);
    json_decref(c1);
    json_decref(c2);
}

/* A filled pool "<tpl>-pool" of one, from a template tpl with onFailure on_failure whose
 * delivery port nothing listens on: every delivery fails. */
static void undeliverable_pool(const char *tpl, const char *on_failure)
{
    char pool[64];
    (void)snprintf(pool, sizeof(pool), "%s-pool", tpl);
    create_template(tpl, on_failure, free_port());
    create_pool(pool, tpl, 1);
    wait_pool(pool);
}

static void test_delivery_failure_cold_start(void **state)
{
    json_t *cl, *sb, *pod;
    char *text;
    (void)state;
    undeliverable_pool("lb-bad", "ColdStart");
    create_claim("c3", "lb-bad-pool", "three");
    cl = wait_claim("c3", "True", NULL);
    sb = bound(cl);
    assert_string_equal(kube_obj_name(sb), "c3");
    assert_string_equal(kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE), "cold");
    /* The cold Pod references the Secret key; it does not hold the value. */
    pod = get(&KUBE_RES_PODS, "c3");
    assert_non_null(pod);
    text = dump(pod);
    assert_non_null(strstr(text, "\"secretKeyRef\":{\"key\":\"api-key\",\"name\":\"creds\"}"));
    assert_null(strstr(text, secret_value));
    xfree(text);
    json_decref(pod);
    json_decref(sb);
    json_decref(cl);
}

static void test_delivery_failure_fail_policy(void **state)
{
    json_t *cl;
    const char *msg;
    (void)state;
    undeliverable_pool("lb-fail", "Fail");
    create_claim("c4", "lb-fail-pool", "four");
    cl = wait_claim("c4", "False", LB_R_DELIVERY_FAILED);
    msg = json_string_value(json_object_get(kube_obj_condition(cl, SB_COND_READY), "message"));
    assert_non_null(msg);
    assert_non_null(strstr(msg, "delivering to sandboxd"));
    assert_non_null(kube_obj_path_str(cl, "status.sandbox.name"));
    json_decref(cl);
}

/* Waits for claim to fail its delivery with a message that holds needle. */
static void delivery_failed_with(const char *claim, const char *needle)
{
    json_t *cl = wait_claim(claim, "False", LB_R_DELIVERY_FAILED);
    const char *msg =
        json_string_value(json_object_get(kube_obj_condition(cl, SB_COND_READY), "message"));
    assert_non_null(msg);
    assert_non_null(strstr(msg, needle));
    json_decref(cl);
}

/* Over sandboxd's limits the delivery fails before anything is sent or read: 1,025 env
 * entries (sandboxd takes 1,024), and values past 1 MiB together (two ConfigMaps' keys of
 * 600 KiB each). With onFailure Fail the claim says why. */
static void test_env_over_limits(void **state)
{
    json_t *env = json_array(), *cl, *cm;
    char *big = xmalloc(600 * 1024 + 1);
    (void)state;
    for (int i = 0; i < LIMIT_SBD_CONFIG_ENV_VARS + 1; i++) {
        char name[16];
        (void)snprintf(name, sizeof(name), "V%d", i);
        json_array_append_new(env, json_pack("{s:s, s:s}", "name", name, "value", "x"));
    }
    create_template("lb-many", "Fail", sbd_port);
    create_pool("lb-many-pool", "lb-many", 2);
    wait_pool("lb-many-pool");
    cl = it_claim_new("c-many", "lb-many-pool");
    json_object_set_new(json_object_get(cl, "spec"), "env", env);
    create_obj(&API_RES_SANDBOXCLAIMS, cl);
    delivery_failed_with("c-many", "1025 variables, sandboxd takes at most 1024");

    memset(big, 'b', 600 * 1024);
    big[600 * 1024] = '\0';
    for (int i = 1; i <= 2; i++) { /* a ConfigMap holds 1 MiB at most: one each */
        char name[8];
        (void)snprintf(name, sizeof(name), "big%d", i);
        cm = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                       "metadata", "name", name, "data", "k", big);
        create_obj(&KUBE_RES_CONFIGMAPS, cm);
    }
    cl = it_claim_new("c-big", "lb-many-pool");
    json_object_set_new(json_object_get(cl, "spec"), "env",
                        json_pack("[{s:s, s:{s:{s:s, s:s}}}, {s:s, s:{s:{s:s, s:s}}}]", "name",
                                  "B1", "valueFrom", "configMapKeyRef", "name", "big1", "key", "k",
                                  "name", "B2", "valueFrom", "configMapKeyRef", "name", "big2",
                                  "key", "k"));
    create_obj(&API_RES_SANDBOXCLAIMS, cl);
    delivery_failed_with("c-big", "more than 1048576 bytes of names and values");
    xfree(big);
}

static void test_latency(void **state)
{
    usec_t plain, late;
    (void)state;
    wait_pool("lb-pool");
    plain = claim_latency("p5", "lb-pool", NULL);
    wait_pool("lb-pool");
    late = claim_latency("c5", "lb-pool", "five");
    fprintf(stderr, "latebind: claim create->Ready: plain warm %.1f ms, late-bound warm %.1f ms\n",
            (double)plain / USEC_PER_MSEC, (double)late / USEC_PER_MSEC);
}

/* ---- a template switched to LateBound --------------------------------------------- */

struct members {
    const char *prefix; /* of the pool's members' names */
    const char *hash;   /* NULL, or the template hash label one member must carry */
    json_t *found;      /* set: the last member (not being deleted) seen */
};

/* Members of the pool (names with prefix) not being deleted; new list. */
static json_t *live_members(const char *prefix)
{
    json_t *list = NULL, *out = json_array();
    const json_t *sb;
    size_t i;
    if (kube_list_all(c, &API_RES_SANDBOXES, ns, NULL, &list, NULL) < 0)
        return out;
    json_array_foreach(json_object_get(list, "items"), i, sb)
    {
        const char *n = kube_obj_name(sb);
        if (n && strncmp(n, prefix, strlen(prefix)) == 0 && !kube_obj_deleting(sb))
            json_array_append(out, (json_t *)sb);
    }
    json_decref(list);
    return out;
}

/* One live member, and it has a config token. */
static bool one_tokened_member(void *ctx)
{
    struct members *m = ctx;
    json_t *l = live_members(m->prefix);
    bool ok = json_array_size(l) == 1 &&
              kube_obj_annotation(json_array_get(l, 0), EXT_ANN_TOKEN_SECRET) != NULL;
    if (ok) {
        json_decref(m->found);
        m->found = json_incref(json_array_get(l, 0));
    }
    json_decref(l);
    return ok;
}

/* A live member carries the template hash label m->hash. */
static bool member_with_hash(void *ctx)
{
    struct members *m = ctx;
    json_t *l = live_members(m->prefix);
    const json_t *sb;
    size_t i;
    bool ok = false;
    json_array_foreach(l, i, sb)
    {
        const char *h = kube_obj_label(sb, EXT_LABEL_TEMPLATE_HASH);
        ok = ok || (h && strcmp(h, m->hash) == 0);
    }
    json_decref(l);
    return ok;
}

static void patch_template(const char *name, json_t *spec)
{
    json_t *p = json_pack("{s:o}", "spec", spec);
    struct kube_err e;
    IT_OK(it_merge_patch(c, &API_RES_SANDBOXTEMPLATES, ns, name, NULL, p, &e), &e);
    json_decref(p);
}

/* A ColdStart template's pool (updateStrategy Recreate) is switched to LateBound: its
 * member without a config token is stale and replaced by one with a token, so an env
 * claim is served warm (with onFailure Fail a token-less member would fail it). A later
 * metadata-only edit of the template (a new fingerprint) does not replace the late-bound
 * member: it is compared with its template as built, token volume and all. */
static void test_switch_to_late_bound(void **state)
{
    struct members m = {.prefix = "lb-sw-pool-"};
    json_t *pool = it_pool_new("lb-sw-pool", "lb-sw", 1), *l, *m1, *cl, *sb, *tpl, *cur, *scale;
    char hash[SB_HASH_LEN + 1], *out, want[128];
    struct kube_err e;
    (void)state;
    create(&API_RES_SANDBOXTEMPLATES,
           "{\"apiVersion\":\"extensions.agents.x-k8s.io/v1beta1\",\"kind\":\"SandboxTemplate\","
           "\"metadata\":{\"name\":\"lb-sw\"},\"spec\":{\"envVarsInjectionPolicy\":\"Allowed\","
           "\"podTemplate\":{\"metadata\":{\"labels\":{\"tier\":\"gold\"}},\"spec\":"
           "{\"containers\":[{\"name\":\"sandbox\",\"image\":\"x\"}]}}}}");
    json_object_set_new(json_object_get(pool, "spec"), "updateStrategy",
                        json_pack("{s:s}", "type", "Recreate"));
    create_obj(&API_RES_SANDBOXWARMPOOLS, pool);
    wait_pool("lb-sw-pool");
    l = live_members(m.prefix);
    assert_int_equal(json_array_size(l), 1);
    assert_null(kube_obj_annotation(json_array_get(l, 0), EXT_ANN_TOKEN_SECRET));
    json_decref(l);

    patch_template("lb-sw", json_pack("{s:{s:s, s:s, s:i}}", "claimConfigDelivery", "mode",
                                      "LateBound", "onFailure", "Fail", "port", sbd_port));
    if (it_wait(one_tokened_member, &m, WAIT) < 0)
        fail_msg("the member without a config token was not replaced");
    wait_pool("lb-sw-pool");
    m1 = m.found;

    /* metadata only: a new fingerprint, the same pods */
    patch_template("lb-sw", json_pack("{s:{s:{s:{s:s}}}}", "podTemplate", "metadata", "labels",
                                      "tier", "silver"));
    tpl = get(&API_RES_SANDBOXTEMPLATES, "lb-sw");
    tpl_blueprint_hash(tpl, hash);
    json_decref(tpl);
    assert_string_not_equal(hash, kube_obj_label(m1, EXT_LABEL_TEMPLATE_HASH));
    /* a second member is built from the edited template: that pass judged m1 */
    scale = json_pack("{s:{s:i}}", "spec", "replicas", 2);
    IT_OK(it_merge_patch(c, &API_RES_SANDBOXWARMPOOLS, ns, "lb-sw-pool", NULL, scale, &e), &e);
    json_decref(scale);
    m.hash = hash;
    if (it_wait(member_with_hash, &m, WAIT) < 0)
        fail_msg("no member from the edited template");
    wait_pool("lb-sw-pool");
    cur = get(&API_RES_SANDBOXES, kube_obj_name(m1));
    if (!cur || kube_obj_deleting(cur) || strcmp(kube_obj_uid(cur), kube_obj_uid(m1)) != 0)
        fail_msg("the late-bound member was replaced after a metadata-only edit");
    json_decref(cur);

    create_claim("c-sw", "lb-sw-pool", "switched");
    cl = wait_claim("c-sw", "True", NULL);
    sb = bound(cl);
    assert_string_equal(kube_obj_label(sb, SB_LABEL_LAUNCH_TYPE), "warm");
    out = run_env(sb);
    (void)snprintf(want, sizeof(want), "switched|%s|fast\n", secret_value);
    assert_string_equal(out, want);
    xfree(out);
    json_decref(sb);
    json_decref(cl);
    json_decref(m1);
}

static bool dump_has(const struct kube_res *res, const char *needle)
{
    json_t *list = NULL;
    char *s;
    bool has;
    if (kube_list_all(c, res, ns, NULL, &list, NULL) < 0)
        fail_msg("list %s failed", res->plural);
    s = dump(list);
    has = strstr(s, needle) != NULL;
    xfree(s);
    json_decref(list);
    return has;
}

static void test_value_nowhere(void **state)
{
    const struct kube_res *res[] = {&API_RES_SANDBOXCLAIMS, &API_RES_SANDBOXES, &KUBE_RES_PODS,
                                    &KUBE_RES_EVENTS, &API_RES_SANDBOXWARMPOOLS};
    json_t *cl = get(&API_RES_SANDBOXCLAIMS, "c1"), *sb = bound(cl);
    const char *ip = json_string_value(json_array_get(kube_obj_path(sb, "status.podIPs"), 0));
    char chunk[4096];
    struct buf b, logs;
    ssize_t n;
    int fd;
    (void)state;
    for (size_t i = 0; i < sizeof(res) / sizeof(res[0]); i++)
        if (dump_has(res[i], secret_value))
            fail_msg("the secret value appears in %s", res[i]->plural);
    buf_init(&b, 1u << 16);
    assert_int_equal(http("GET", ip, sbd_port, "/v1/metadata", NULL, NULL, &b), 200);
    assert_null(strstr(buf_str(&b), secret_value));
    buf_done(&b);
    fd = open(logpath, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    buf_init(&logs, 256u * 1024 * 1024);
    while ((n = read(fd, chunk, sizeof(chunk))) > 0)
        assert_int_equal(buf_append(&logs, chunk, (size_t)n), 0);
    (void)close(fd);
    /* The controller did log the claims (so the search is not vacuous), never the value. */
    assert_non_null(strstr(buf_str(&logs), "c1"));
    assert_null(strstr(buf_str(&logs), secret_value));
    buf_done(&logs);
    json_decref(sb);
    json_decref(cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warm_claim_gets_env),
        cmocka_unit_test(test_second_claim_own_values),
        cmocka_unit_test(test_tokens_are_per_sandbox),
        cmocka_unit_test(test_create_answer_lost),
        cmocka_unit_test(test_delivery_failure_cold_start),
        cmocka_unit_test(test_delivery_failure_fail_policy),
        cmocka_unit_test(test_env_over_limits),
        cmocka_unit_test(test_latency),
        cmocka_unit_test(test_switch_to_late_bound),
        cmocka_unit_test(test_value_nowhere),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
