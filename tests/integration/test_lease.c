/* SPDX-License-Identifier: Apache-2.0 */
/* Leader election against the real kube-apiserver: two candidates on one Lease, exactly
 * one leads, and when the leader stops it releases the Lease so the other takes over
 * within about a second instead of waiting for the 15 s lease to expire. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdatomic.h>
#include <string.h>

#include "kube/client.h"
#include "kube/lease.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "support/apiserver.h"

#define WAIT  (60 * USEC_PER_SEC)
#define LEASE "it-leader"

static struct kube_client *client;
static char ns[64];

static int setup(void **state)
{
    struct kube_err err;
    (void)state;
    IT_OK(it_client_new(NULL, &client, &err), &err);
    IT_OK(it_ns_create(client, "it-lease", ns, sizeof(ns), &err), &err);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    assert_int_equal(it_ns_delete(client, ns, WAIT), 0);
    kube_client_free(client);
    return 0;
}

struct candidate {
    const char *id;
    struct lease_elector *le;
    atomic_int started, stopped;
};

static void started(void *ctx)
{
    struct candidate *c = ctx;
    atomic_fetch_add(&c->started, 1);
}

static void stopped(void *ctx)
{
    struct candidate *c = ctx;
    atomic_fetch_add(&c->stopped, 1);
}

static void candidate_start(struct candidate *c)
{
    struct lease_opts o = {
        .ns = ns,
        .name = LEASE,
        .identity = c->id,
        .lease_duration = 15 * USEC_PER_SEC,
        .renew_deadline = 10 * USEC_PER_SEC,
        .retry_period = 250 * USEC_PER_MSEC,
        .cb = {.ctx = c, .started_leading = started, .stopped_leading = stopped},
    };
    lease_api_kube(client, &o.api);
    assert_int_equal(lease_elector_new(&o, &c->le), 0);
    assert_int_equal(lease_elector_start(c->le), 0);
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
    assert_int_equal(it_wait(leads, follower, WAIT), 0);
    usec_t handover = clock_now() - t0;
    print_message("hand-over took %llu ms\n", (unsigned long long)(handover / USEC_PER_MSEC));
    if (handover > 2 * USEC_PER_SEC)
        fail_msg("hand-over took %llu ms: the lease was not released",
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handover_on_release),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
