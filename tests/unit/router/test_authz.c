/* SPDX-License-Identifier: Apache-2.0 */
/* Review caching with a fake reviewer: verdicts, hits, TTL and error TTL with a fake
 * clock, the bound on entries, the pending-review bound, and shutdown with checks
 * pending. Checks of one key in flight share a review; a client flooding the queue sheds
 * its own reviews and the others' are served in turn. Client certificate identities (no
 * TokenReview, cached per identity). The
 * TokenReview status check: authenticated, user and requested audiences.
 * API-server reviewers are per instance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/xalloc.h"
#include "router/authz.h"

static atomic_int token_calls, access_calls;
static usec_t fake_now = 1000 * USEC_PER_SEC;

static usec_t now_fn(void)
{
    return fake_now;
}

/* Tokens "hold-..." wait in the reviewer until the gate opens, or until the test lets one
 * through (gate_step). The order the reviews reached the gate in. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_closed;
static int gate_passes, gate_held;
static char order[64][32];
static int norder;

static void gate_set(bool closed)
{
    (void)pthread_mutex_lock(&gate_lock);
    gate_closed = closed;
    if (closed) {
        norder = 0;
        gate_passes = 0;
    }
    (void)pthread_cond_broadcast(&gate_cond);
    (void)pthread_mutex_unlock(&gate_lock);
}

/* Lets one review held at the closed gate go on. */
static void gate_step(void)
{
    (void)pthread_mutex_lock(&gate_lock);
    gate_passes++;
    (void)pthread_cond_broadcast(&gate_cond);
    (void)pthread_mutex_unlock(&gate_lock);
}

/* Waits (up to 20 s) until n reviews are held at the gate and none is passing it. */
static void gate_wait_held(int n)
{
    for (int i = 0; i < 20000; i++) {
        (void)pthread_mutex_lock(&gate_lock);
        bool there = gate_held == n && gate_passes == 0;
        (void)pthread_mutex_unlock(&gate_lock);
        if (there)
            return;
        struct timespec ms = {.tv_nsec = 1000000};
        (void)nanosleep(&ms, NULL);
    }
    fail_msg("%d reviews never held at the gate", n);
}

static int fake_token(void *ctx, const char *token, json_t **ret_user)
{
    (void)ctx;
    atomic_fetch_add(&token_calls, 1);
    if (strncmp(token, "hold-", 5) == 0) {
        (void)pthread_mutex_lock(&gate_lock);
        if (norder < 64)
            (void)snprintf(order[norder++], sizeof(order[0]), "%s", token + 5);
        gate_held++;
        while (gate_closed && gate_passes == 0)
            (void)pthread_cond_wait(&gate_cond, &gate_lock);
        if (gate_closed)
            gate_passes--;
        gate_held--;
        (void)pthread_mutex_unlock(&gate_lock);
        token += 5;
    }
    if (strcmp(token, "err") == 0)
        return -EIO;
    if (strncmp(token, "good-", 5) == 0) {
        *ret_user = json_pack("{s:s,s:[s]}", "username", token + 5, "groups", "devs");
        return 0;
    }
    *ret_user = NULL;
    return 0;
}

static int fake_access(void *ctx, const json_t *user, const struct authz_attrs *at, bool *ret)
{
    (void)ctx;
    atomic_fetch_add(&access_calls, 1);
    if (strcmp(at->name, "broken") == 0)
        return -EIO;
    const char *u = json_string_value(json_object_get(user, "username"));
    assert_string_equal(at->verb, "get");
    *ret = strcmp(u, "alice") == 0 || strcmp(at->ns, "open") == 0;
    return 0;
}

static const struct authz_reviewer fake = {.review_token = fake_token,
                                           .review_access = fake_access};

struct result {
    int calls;
    enum authz_verdict v;
    bool cached;
    char user[32];
};

static void on_done(void *ctx, const struct authz_result *res)
{
    struct result *r = ctx;
    r->calls++;
    r->v = res->verdict;
    r->cached = res->cached;
    (void)snprintf(r->user, sizeof(r->user), "%s", res->user);
}

struct fixture {
    uv_loop_t loop;
    struct authz *a;
};

