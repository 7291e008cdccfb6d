/* SPDX-License-Identifier: Apache-2.0 */
/* Leader election against the real kube-apiserver: two candidates on one Lease, exactly
 * one leads, and when the leader stops it releases the Lease so the other takes over at
 * its next retry instead of waiting for the lease (two minutes there) to expire.
 *
 * API server outages (SIGSTOP of kube-apiserver, so every request hangs): a 5 s one with
 * the default timings (15 s / 10 s / 2 s) keeps the leader; one longer than the lease
 * duration makes the leader stop before its lease can expire for the other candidate,
 * and afterwards exactly one leads. They pause a PRIVATE API server only: the one of
 * $AS_APISERVER_DIR when that is not the shared default, else one this test starts
 * (hack/apiserver.sh with its own state dir and ports) and stops again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/str.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/lease.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "support/apiserver.h"
#include "support/kube_fixture.h"

#define WAIT  (60 * USEC_PER_SEC)
#define LEASE "it-leader"

static struct kube_client *client;
static char ns[64];

static int setup(void **state)
{
    (void)state;
    it_fixture_setup("it-lease", NULL, &client, ns, sizeof(ns));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    it_fixture_teardown(client, ns, NULL);
    return 0;
}

struct candidate {
    const char *id;
    struct lease_elector *le;
    atomic_int started, stopped;
    _Atomic usec_t stopped_at; /* monotonic time of the last stopped_leading */
};

static void started(void *ctx)
{
    struct candidate *c = ctx;
    atomic_fetch_add(&c->started, 1);
}

static void stopped(void *ctx)
{
    struct candidate *c = ctx;
    atomic_store(&c->stopped_at, clock_now());
    atomic_fetch_add(&c->stopped, 1);
}

/* Timings of one election; 0 = the kube/lease.h defaults (15 s, 10 s, 2 s). */
struct timings {
    usec_t lease, renew, retry;
};

static void candidate_start_on(struct candidate *c, struct kube_client *kc, const char *lease_ns,
                               const char *lease, const struct timings *t)
{
    struct lease_opts o = {
        .ns = lease_ns,
        .name = lease,
        .identity = c->id,
        .lease_duration = t->lease,
        .renew_deadline = t->renew,
        .retry_period = t->retry,
        .cb = {.ctx = c, .started_leading = started, .stopped_leading = stopped},
    };
    lease_api_kube(kc, &o.api);
    assert_int_equal(lease_elector_new(&o, &c->le), 0);
    assert_int_equal(lease_elector_start(c->le), 0);
}

/* A lease of two minutes: a follower that took over within 30 s did not wait for it to
 * expire. */
static void candidate_start(struct candidate *c)
{
    static const struct timings t = {120 * USEC_PER_SEC, 60 * USEC_PER_SEC, 250 * USEC_PER_MSEC};
    candidate_start_on(c, client, ns, LEASE, &t);
}

struct pair {
    struct candidate *a, *b;
};

/* Exactly one leads and the other has seen it. */
static bool one_leader(void *ctx)
{
    struct pair *p = ctx;
    bool la = lease_elector_is_leader(p->a->le), lb = lease_elector_is_leader(p->b->le);
    if (la == lb)
        return false;
    struct candidate *follower = la ? p->b : p->a, *leader = la ? p->a : p->b;
    char seen[64];
    return lease_elector_leader(follower->le, seen, sizeof(seen)) == 0 &&
           strcmp(seen, leader->id) == 0;
}

static bool leads(void *ctx)
{
    struct candidate *c = ctx;
    return lease_elector_is_leader(c->le);
}

static void assert_holder(const char *want)
{
    struct kube_err err;
    json_t *lease = NULL;
    IT_OK(kube_get(client, &KUBE_RES_LEASES, ns, LEASE, &lease, &err), &err);
    const char *holder = kube_obj_path_str(lease, "spec.holderIdentity");
    assert_string_equal(holder ? holder : "", want);
    json_decref(lease);
}

