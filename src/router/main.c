/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox-router: flags, signals and the router's lifecycle. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/sandbox.h"
#include "as_version.h"
#include "common/fdlimit.h"
#include "common/flag.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "kube/client.h"
#include "kube/config.h"
#include "router/resume_gate.h"
#include "router/router.h"
#include "tls/metrics_auth.h"
#include "tls/tls_front.h"

#define MAX_AUDIENCES 16

struct flags {
    struct router_opts o;
    const char *kubeconfig;
    char host[64], probe_host[64];
    const char *audiences[MAX_AUDIENCES + 1];
    char *aud_copy;
    struct tls_front_opts tls; /* --https-bind-address and friends */
    char tls_host[64];
    bool tls_on, mtls_set;
    bool cert_auth, cert_auth_set; /* --client-cert-auth */
    /* --metrics-secure: /metrics needs a reviewed token; HTTPS on metrics_host:port */
    bool metrics_secure;
    char metrics_host[64];
    uint16_t metrics_port;
    const char *metrics_cert_dir, *metrics_cert_name, *metrics_key_name;
};

static const char usage_text[] =
    "Usage: sandbox-router [flags]\n"
    "Authenticated HTTP/WebSocket reverse proxy to Sandboxes (" SB_API_VERSION ").\n\n"
    "Flags (--name=value or --name value):\n"
    "  --http-bind-address ADDR:PORT     proxy listener (default 0.0.0.0:8080)\n"
    "  --health-probe-bind-address A:P   /healthz /readyz /metrics (default 0.0.0.0:8081)\n"
    "  --https-bind-address ADDR:PORT    also serve the proxy over TLS here (default off);\n"
    "                                    needs --tls-cert-file and --tls-key-file\n"
    "  --tls-cert-file PATH              PEM certificate chain (reloaded when it changes)\n"
    "  --tls-key-file PATH               PEM private key (reloaded when it changes)\n"
    "  --tls-client-ca-file PATH         PEM CA bundle that signs client certificates\n"
    "                                    (reloaded when it changes)\n"
    "  --mtls-mode MODE                  off, optional or required (default: required\n"
    "                                    with --tls-client-ca-file, else off)\n"
    "  --client-cert-auth[=BOOL]         a request without a bearer token is authorized\n"
    "                                    as its client certificate's subject (CN user, O\n"
    "                                    groups; a SubjectAccessReview, no TokenReview);\n"
    "                                    a token wins (default: true with\n"
    "                                    --tls-client-ca-file, else false)\n"
    "  --metrics-secure[=BOOL]           /metrics only to bearer tokens that pass a\n"
    "                                    TokenReview and a SubjectAccessReview (get on\n"
    "                                    /metrics), also over HTTPS on\n"
    "                                    --metrics-bind-address (default false)\n"
    "  --metrics-bind-address ADDR:PORT  the HTTPS metrics listener (default 0.0.0.0:9090)\n"
    "  --metrics-cert-path DIR           its certificate directory (default: self-signed)\n"
    "  --metrics-cert-name NAME, --metrics-cert-key NAME  files in DIR (tls.crt, tls.key)\n"
    "  --kubeconfig PATH                 kubeconfig (default: $KUBECONFIG, ~/.kube/config,\n"
    "                                    else in-cluster)\n"
    "  --namespace NS                    serve Sandboxes of one namespace (default: all)\n"
    "  --auth MODE                       tokenreview (default) or none (no authentication:\n"
    "                                    anyone who reaches the router reaches every sandbox)\n"
    "  --authz-verb VERB                 SubjectAccessReview verb on the Sandbox (default get)\n"
    "  --authz-subresource NAME          SubjectAccessReview subresource (default none)\n"
    "  --authz-audiences A,B             TokenReview audiences; the review must name one\n"
    "                                    (default: the API server's, not checked)\n"
    "  --authz-cache-ttl D               review cache TTL (default 30s)\n"
    "  --trust-loopback BOOL             a request from a loopback peer without an\n"
    "                                    Authorization header skips the review (default\n"
    "                                    true: in a pod only a port-forward, which needs\n"
    "                                    pods/portforward on the router pod, comes from\n"
    "                                    loopback; set false when the router runs on a\n"
    "                                    shared host)\n"
    "  --connect-timeout D               upstream connect (default 5s)\n"
    "  --idle-timeout D                  no byte either way during a request (default 60s)\n"
    "  --proxy-timeout D                 one request; caps X-Sandbox-Timeout (default 180s)\n"
    "  --tunnel-idle-timeout D           upgraded connections (default 3600s)\n"
    "  --max-tunnels N                   upgraded connections open or being set up at\n"
    "                                    once, two descriptors each; an upgrade past it\n"
    "                                    gets 503 (default 4096, at most 1000000)\n"
    "  --start-hold D                    a request to a Sandbox that is starting (no Ready\n"
    "                                    condition yet, or its pod not Ready yet) waits up\n"
    "                                    to D for it to be Ready, then gets 503; one not\n"
    "                                    Ready for longer than D waits 2s (default 30s;\n"
    "                                    0: 503 at once)\n"
    "  --shutdown-timeout D              drain budget on SIGTERM (default 30s)\n"
    "  --access-log BOOL                 one logfmt line per request (default true)\n"
    "  --allow-loopback-upstreams        UNSAFE, tests only: allow 127.0.0.0/8 and ::1 pod IPs\n"
    "  Durations: seconds (30, 0.5) or Go syntax (500ms, 1m30s); more than 0, at most\n"
    "  10000000 seconds.\n"
    "  --log-level LEVEL                 error, warn, info, debug, trace (default info)\n"
    "  --log-format FORMAT               text (logfmt, default) or json (JSON lines)\n"
    "  --version, --help\n";