static struct fixture *fixture_new(const struct authz_opts *extra)
{
    struct fixture *f = XNEW(struct fixture);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    struct authz_opts o = {.reviewer = &fake,
                           .now = now_fn,
                           .ttl = 10 * USEC_PER_SEC,
                           .error_ttl = USEC_PER_SEC,
                           .workers = 2};
    if (extra) {
        o.cache_size = extra->cache_size;
        o.max_pending = extra->max_pending;
    }
    assert_int_equal(authz_new(&f->loop, &o, &f->a), 0);
    atomic_store(&token_calls, 0);
    atomic_store(&access_calls, 0);
    return f;
}

static void fixture_free(struct fixture *f)
{
    authz_free(f->a);
    (void)uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    xfree(f);
}

/* Checks and waits for the answer; returns what authz_check returned. */
static int check(struct fixture *f, const char *token, const char *ns, const char *name,
                 struct result *r)
{
    memset(r, 0, sizeof(*r));
    int rc = authz_check(f->a, token, ns, name, "10.0.0.1", on_done, r);
    while (r->calls == 0)
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(r->calls, 1);
    return rc;
}

static void test_verdicts_and_hits(void **state)
{
    (void)state;
    struct fixture *f = fixture_new(NULL);
    struct result r;
    assert_int_equal(check(f, NULL, "a", "s", &r), 1);
    assert_int_equal(r.v, AUTHZ_UNAUTHENTICATED);
    assert_int_equal(check(f, "", "a", "s", &r), 1);
    assert_int_equal(r.v, AUTHZ_UNAUTHENTICATED);
    assert_int_equal(atomic_load(&token_calls), 0);

    assert_int_equal(check(f, "good-alice", "a", "s", &r), 0);
    assert_int_equal(r.v, AUTHZ_ALLOW);
    assert_false(r.cached);
    assert_string_equal(r.user, "alice");
    assert_int_equal(check(f, "good-alice", "a", "s", &r), 1);
    assert_int_equal(r.v, AUTHZ_ALLOW);
    assert_true(r.cached);
    assert_string_equal(r.user, "alice");
    assert_int_equal(atomic_load(&token_calls), 1);
    assert_int_equal(atomic_load(&access_calls), 1);

    /* Same token, other sandbox: only an access review. */
    assert_int_equal(check(f, "good-alice", "a", "t", &r), 0);
    assert_int_equal(r.v, AUTHZ_ALLOW);
    assert_int_equal(atomic_load(&token_calls), 1);
    assert_int_equal(atomic_load(&access_calls), 2);

    assert_int_equal(check(f, "good-bob", "a", "s", &r), 0);
    assert_int_equal(r.v, AUTHZ_FORBIDDEN);
    assert_int_equal(check(f, "good-bob", "a", "s", &r), 1);
    assert_int_equal(r.v, AUTHZ_FORBIDDEN);
    assert_int_equal(check(f, "good-bob", "open", "s", &r), 0);
    assert_int_equal(r.v, AUTHZ_ALLOW);

    assert_int_equal(check(f, "forged", "a", "s", &r), 0);
    assert_int_equal(r.v, AUTHZ_UNAUTHENTICATED);
    assert_int_equal(check(f, "forged", "a", "s", &r), 1);
    assert_int_equal(r.v, AUTHZ_UNAUTHENTICATED);
    assert_int_equal(atomic_load(&token_calls), 3);

    struct authz_stats st;
    authz_stats(f->a, &st);
    assert_int_equal(st.token_reviews, 3);
    assert_int_equal(st.token_entries, 3);
    fixture_free(f);
}

static json_t *last_user; /* the user of the latest access review (the worker's copy) */

static int recording_access(void *ctx, const json_t *user, const struct authz_attrs *at, bool *ret)
{
    if (last_user)
        json_decref(last_user);
    last_user = json_deep_copy(user);
    return fake_access(ctx, user, at, ret);
}

static const struct authz_reviewer recording = {.review_token = fake_token,
                                                .review_access = recording_access};

static int check_identity(struct fixture *f, struct str ident, const char *ns, struct result *r)
{
    memset(r, 0, sizeof(*r));
    int rc = authz_check_identity(f->a, ident, ns, "s", "10.0.0.1", on_done, r);
    while (r->calls == 0)
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(r->calls, 1);
    return rc;
}

#define IDENT(lit) str_make(lit, sizeof(lit) - 1)

/* A client certificate's identity: no TokenReview, the access review gets the user and
 * the groups, the verdict is cached per identity (apart from tokens); malformed
 * encodings are unauthenticated. */