static void test_handover_on_release(void **state)
{
    struct candidate a = {.id = "candidate-a"}, b = {.id = "candidate-b"};
    struct pair p = {&a, &b};
    (void)state;

    candidate_start(&a);
    candidate_start(&b);
    assert_int_equal(it_wait(one_leader, &p, WAIT), 0);
    struct candidate *leader = lease_elector_is_leader(a.le) ? &a : &b;
    struct candidate *follower = leader == &a ? &b : &a;
    assert_holder(leader->id);

    /* Several retry periods later the follower still follows: the leader renews. */
    clock_sleep(USEC_PER_SEC);
    assert_true(lease_elector_is_leader(leader->le));
    assert_false(lease_elector_is_leader(follower->le));

    usec_t t0 = clock_now();
    lease_elector_stop(leader->le);
    assert_int_equal(atomic_load(&leader->stopped), 1);
    int waited = it_wait(leads, follower, WAIT);
    usec_t handover = clock_now() - t0;
    print_message("hand-over took %llu ms\n", (unsigned long long)(handover / USEC_PER_MSEC));
    /* Waiting for the lease to expire would take two minutes (the 60 s wait gives up
     * first); a released one is taken at the follower's next retry, and 30 s is only
     * passed by a hang. */
    if (waited != 0 || handover > 30 * USEC_PER_SEC)
        fail_msg("no hand-over after %llu ms: the lease was not released",
                 (unsigned long long)(handover / USEC_PER_MSEC));
    assert_holder(follower->id);
    assert_int_equal(atomic_load(&follower->started), 1);

    /* The last one out leaves the Lease free. */
    lease_elector_stop(follower->le);
    assert_holder("");
    assert_int_equal(atomic_load(&leader->started), 1);
    lease_elector_free(a.le);
    lease_elector_free(b.le);
}

/* ---- outages of a private API server ------------------------------------------------ */

static struct {
    char dir[512];
    bool ours; /* started here: stopped (and purged) at the end */
    struct kube_client *c;
    pid_t apiserver;
    bool paused;
} priv;

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* AS_APISERVER_DIR when it names a private server (not the shared .cache/apiserver). */
static bool env_private_dir(void)
{
    const char *dir = getenv("AS_APISERVER_DIR");
    size_t n = dir ? strlen(dir) : 0, k = strlen("/.cache/apiserver");
    if (n == 0 || (n >= k && strcmp(dir + n - k, "/.cache/apiserver") == 0))
        return false;
    return str_copy(priv.dir, sizeof(priv.dir), dir) == 0;
}

static int apiserver_cmd(const char *verb)
{
    char cmd[2048];
    (void)snprintf(cmd, sizeof(cmd),
                   "AS_APISERVER_DIR='%s' AS_APISERVER_PORT=26443 AS_ETCD_PORT=22379 "
                   "AS_APISERVER_CONTROLLERS=none '%s/hack/apiserver.sh' %s >/dev/null",
                   priv.dir, env_or("AS_SOURCE_DIR", "."), verb);
    return system(cmd);
}