enum {
    F_HTTP = FLAG_OWN,
    F_PROBE,
    F_KUBECONFIG,
    F_NS,
    F_AUTH,
    F_VERB,
    F_SUBRES,
    F_AUD,
    F_TTL,
    F_CONNECT,
    F_IDLE,
    F_PROXY,
    F_TUNNEL,
    F_MAX_TUNNELS,
    F_START_HOLD,
    F_SHUTDOWN,
    F_ACCESS,
    F_TRUST_LOOPBACK,
    F_LOOPBACK,
    F_HTTPS,
    F_TLS_CERT,
    F_TLS_KEY,
    F_TLS_CA,
    F_MTLS,
    F_CERT_AUTH,
    F_METRICS_SECURE,
    F_METRICS_ADDR,
    F_METRICS_CERT_PATH,
    F_METRICS_CERT_NAME,
    F_METRICS_CERT_KEY,
};

static const struct option long_opts[] = {
    {"http-bind-address", required_argument, NULL, F_HTTP},
    {"health-probe-bind-address", required_argument, NULL, F_PROBE},
    {"kubeconfig", required_argument, NULL, F_KUBECONFIG},
    {"namespace", required_argument, NULL, F_NS},
    {"auth", required_argument, NULL, F_AUTH},
    {"authz-verb", required_argument, NULL, F_VERB},
    {"authz-subresource", required_argument, NULL, F_SUBRES},
    {"authz-audiences", required_argument, NULL, F_AUD},
    {"authz-cache-ttl", required_argument, NULL, F_TTL},
    {"connect-timeout", required_argument, NULL, F_CONNECT},
    {"idle-timeout", required_argument, NULL, F_IDLE},
    {"proxy-timeout", required_argument, NULL, F_PROXY},
    {"tunnel-idle-timeout", required_argument, NULL, F_TUNNEL},
    {"max-tunnels", required_argument, NULL, F_MAX_TUNNELS},
    {"start-hold", required_argument, NULL, F_START_HOLD},
    {"shutdown-timeout", required_argument, NULL, F_SHUTDOWN},
    {"access-log", required_argument, NULL, F_ACCESS},
    {"trust-loopback", required_argument, NULL, F_TRUST_LOOPBACK},
    {"allow-loopback-upstreams", no_argument, NULL, F_LOOPBACK},
    {"https-bind-address", required_argument, NULL, F_HTTPS},
    {"tls-cert-file", required_argument, NULL, F_TLS_CERT},
    {"tls-key-file", required_argument, NULL, F_TLS_KEY},
    {"tls-client-ca-file", required_argument, NULL, F_TLS_CA},
    {"mtls-mode", required_argument, NULL, F_MTLS},
    {"client-cert-auth", optional_argument, NULL, F_CERT_AUTH},
    {"metrics-secure", optional_argument, NULL, F_METRICS_SECURE},
    {"metrics-bind-address", required_argument, NULL, F_METRICS_ADDR},
    {"metrics-cert-path", required_argument, NULL, F_METRICS_CERT_PATH},
    {"metrics-cert-name", required_argument, NULL, F_METRICS_CERT_NAME},
    {"metrics-cert-key", required_argument, NULL, F_METRICS_CERT_KEY},
    FLAG_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* A timeout: seconds or a Go duration (common/duration.h), > 0 and <= 10^7 s. */
static int parse_secs(const char *v, usec_t *ret)
{
    return flag_duration_secs(v, 1, 10000000 * USEC_PER_SEC, ret);
}

/* --max-tunnels: 1 to 1,000,000. */
static int parse_max_tunnels(const char *v, size_t *ret)
{
    uint64_t n;
    if (cstr_to_u64(v, &n) < 0 || n < 1 || n > 1000000)
        return -EINVAL;
    *ret = (size_t)n;
    return 0;
}

/* --start-hold: a duration as parse_secs, or 0 for none. */
static int parse_start_hold(const char *v, usec_t *ret)
{
    int rc = flag_duration_secs(v, 0, 10000000 * USEC_PER_SEC, ret);
    if (rc == 0 && *ret == 0)
        *ret = RESUME_START_OFF;
    return rc;
}

/* "host:port" or ":port" (all addresses); IPv6 as "[::]:port". */
static int parse_addr(const char *v, char *host, size_t size, uint16_t *port)
{
    const char *colon = strrchr(v, ':');
    uint64_t p;
    if (!colon || cstr_to_u64(colon + 1, &p) < 0 || p > 65535)
        return -EINVAL;
    struct str h = str_make(v, (size_t)(colon - v));
    if (h.len >= 2 && h.p[0] == '[' && h.p[h.len - 1] == ']')
        h = str_make(h.p + 1, h.len - 2);
    if (h.len == 0)
        h = STR_LIT("0.0.0.0");
    if (h.len >= size)
        return -EINVAL;
    memcpy(host, h.p, h.len);
    host[h.len] = '\0';
    *port = (uint16_t)p;
    return 0;
}

static int split_audiences(struct flags *f, const char *v)
{
    xfree(f->aud_copy);
    f->aud_copy = xstrdup(v);
    size_t n = 0;
    for (char *tok = f->aud_copy; tok && *tok;) {
        char *comma = strchr(tok, ',');
        if (comma)
            *comma = '\0';
        if (n == MAX_AUDIENCES)
            return -E2BIG;
        if (*tok)
            f->audiences[n++] = tok;
        tok = comma ? comma + 1 : NULL;
    }
    f->audiences[n] = NULL;
    f->o.audiences = f->audiences;
    return 0;
}

static int apply_auth(struct flags *f, const char *v)
{
    if (strcmp(v, "tokenreview") == 0)
        f->o.auth = true;
    else if (strcmp(v, "none") == 0)
        f->o.auth = false;
    else
        return -EINVAL;
    return 0;
}

/* Applies one flag (flag_apply_fn; ctx is the struct flags). Returns 0 or -errno. */
static int apply_flag(void *ctx, int c, const char *v)
{
    struct flags *f = ctx;
    switch (c) {
    case F_HTTP:
        return parse_addr(v, f->host, sizeof(f->host), &f->o.port);
    case F_PROBE:
        return parse_addr(v, f->probe_host, sizeof(f->probe_host), &f->o.probe_port);
    case F_KUBECONFIG:
        f->kubeconfig = v;
        return 0;
    case F_NS:
        f->o.ns = v;
        return 0;
    case F_AUTH:
        return apply_auth(f, v);
    case F_VERB:
        f->o.authz_verb = v;
        return 0;
    case F_SUBRES:
        f->o.authz_subresource = v;
        return 0;
    case F_AUD:
        return split_audiences(f, v);
    case F_TTL:
        return parse_secs(v, &f->o.auth_ttl);
    case F_CONNECT:
        return parse_secs(v, &f->o.connect_timeout);
    case F_IDLE:
        return parse_secs(v, &f->o.idle_timeout);
    case F_PROXY:
        return parse_secs(v, &f->o.proxy_timeout);
    case F_TUNNEL:
        return parse_secs(v, &f->o.tunnel_idle);
    case F_MAX_TUNNELS:
        return parse_max_tunnels(v, &f->o.max_tunnels);
    case F_START_HOLD:
        return parse_start_hold(v, &f->o.start_hold);
    case F_SHUTDOWN:
        return parse_secs(v, &f->o.shutdown_grace);
    case F_ACCESS:
        return flag_bool(v, &f->o.access_log);
    case F_TRUST_LOOPBACK:
        return flag_bool(v, &f->o.trust_loopback);
    case F_LOOPBACK:
        return flag_bool(v, &f->o.allow_loopback);
    case F_HTTPS:
        f->tls_on = true;
        return parse_addr(v, f->tls_host, sizeof(f->tls_host), &f->tls.port);
    case F_TLS_CERT:
        f->tls.cert_file = v;
        return 0;
    case F_TLS_KEY:
        f->tls.key_file = v;
        return 0;
    case F_TLS_CA:
        f->tls.client_ca = v;
        return 0;
    case F_MTLS:
        f->mtls_set = true;
        return tls_mtls_parse(v, &f->tls.mtls);
    case F_CERT_AUTH:
        f->cert_auth_set = true;
        f->cert_auth = true;
        return v ? cstr_to_bool(v, &f->cert_auth) : 0;
    case F_METRICS_SECURE:
        return flag_bool(v, &f->metrics_secure);
    case F_METRICS_ADDR:
        return parse_addr(v, f->metrics_host, sizeof(f->metrics_host), &f->metrics_port);
    case F_METRICS_CERT_PATH:
        f->metrics_cert_dir = v;
        return 0;
    case F_METRICS_CERT_NAME:
        f->metrics_cert_name = v;
        return 0;
    case F_METRICS_CERT_KEY:
        f->metrics_key_name = v;
        return 0;
    default:
        return -EINVAL;
    }
}

/* --client-cert-auth: its default (on with a client CA and mTLS) and its needs. Returns
 * what is wrong, or NULL. */
static const char *check_cert_auth(struct flags *f)
{
    bool mtls = f->tls.client_ca && f->tls.mtls != TLS_MTLS_OFF;
    if (f->cert_auth_set && f->cert_auth && !f->tls.client_ca)
        return "--client-cert-auth needs --tls-client-ca-file";
    if (f->cert_auth_set && f->cert_auth && !mtls)
        return "--client-cert-auth needs --mtls-mode optional or required";
    if (!f->cert_auth_set)
        f->cert_auth = mtls;
    /* --auth=none: nothing is authorized, so no identity is taken either. */
    f->o.client_cert_auth = f->cert_auth && f->o.auth;
    f->tls.client_identity = f->o.client_cert_auth;
    return NULL;
}

static int check_tls_flags(struct flags *f)
{
    const char *bad = NULL;
    if (!f->mtls_set && f->tls.client_ca)
        f->tls.mtls = TLS_MTLS_REQUIRED;
    f->tls.host = f->tls_host;
    if (!f->tls_on && (f->tls.cert_file || f->tls.key_file || f->tls.client_ca || f->mtls_set ||
                       f->cert_auth_set))
        bad = "the TLS flags need --https-bind-address";
    else if (f->tls_on && (!f->tls.cert_file || !f->tls.key_file))
        bad = "--https-bind-address needs --tls-cert-file and --tls-key-file";
    else if (f->tls.mtls != TLS_MTLS_OFF && !f->tls.client_ca)
        bad = "--mtls-mode other than off needs --tls-client-ca-file";
    else
        bad = check_cert_auth(f);
    if (!bad)
        return 0;
    fprintf(stderr, "sandbox-router: %s\n", bad);
    return -EINVAL;
}

/* Returns 0 to run, 1 when --help or --version printed, or -EINVAL (reported). */
static int parse_flags(int argc, char **argv, struct flags *f)
{
    const struct flag_spec spec = {.prog = "sandbox-router",
                                   .version = AS_VERSION,
                                   .usage = usage_text,
                                   .opts = long_opts,
                                   .apply = apply_flag,
                                   .ctx = f};
    int r = flag_parse(&spec, argc, argv);
    return r != 0 ? r : check_tls_flags(f);
}

static void warn_unsafe(const struct flags *f)
{
    if (!f->o.auth)
        log_warn("AUTHENTICATION DISABLED (--auth=none): anyone who can reach this router "
                 "can reach every Sandbox it serves");
    if (f->o.allow_loopback)
        log_warn("UNSAFE --allow-loopback-upstreams: loopback pod IPs are dialled (tests only)");
}

/* --metrics-secure: the HTTPS metrics listener in front of the probe server (a
 * self-signed certificate's directory into *ret_dir). */
static int start_secure_metrics(struct flags *f, struct router *r, struct tls_front **ret,
                                char **ret_dir)
{
    struct tls_metrics_opts to = {.cn = "sandbox-router-metrics",
                                  .cert_dir = f->metrics_cert_dir,
                                  .cert_name = f->metrics_cert_name,
                                  .key_name = f->metrics_key_name,
                                  .host = f->metrics_host,
                                  .port = f->metrics_port};
    return tls_metrics_start(&to, router_probe_server(r), ret, ret_dir);
}

/* The teardown, on the error path of the start-up and after a signal: the listeners,
 * then the reviews in flight post their verdicts while the probe server still runs (a
 * scrape from then on is answered 503), then the servers stop, then the checker goes. */
static void stop_all(struct flags *f, struct router *r, struct tls_front *tls,
                     struct tls_front *mtls, char *mdir)
{
    tls_front_stop(tls);
    tls_front_stop(mtls);
    metrics_auth_stop(f->o.metrics_auth);
    router_stop(r);
    metrics_auth_free(f->o.metrics_auth);
    tls_self_signed_remove(mdir);
}

static int run(struct flags *f, struct kube_client *client)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    (void)pthread_sigmask(SIG_BLOCK, &set, NULL);
    (void)signal(SIGPIPE, SIG_IGN);
    f->o.client = client;
    struct router *r;
    struct tls_front *tls = NULL, *mtls = NULL;
    char *mdir = NULL;
    f->o.metrics_auth = f->metrics_secure ? metrics_auth_new(client) : NULL;
    int rc = router_start(&f->o, &r);
    if (rc < 0) {
        metrics_auth_free(f->o.metrics_auth);
        return log_error_errno(rc, "starting the router failed");
    }
    if (f->tls_on && (rc = tls_front_start(&f->tls, router_http_server(r), &tls)) < 0)
        (void)log_error_errno(rc, "starting the HTTPS listener failed");
    if (rc >= 0 && f->metrics_secure)
        rc = start_secure_metrics(f, r, &mtls, &mdir);
    if (rc < 0) {
        stop_all(f, r, tls, mtls, mdir);
        return rc;
    }
    if (tls)
        log_info("serving https\tport=%u mtls=%s client_cert_auth=%s", tls_front_port(tls),
                 f->tls.mtls == TLS_MTLS_REQUIRED   ? "required"
                 : f->tls.mtls == TLS_MTLS_OPTIONAL ? "optional"
                                                    : "off",
                 f->o.client_cert_auth ? "true" : "false");
    log_info("serving\tport=%u probe_port=%u auth=%s trust_loopback=%s", router_port(r),
             router_probe_port(r), f->o.auth ? "tokenreview" : "none",
             f->o.auth && f->o.trust_loopback ? "true" : "false");
    int sig = 0;
    (void)sigwait(&set, &sig);
    log_info("signal received, draining\tsignal=%d", sig);
    stop_all(f, r, tls, mtls, mdir);
    return 0;
}