static void test_identity(void **state)
{
    struct fixture *f = XNEW(struct fixture);
    struct authz_opts o = {.reviewer = &recording, .now = now_fn, .ttl = 10 * USEC_PER_SEC};
    struct result r;
    (void)state;
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(authz_new(&f->loop, &o, &f->a), 0);
    atomic_store(&token_calls, 0);
    atomic_store(&access_calls, 0);

    assert_int_equal(check_identity(f, IDENT("alice\0dev\0system:authenticated\0"), "a", &r), 0);
    assert_int_equal(r.v, AUTHZ_ALLOW);
    assert_string_equal(r.user, "alice");
    assert_false(r.cached);
    json_t *want =
        json_pack("{s:s,s:[s,s]}", "username", "alice", "groups", "dev", "system:authenticated");
    assert_true(json_equal(last_user, want));
    json_decref(want);
    assert_int_equal(check_identity(f, IDENT("alice\0dev\0system:authenticated\0"), "a", &r), 1);
    assert_int_equal(r.v, AUTHZ_ALLOW);
    assert_true(r.cached);
    assert_string_equal(r.user, "alice");
    assert_int_equal(atomic_load(&access_calls), 1);

    /* Other groups: another identity, reviewed on its own. */
    assert_int_equal(check_identity(f, IDENT("alice\0system:authenticated\0"), "a", &r), 0);
    assert_int_equal(atomic_load(&access_calls), 2);
    assert_int_equal(check_identity(f, IDENT("bob\0system:authenticated\0"), "a", &r), 0);
    assert_int_equal(r.v, AUTHZ_FORBIDDEN);
    assert_string_equal(r.user, "bob");
    assert_int_equal(check_identity(f, IDENT("bob\0system:authenticated\0"), "a", &r), 1);
    assert_int_equal(r.v, AUTHZ_FORBIDDEN);
    assert_int_equal(atomic_load(&access_calls), 3);
    assert_int_equal(atomic_load(&token_calls), 0);

    /* The same name as a token user is not the certificate's cached verdict. */
    assert_int_equal(check(f, "good-bob", "a", "s", &r), 0);
    assert_int_equal(atomic_load(&token_calls), 1);
    assert_int_equal(atomic_load(&access_calls), 4);

    assert_int_equal(check_identity(f, STR_NULL, "a", &r), 1);
    assert_int_equal(r.v, AUTHZ_UNAUTHENTICATED);
    assert_int_equal(check_identity(f, IDENT("\0system:authenticated\0"), "a", &r), 1);
    assert_int_equal(r.v, AUTHZ_UNAUTHENTICATED);
    assert_int_equal(check_identity(f, IDENT("alice"), "a", &r), 1); /* no final NUL */
    assert_int_equal(r.v, AUTHZ_UNAUTHENTICATED);
    assert_int_equal(atomic_load(&access_calls), 4);
    json_decref(last_user);
    last_user = NULL;
    fixture_free(f);
}

static void test_ttl_and_error_ttl(void **state)
{
    (void)state;
    struct fixture *f = fixture_new(NULL);
    struct result r;
    assert_int_equal(check(f, "err", "a", "s", &r), 0);
    assert_int_equal(r.v, AUTHZ_ERROR);
    assert_int_equal(check(f, "err", "a", "s", &r), 1); /* cached briefly */
    assert_int_equal(r.v, AUTHZ_ERROR);
    assert_int_equal(check(f, "good-alice", "a", "broken", &r), 0);
    assert_int_equal(r.v, AUTHZ_ERROR);
    assert_int_equal(check(f, "good-alice", "a", "broken", &r), 1);
    assert_int_equal(check(f, "good-alice", "a", "s", &r), 0);
    assert_int_equal(r.v, AUTHZ_ALLOW);
    assert_int_equal(atomic_load(&token_calls), 2);
    assert_int_equal(atomic_load(&access_calls), 2);

    fake_now += 2 * USEC_PER_SEC; /* past the error TTL, within the TTL */
    assert_int_equal(check(f, "err", "a", "s", &r), 0);
    assert_int_equal(check(f, "good-alice", "a", "broken", &r), 0);
    assert_int_equal(check(f, "good-alice", "a", "s", &r), 1);
    assert_int_equal(atomic_load(&token_calls), 3);
    assert_int_equal(atomic_load(&access_calls), 3);

    fake_now += 10 * USEC_PER_SEC; /* past the TTL */
    assert_int_equal(check(f, "good-alice", "a", "s", &r), 0);
    assert_int_equal(r.v, AUTHZ_ALLOW);
    assert_int_equal(atomic_load(&token_calls), 4);
    assert_int_equal(atomic_load(&access_calls), 4);
    fixture_free(f);
}