static pid_t read_pid(void)
{
    char path[600];
    long pid = 0;
    (void)snprintf(path, sizeof(path), "%s/kube-apiserver.pid", priv.dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld", &pid) != 1)
        pid = -1;
    (void)fclose(f);
    return (pid_t)pid;
}

static int private_setup(void **state)
{
    struct kube_config_opts co = {0};
    struct kube_config *cfg = NULL;
    struct kube_err e;
    char kc[600];
    (void)state;
    if (!env_private_dir()) {
        (void)snprintf(priv.dir, sizeof(priv.dir), "%s/it-lease-apiserver",
                       env_or("AS_BIN_DIR", "/tmp"));
        priv.ours = true;
        if (apiserver_cmd("start") != 0) {
            fprintf(stderr, "cannot start a private API server in %s\n", priv.dir);
            return -1;
        }
    }
    priv.apiserver = read_pid();
    (void)snprintf(kc, sizeof(kc), "%s/kubeconfig", priv.dir);
    co.kubeconfig = kc;
    if (priv.apiserver <= 0 || kube_config_load(&co, &cfg, &e) < 0 ||
        kube_client_new(cfg, NULL, &priv.c) < 0) {
        fprintf(stderr, "private API server in %s: no pid or kubeconfig\n", priv.dir);
        return -1;
    }
    printf("# private kube-apiserver pid %d (%s)\n", (int)priv.apiserver, priv.dir);
    return 0;
}

static void api_pause(bool stop)
{
    assert_int_equal(kill(priv.apiserver, stop ? SIGSTOP : SIGCONT), 0);
    priv.paused = stop;
}

static int private_teardown(void **state)
{
    (void)state;
    if (priv.paused)
        (void)kill(priv.apiserver, SIGCONT);
    kube_client_free(priv.c);
    if (priv.ours)
        (void)apiserver_cmd("stop --purge");
    return 0;
}

/* What watching two candidates for a while showed. */
struct watch {
    int overlaps;         /* samples where both led */
    usec_t leader_lost;   /* first sample where the watched leader did not lead, or 0 */
    usec_t follower_lead; /* first sample where the watched follower led, or 0 */
};

static void watch_for(struct candidate *leader, struct candidate *follower, usec_t d,
                      struct watch *w)
{
    for (usec_t end = clock_now() + d; clock_now() < end; clock_sleep(20 * USEC_PER_MSEC)) {
        bool l = lease_elector_is_leader(leader->le), f = lease_elector_is_leader(follower->le);
        w->overlaps += l && f;
        if (!l && !w->leader_lost)
            w->leader_lost = clock_now();
        if (f && !w->follower_lead)
            w->follower_lead = clock_now();
    }
}

static void lease_spec(const char *lease, const char *key, char *out, size_t size)
{
    struct kube_err err;
    json_t *obj = NULL;
    IT_OK(kube_get(priv.c, &KUBE_RES_LEASES, "default", lease, &obj, &err), &err);
    const char *v = kube_obj_path_str(json_object_get(obj, "spec"), key);
    (void)str_copy(out, size, v ? v : "");
    json_decref(obj);
}

static usec_t ms(usec_t d)
{
    return d / USEC_PER_MSEC;
}

/* Starts a and b on Lease default/lease of the private API server with timings t,
 * waits until exactly one leads, sets *ret_leader and *ret_follower, and lets a second
 * of renewals pass. */
static void pair_lead_private(struct pair *p, const char *lease, const struct timings *t,
                              struct candidate **ret_leader, struct candidate **ret_follower)
{
    candidate_start_on(p->a, priv.c, "default", lease, t);
    candidate_start_on(p->b, priv.c, "default", lease, t);
    assert_int_equal(it_wait(one_leader, p, WAIT), 0);
    *ret_leader = lease_elector_is_leader(p->a->le) ? p->a : p->b;
    *ret_follower = *ret_leader == p->a ? p->b : p->a;
    clock_sleep(USEC_PER_SEC);
}

/* A 5 s outage with the default timings (15 s / 10 s / 2 s): the leader keeps leading
 * throughout, the follower never leads, and the leader renews soon after. */
static void test_outage_5s_keeps_leader(void **state)
{
    static const struct timings t = {0, 0, 0};
    struct candidate a = {.id = "outage-a"}, b = {.id = "outage-b"};
    struct pair p = {&a, &b};
    struct watch w = {0};
    char renew[64], holder[64];
    struct candidate *leader, *follower;
    usec_t renewed = 0, resumed_wall;
    (void)state;

    pair_lead_private(&p, "it-outage-short", &t, &leader, &follower);
    api_pause(true);
    watch_for(leader, follower, 5 * USEC_PER_SEC, &w);
    api_pause(false);
    resumed_wall = clock_wall_now();
    /* Renewed within a retry period and a request timeout (2 s + 5 s) of the resume. */
    for (usec_t end = clock_now() + 8 * USEC_PER_SEC; clock_now() < end && !renewed;) {
        watch_for(leader, follower, 250 * USEC_PER_MSEC, &w);
        lease_spec("it-outage-short", "renewTime", renew, sizeof(renew));
        usec_t rt = 0;
        if (clock_parse_rfc3339(renew, &rt) == 0 && rt > resumed_wall)
            renewed = rt - resumed_wall;
    }
    print_message("5 s outage: leader %s kept the lead (stopped %d times), renewed %llu ms "
                  "after the resume, %d samples with two leaders\n",
                  leader->id, atomic_load(&leader->stopped), (unsigned long long)ms(renewed),
                  w.overlaps);
    assert_int_equal(w.overlaps, 0);
    assert_int_equal(w.leader_lost, 0);
    assert_int_equal(w.follower_lead, 0);
    assert_int_equal(atomic_load(&leader->stopped), 0);
    assert_int_equal(atomic_load(&leader->started), 1);
    assert_true(renewed > 0);
    lease_spec("it-outage-short", "holderIdentity", holder, sizeof(holder));
    assert_string_equal(holder, leader->id);
    lease_elector_free(a.le);
    lease_elector_free(b.le);
}

/* An outage longer than the lease duration (4 s lease, 3 s renew deadline, 0.5 s retry;
 * 6 s paused): the leader stops leading at its renew deadline, before its lease could
 * have expired for the follower; two never lead at once; afterwards exactly one leads
 * (the follower taking over, or the old leader again: either is a correct outcome). */
static void test_outage_longer_than_lease(void **state)
{
    static const struct timings t = {4 * USEC_PER_SEC, 3 * USEC_PER_SEC, 500 * USEC_PER_MSEC};
    struct candidate a = {.id = "long-a"}, b = {.id = "long-b"};
    struct pair p = {&a, &b};
    struct watch w = {0};
    char holder[64];
    struct candidate *leader, *follower;
    usec_t t_stop;
    (void)state;

    pair_lead_private(&p, "it-outage-long", &t, &leader, &follower);
    t_stop = clock_now();
    api_pause(true);
    watch_for(leader, follower, 6 * USEC_PER_SEC, &w);
    api_pause(false);
    assert_true(w.leader_lost > 0);
    assert_int_equal(atomic_load(&leader->stopped), 1);
    usec_t lost = w.leader_lost - t_stop, cb = atomic_load(&leader->stopped_at) - t_stop;
    assert_int_equal(it_wait(one_leader, &p, WAIT), 0);
    watch_for(leader, follower, 2 * USEC_PER_SEC, &w);
    struct candidate *now_leader = lease_elector_is_leader(a.le) ? &a : &b;
    lease_spec("it-outage-long", "holderIdentity", holder, sizeof(holder));
    print_message("6 s outage, 4 s lease: leader %s stopped leading %llu ms after the pause "
                  "(callback at %llu ms); afterwards %s leads (%s); %d samples with two "
                  "leaders\n",
                  leader->id, (unsigned long long)ms(lost), (unsigned long long)ms(cb),
                  now_leader->id, now_leader == leader ? "re-acquired" : "handed over", w.overlaps);
    /* The last renew was at most one retry period before the pause. */
    assert_true(lost <= t.renew + 100 * USEC_PER_MSEC);
    assert_true(cb < t.lease);
    assert_true(w.follower_lead == 0 || w.follower_lead > t_stop + 6 * USEC_PER_SEC);
    assert_int_equal(w.overlaps, 0);
    assert_string_equal(holder, now_leader->id);
    lease_elector_free(a.le);
    lease_elector_free(b.le);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handover_on_release),
    };
    const struct CMUnitTest outages[] = {
        cmocka_unit_test(test_outage_5s_keeps_leader),
        cmocka_unit_test(test_outage_longer_than_lease),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    return failed + cmocka_run_group_tests(outages, private_setup, private_teardown);
}
