/* SPDX-License-Identifier: Apache-2.0 */
/* as-loadgen: runs one benchmark scenario against any agents.x-k8s.io v1beta1
 * implementation through the Kubernetes API and prints its results as JSON. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/str.h"
#include "kube/config.h"
#include "lg.h"

static void usage(FILE *f)
{
    fputs("Usage: as-loadgen --scenario warm-burst|claim-probe|sustained|cold|probe|scale|"
          "serve-pool --namespace NS [flags]\n"
          "  (serve-pool: fill a pool of --pool-size for another client, print \"ready\", keep\n"
          "  simulating the kubelet until SIGTERM/SIGINT or --seconds)\n"
          "  --kubeconfig PATH     (default: $KUBECONFIG, ~/.kube/config)\n"
          "  --count N             claims (warm-burst, claim-probe) or Sandboxes (cold, probe,\n"
          "                        scale) (100)\n"
          "  --pool-size N         warm pool replicas (default: count; claim-probe: 2;\n"
          "                        sustained: rate*10/pools)\n"
          "  --pools N             pools the sustained claims are spread over (1)\n"
          "  --rate R --seconds S --dwell D   sustained Poisson arrivals (50/s, 60 s, 5 s)\n"
          "  --threads N           concurrent creators (64)\n"
          "  --connections N       API clients the creators use (4)\n"
          "  --kubelet             simulate the kubelet (API server without nodes)\n"
          "  --kwok                place pods on kwok nodes (toleration and nodeSelector)\n"
          "  --image IMG           container image (registry.local/bench:1)\n"
          "  --controller-pid PID  sample the controller's RSS and CPU from /proc\n"
          "  --api-pids PID,...    kube-apiserver and etcd: their CPU per object from /proc\n"
          "  --timeout S           readiness wait (300) --settle S (2)\n"
          "  --keep                keep the namespace\n"
          "  --ns-wait S           wait up to S for the namespace to be gone (0)\n"
          "  --max-backlog N       sustained: stop arriving past N unready claims (rate*5)\n"
          "  --out FILE            write the JSON there (default stdout)\n"
          "  --records FILE        append each object's create, ack and ready times (ms from\n"
          "                        the first create) there as TSV\n",
          f);
}

static int num(const char *s, double *ret)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end)
        return -EINVAL;
    *ret = v;
    return 0;
}

static const struct option longopts[] = {{"kubeconfig", 1, 0, 'k'},
                                         {"namespace", 1, 0, 'n'},
                                         {"scenario", 1, 0, 's'},
                                         {"count", 1, 0, 'c'},
                                         {"pool-size", 1, 0, 'P'},
                                         {"pools", 1, 0, 'p'},
                                         {"rate", 1, 0, 'r'},
                                         {"seconds", 1, 0, 'S'},
                                         {"dwell", 1, 0, 'd'},
                                         {"threads", 1, 0, 't'},
                                         {"connections", 1, 0, 'C'},
                                         {"kubelet", 0, 0, 'K'},
                                         {"kwok", 0, 0, 'w'},
                                         {"image", 1, 0, 'i'},
                                         {"controller-pid", 1, 0, 'x'},
                                         {"timeout", 1, 0, 'T'},
                                         {"settle", 1, 0, 'e'},
                                         {"keep", 0, 0, 'E'},
                                         {"out", 1, 0, 'o'},
                                         {"help", 0, 0, 'h'},
                                         {"ns-wait", 1, 0, 'W'},
                                         {"max-backlog", 1, 0, 'B'},
                                         {"api-pids", 1, 0, 'A'},
                                         {"records", 1, 0, 'R'},
                                         {0, 0, 0, 0}};

static int set_num(struct lg_opts *o, int ch, double v)
{
    switch (ch) {
    case 'c':
        o->count = (long)v;
        break;
    case 'P':
        o->pool_size = (long)v;
        break;
    case 'p':
        o->pools = (long)v;
        break;
    case 'r':
        o->rate = v;
        break;
    case 'S':
        o->seconds = v;
        break;
    case 'd':
        o->dwell = v;
        break;
    case 't':
        o->threads = (int)v;
        break;
    case 'C':
        o->connections = (int)v;
        break;
    case 'x':
        o->controller_pid = (pid_t)v;
        break;
    case 'T':
        o->timeout = v;
        break;
    case 'e':
        o->settle = v;
        break;
    case 'W':
        o->ns_wait = v;
        break;
    case 'B':
        o->max_backlog = (long)v;
        break;
    default:
        return -EINVAL;
    }
    return v < 0 ? -EINVAL : 0;
}

static int parse(int argc, char **argv, struct lg_opts *o, const char **ret_out)
{
    int ch;
    double v;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'k':
            o->kubeconfig = optarg;
            break;
        case 'n':
            o->ns = optarg;
            break;
        case 's':
            o->scenario = optarg;
            break;
        case 'i':
            o->image = optarg;
            break;
        case 'o':
            *ret_out = optarg;
            break;
        case 'R':
            o->records = optarg;
            break;
        case 'K':
            o->kubelet = true;
            break;
        case 'w':
            o->kwok = true;
            break;
        case 'E':
            o->keep = true;
            break;
        case 'A':
            if (lg_api_pids_parse(o, optarg) < 0) {
                fprintf(stderr, "as-loadgen: bad --api-pids (PID[,PID...], at most %d): %s\n",
                        LG_MAX_API_PIDS, optarg);
                return -EINVAL;
            }
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case '?':
            return -EINVAL;
        default:
            if (num(optarg, &v) < 0 || set_num(o, ch, v) < 0) {
                fprintf(stderr, "as-loadgen: bad value for --%s: %s\n", argv[optind - 1], optarg);
                return -EINVAL;
            }
        }
    }
    if (!o->ns || !o->scenario || o->count < 1) {
        usage(stderr);
        return -EINVAL;
    }
    return 0;
}

static int dispatch(struct kube_client *c, const struct lg_opts *o, json_t *out)
{
    if (strcmp(o->scenario, "warm-burst") == 0)
        return lg_run_warm_burst(c, o, out);
    if (strcmp(o->scenario, "claim-probe") == 0)
        return lg_run_claim_probe(c, o, out);
    if (strcmp(o->scenario, "sustained") == 0)
        return lg_run_sustained(c, o, out);
    if (strcmp(o->scenario, "cold") == 0)
        return lg_run_cold(c, o, out);
    if (strcmp(o->scenario, "scale") == 0)
        return lg_run_scale(c, o, out);
    if (strcmp(o->scenario, "probe") == 0)
        return lg_run_probe(c, o, out);
    if (strcmp(o->scenario, "serve-pool") == 0)
        return lg_run_serve_pool(c, o, out);
    fprintf(stderr, "as-loadgen: unknown scenario %s\n", o->scenario);
    return -EINVAL;
}

static int client(const struct lg_opts *o, struct kube_client **ret)
{
    struct kube_config_opts co = {.kubeconfig = o->kubeconfig};
    struct kube_client_opts ko = {.qps = 0};
    struct kube_config *cfg = NULL;
    struct kube_err e;
    int r = kube_config_load(&co, &cfg, &e);
    if (r == 0)
        r = kube_client_new(cfg, &ko, ret);
    if (r < 0)
        fprintf(stderr, "as-loadgen: API client: %s\n", r == -EINVAL ? e.message : strerror(-r));
    return r;
}

/* The 1/5/15-minute load averages (the machine is shared: they qualify every figure). */
static json_t *loadavg(void)
{
    double v[3];
    if (getloadavg(v, 3) != 3)
        return json_null();
    return json_pack("[f, f, f]", v[0], v[1], v[2]);
}