/* A verdict lives the TTL from when its review was asked for: a review that took 8 s of a
 * 10 s TTL leaves 2 s of caching, not 10. A failure is held the error TTL from its answer. */
static void test_ttl_counts_from_the_ask(void **state)
{
    (void)state;
    struct fixture *f = fixture_new(NULL);
    gate_set(true);
    struct result r = {0}, e = {0};
    assert_int_equal(authz_check(f->a, "hold-good-alice", "a", "s", "10.0.0.1", on_done, &r), 0);
    assert_int_equal(authz_check(f->a, "hold-err", "a", "s", "10.0.0.1", on_done, &e), 0);
    gate_wait_held(2);
    fake_now += 8 * USEC_PER_SEC; /* the reviews are slow */
    gate_set(false);
    while (r.calls == 0 || e.calls == 0)
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(r.v, AUTHZ_ALLOW);
    assert_int_equal(e.v, AUTHZ_ERROR);
    struct result again;
    assert_int_equal(check(f, "hold-err", "a", "s", &again), 1); /* held from its answer */
    assert_int_equal(again.v, AUTHZ_ERROR);
    fake_now += USEC_PER_SEC + 1; /* 9 s after the ask: still cached */
    assert_int_equal(check(f, "hold-good-alice", "a", "s", &again), 1);
    assert_true(again.cached);
    fake_now += USEC_PER_SEC; /* 10 s after the ask, 2 s after the answer: reviewed again */
    assert_int_equal(check(f, "hold-good-alice", "a", "s", &again), 0);
    assert_int_equal(again.v, AUTHZ_ALLOW);
    assert_false(again.cached);
    assert_int_equal(atomic_load(&token_calls), 3);
    fixture_free(f);
}

static void test_bounded(void **state)
{
    (void)state;
    struct authz_opts extra = {.cache_size = 2};
    struct fixture *f = fixture_new(&extra);
    struct result r;
    char tok[32];
    for (int i = 0; i < 10; i++) {
        (void)snprintf(tok, sizeof(tok), "good-u%d", i);
        assert_int_equal(check(f, tok, "open", "s", &r), 0);
        assert_int_equal(r.v, AUTHZ_ALLOW);
    }
    struct authz_stats st;
    authz_stats(f->a, &st);
    assert_int_equal(st.token_entries, 2);
    assert_int_equal(st.access_entries, 2);
    assert_true(st.evictions >= 16);
    /* The most recent stays cached, the oldest is gone. */
    assert_int_equal(check(f, "good-u9", "open", "s", &r), 1);
    assert_int_equal(check(f, "good-u0", "open", "s", &r), 0);
    fixture_free(f);
}

static void test_pending_bound_and_free(void **state)
{
    (void)state;
    struct authz_opts extra = {.max_pending = 1};
    struct fixture *f = fixture_new(&extra);
    struct result r1 = {0}, r2 = {0};
    assert_int_equal(authz_check(f->a, "good-alice", "a", "s", "10.0.0.1", on_done, &r1), 0);
    assert_int_equal(authz_check(f->a, "good-bob", "a", "s", "10.0.0.1", on_done, &r2), 1);
    assert_int_equal(r2.calls, 1);
    assert_int_equal(r2.v, AUTHZ_BUSY);
    /* Freed with a check pending: it is still answered exactly once. */
    fixture_free(f);
    assert_int_equal(r1.calls, 1);
    assert_true(r1.v == AUTHZ_ALLOW || r1.v == AUTHZ_ERROR);
}

/* Five checks of one token and Sandbox while its review runs: one review, five answers.
 * The same token for another Sandbox is a review of its own. */