int main(int argc, char **argv)
{
    struct flags f = {.o = {.auth = true,
                            .trust_loopback = true,
                            .access_log = true,
                            .port = 8080,
                            .probe_port = 8081}};
    log_set_component("sandbox-router");
    (void)str_copy(f.host, sizeof(f.host), "0.0.0.0");
    (void)str_copy(f.probe_host, sizeof(f.probe_host), "0.0.0.0");
    (void)str_copy(f.metrics_host, sizeof(f.metrics_host), "0.0.0.0");
    f.metrics_port = 9090;
    int rc = parse_flags(argc, argv, &f);
    if (rc != 0) {
        xfree(f.aud_copy);
        return rc > 0 ? 0 : 2;
    }
    f.o.host = f.host;
    f.o.probe_host = f.probe_host;
    warn_unsafe(&f);
    /* two descriptors per proxied connection, 4096 connections: past a soft limit of 1024 */
    if ((rc = fdlimit_raise(LIMIT_FDS_WANTED, NULL)) < 0)
        log_warn_errno(rc, "cannot raise the open-file limit");
    struct kube_config_opts co = {.kubeconfig = f.kubeconfig};
    struct kube_config *cfg;
    struct kube_client *client;
    struct kube_err e;
    rc = kube_config_load(&co, &cfg, &e);
    if (rc < 0) {
        log_error("loading the Kubernetes configuration failed\terr=\"%s\"", e.message);
        xfree(f.aud_copy);
        return 1;
    }
    rc = kube_client_new(cfg, NULL, &client);
    if (rc >= 0) {
        rc = run(&f, client);
        kube_client_free(client);
    }
    xfree(f.aud_copy);
    return rc < 0 ? 1 : 0;
}