static int run(const struct lg_opts *o, json_t *out)
{
    struct kube_client *c = NULL;
    struct lg_kubelet *k = NULL;
    int r;
    if ((r = client(o, &c)) < 0)
        return r;
    if ((r = lg_ns_ensure(c, o->ns)) < 0 ||
        (o->kubelet && (r = lg_kubelet_start(c, o->ns, 16, &k)) < 0))
        goto out;
    json_object_set_new(out, "loadavg_start", loadavg());
    r = dispatch(c, o, out);
    json_object_set_new(out, "loadavg_end", loadavg());
out:
    lg_kubelet_stop(k);
    if (!o->keep) {
        /* the cleanup's share of a whole run's API CPU (kube-controller-manager empties the
         * namespace; the controller is still running) */
        double cpu0 = lg_api_cpu(o);
        json_object_set_new(out, "ns_delete_s",
                            json_real(lg_ns_delete(c, o->ns, (usec_t)(o->ns_wait * 1e6))));
        lg_api_cpu_put(o, out, "ns_delete_cpu", cpu0, o->count, "object");
    }
    kube_client_free(c);
    return r;
}

int main(int argc, char **argv)
{
    struct lg_opts o = {.image = "registry.local/bench:1",
                        .prefix = "lg",
                        .count = 100,
                        .pools = 1,
                        .rate = 50,
                        .seconds = 60,
                        .dwell = 5,
                        .timeout = 300,
                        .threads = 64,
                        .connections = 4,
                        .settle = 2};
    const char *path = NULL;
    json_t *out = json_object();
    int r;
    log_set_component("loadgen");
    log_set_level(LOG_WARN);
    if (parse(argc, argv, &o, &path) < 0)
        return 2;
    json_object_set_new(out, "scenario", json_string(o.scenario));
    r = run(&o, out);
    json_object_set_new(out, "ok", json_boolean(r == 0));
    if (r < 0)
        json_object_set_new(out, "error", json_string(strerror(-r)));
    if (path ? json_dump_file(out, path, JSON_INDENT(1) | JSON_SORT_KEYS) < 0
             : json_dumpf(out, stdout, JSON_INDENT(1) | JSON_SORT_KEYS) < 0)
        r = -EIO;
    if (!path)
        putchar('\n');
    json_decref(out);
    return r < 0 ? 1 : 0;
}