static void test_same_key_one_review(void **state)
{
    (void)state;
    struct fixture *f = fixture_new(NULL);
    gate_set(true);
    struct result r[6];
    memset(r, 0, sizeof(r));
    for (int i = 0; i < 5; i++)
        assert_int_equal(authz_check(f->a, "hold-good-alice", "a", "s", "10.0.0.1", on_done, &r[i]),
                         0);
    assert_int_equal(authz_check(f->a, "hold-good-alice", "a", "t", "10.0.0.1", on_done, &r[5]), 0);
    gate_set(false);
    for (int i = 0; i < 6; i++) {
        while (r[i].calls == 0)
            (void)uv_run(&f->loop, UV_RUN_ONCE);
        assert_int_equal(r[i].calls, 1);
        assert_int_equal(r[i].v, AUTHZ_ALLOW);
        assert_string_equal(r[i].user, "alice");
    }
    assert_int_equal(atomic_load(&token_calls), 2);
    assert_int_equal(atomic_load(&access_calls), 2);
    struct authz_stats st;
    authz_stats(f->a, &st);
    assert_int_equal(st.coalesced, 4);
    /* Answered: the next check is a cache hit, not a follower. */
    struct result again;
    assert_int_equal(check(f, "hold-good-alice", "a", "s", &again), 1);
    assert_true(again.cached);
    fixture_free(f);
}

/* One client fills the bound with distinct tokens while the
 * two workers are busy with its first two. Another client's check is still queued (the
 * flood's newest is shed for it), the flooding client's next is refused, and the other
 * client's review comes before the rest of the flood. */
static void test_flood_sheds_its_own(void **state)
{
    (void)state;
    struct authz_opts extra = {.max_pending = 8};
    struct fixture *f = fixture_new(&extra);
    gate_set(true);
    struct result flood[9], other;
    memset(flood, 0, sizeof(flood));
    memset(&other, 0, sizeof(other));
    char tok[32];
    for (int i = 0; i < 8; i++) {
        (void)snprintf(tok, sizeof(tok), "hold-good-f%d", i);
        assert_int_equal(authz_check(f->a, tok, "open", "s", "2001:db8::1", on_done, &flood[i]), 0);
    }
    assert_int_equal(
        authz_check(f->a, "hold-good-bob", "open", "s", "2001:db8::2", on_done, &other), 0);
    assert_int_equal(flood[7].calls, 1); /* the flood's newest, shed */
    assert_int_equal(flood[7].v, AUTHZ_BUSY);
    assert_int_equal(
        authz_check(f->a, "hold-good-f8", "open", "s", "2001:db8::1", on_done, &flood[8]), 1);
    assert_int_equal(flood[8].v, AUTHZ_BUSY);
    /* The reviews go through the gate one at a time: a worker takes its next only once
     * its last is through, while the other's is held, so the order they reach the gate
     * in is the order the workers took them from the queues. At most two were running
     * when bob came (the flood's first two), then the clients take turns: the flood's
     * next, then bob's. */
    gate_wait_held(2);
    for (int i = 0; i < 2; i++) {
        gate_step();
        gate_wait_held(2);
    }
    int at = -1;
    for (int i = 0; i < norder; i++)
        if (strcmp(order[i], "good-bob") == 0)
            at = i;
    if (at < 0 || at > 3)
        for (int i = 0; i < norder; i++)
            print_error("review %d: %s\n", i, order[i]);
    assert_true(at >= 0 && at <= 3);
    gate_set(false);
    while (other.calls == 0)
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(other.v, AUTHZ_ALLOW);
    for (int i = 0; i < 7; i++) {
        while (flood[i].calls == 0)
            (void)uv_run(&f->loop, UV_RUN_ONCE);
        assert_int_equal(flood[i].v, AUTHZ_ALLOW);
    }
    struct authz_stats st;
    authz_stats(f->a, &st);
    assert_int_equal(st.shed, 1);
    assert_int_equal(st.busy, 2);
    fixture_free(f);
}

/* The job shed at the bound is the heavy client's newest that no other request waits on:
 * a request of another client that shares the flood's newest review keeps it. */
static void test_shed_spares_shared_review(void **state)
{
    (void)state;
    struct authz_opts extra = {.max_pending = 8};
    struct fixture *f = fixture_new(&extra);
    gate_set(true);
    struct result flood[8], shared, carol;
    memset(flood, 0, sizeof(flood));
    memset(&shared, 0, sizeof(shared));
    memset(&carol, 0, sizeof(carol));
    char tok[32];
    for (int i = 0; i < 8; i++) {
        (void)snprintf(tok, sizeof(tok), "hold-good-f%d", i);
        assert_int_equal(authz_check(f->a, tok, "open", "s", "10.0.0.66", on_done, &flood[i]), 0);
    }
    assert_int_equal(authz_check(f->a, "hold-good-f7", "open", "s", "10.0.0.2", on_done, &shared),
                     0);
    assert_int_equal(authz_check(f->a, "hold-good-carol", "open", "s", "10.0.0.3", on_done, &carol),
                     0);
    assert_int_equal(flood[6].calls, 1);
    assert_int_equal(flood[6].v, AUTHZ_BUSY);
    assert_int_equal(flood[7].calls, 0);
    assert_int_equal(shared.calls, 0);
    gate_set(false);
    struct result *wait[] = {&flood[7], &shared, &carol};
    for (size_t i = 0; i < 3; i++) {
        while (wait[i]->calls == 0)
            (void)uv_run(&f->loop, UV_RUN_ONCE);
        assert_int_equal(wait[i]->v, AUTHZ_ALLOW);
    }
    struct authz_stats st;
    authz_stats(f->a, &st);
    assert_int_equal(st.shed, 1);
    assert_int_equal(st.busy, 1);
    assert_int_equal(st.coalesced, 1);
    fixture_free(f);
}

static bool review_accepts(const char *status_json, const char *const *aud)
{
    json_t *status = json_loads(status_json, 0, NULL);
    assert_non_null(status);
    json_t *user = authz_token_review_user(status, aud);
    json_decref(status);
    bool ok = user != NULL;
    if (user)
        assert_string_equal(json_string_value(json_object_get(user, "username")), "u");
    json_decref(user);
    return ok;
}

static void test_token_review_audiences(void **state)
{
    (void)state;
    static const char *const aud[] = {"sandbox-router", "other", NULL};
    static const char *const none[] = {NULL};
    const char *plain = "{\"authenticated\":true,\"user\":{\"username\":\"u\"}}";
    /* Without requested audiences the API server's own apply: no check. */
    assert_true(review_accepts(plain, NULL));
    assert_true(review_accepts(plain, none));
    /* Requested: status.audiences must name one of them. */
    assert_false(review_accepts(plain, aud));
    assert_false(review_accepts("{\"authenticated\":true,\"user\":{\"username\":\"u\"},"
                                "\"audiences\":[]}",
                                aud));
    assert_false(review_accepts("{\"authenticated\":true,\"user\":{\"username\":\"u\"},"
                                "\"audiences\":[\"https://kubernetes.default.svc\", 7]}",
                                aud));
    assert_false(review_accepts("{\"authenticated\":true,\"user\":{\"username\":\"u\"},"
                                "\"audiences\":\"sandbox-router\"}",
                                aud));
    assert_true(review_accepts("{\"authenticated\":true,\"user\":{\"username\":\"u\"},"
                               "\"audiences\":[\"x\", \"other\"]}",
                               aud));
    /* Not authenticated, or no user object: refused whatever the audiences. */
    assert_false(review_accepts("{\"authenticated\":false,\"user\":{\"username\":\"u\"},"
                                "\"audiences\":[\"other\"]}",
                                aud));
    assert_false(review_accepts("{\"authenticated\":true,\"user\":\"u\"}", NULL));
    assert_false(review_accepts("{}", NULL));
}

/* Each API-server reviewer keeps its own client and audiences: making a second one
 * (another router in the process) leaves the first untouched. */
static void test_kube_reviewers_per_instance(void **state)
{
    static const char *const aud_a[] = {"a", NULL}, *const aud_b[] = {"b", NULL};
    /* Never dereferenced: construction only stores the pointers. */
    struct kube_client *c1 = (struct kube_client *)&token_calls;
    struct kube_client *c2 = (struct kube_client *)&access_calls;
    struct authz_kube ka, kb;
    struct authz_reviewer a, b;
    (void)state;
    authz_kube_reviewer(&ka, c1, aud_a, &a);
    authz_kube_reviewer(&kb, c2, aud_b, &b);
    assert_ptr_equal(a.ctx, &ka);
    assert_ptr_equal(b.ctx, &kb);
    assert_ptr_equal(ka.client, c1);
    assert_ptr_equal(ka.audiences, aud_a);
    assert_ptr_equal(kb.client, c2);
    assert_ptr_equal(kb.audiences, aud_b);
    assert_non_null(a.review_token);
    assert_non_null(a.review_access);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdicts_and_hits),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_ttl_and_error_ttl),
        cmocka_unit_test(test_ttl_counts_from_the_ask),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_pending_bound_and_free),
        cmocka_unit_test(test_same_key_one_review),
        cmocka_unit_test(test_flood_sheds_its_own),
        cmocka_unit_test(test_shed_spares_shared_review),
        cmocka_unit_test(test_token_review_audiences),
        cmocka_unit_test(test_kube_reviewers_per_instance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
