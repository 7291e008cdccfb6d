/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: the read-your-writes memo suppresses status writes on the version our write
 * replaced, only for that version and UID, and only for SB_MEMO_TTL (the backstop for a
 * watch event lost across an API server restart). The status coalescing table delays a
 * detail write by at most its window from the first sighting, for objects whose UIDs share
 * a bucket too, and never when the bucket is full.
 * A created child is answered for by owner, kind and name until it is seen, deleted or
 * SB_MEMO_TTL old. Each memo is its own instance: two never share an entry, and a NULL
 * memo remembers nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "api/sandbox.h"
#include "common/xalloc.h"
#include "controller/sandbox_memo.h"
#include "kube/res.h"

/* jansson's live allocations in this process (its allocator is counted from main on). */
static atomic_long json_live;

static void *json_counted_malloc(size_t n)
{
    atomic_fetch_add(&json_live, 1);
    return xmalloc(n);
}

static void json_counted_free(void *p)
{
    if (p)
        atomic_fetch_sub(&json_live, 1);
    xfree(p);
}

static json_t *obj(const char *uid, const char *rv)
{
    json_t *o = json_pack("{s:{s:s, s:s, s:s}}", "metadata", "name", "x", "uid", uid,
                          "resourceVersion", rv);
    assert_non_null(o);
    return o;
}

static void test_stale_only_for_replaced_version(void **state)
{
    json_t *v1 = obj("uid-memo-1", "100"), *v2 = obj("uid-memo-1", "101");
    json_t *other = obj("uid-memo-2", "100");
    usec_t t0 = 1000 * USEC_PER_SEC;
    struct sb_memo *m = *state;
    assert_false(sb_memo_stale_at(m, v1, t0));
    sb_memo_wrote_at(m, v1, t0);
    assert_true(sb_memo_stale_at(m, v1, t0));
    assert_true(sb_memo_stale_at(m, v1, t0 + SB_MEMO_TTL - 1));
    assert_false(sb_memo_stale_at(m, v2, t0 + 1));    /* the cache moved on */
    assert_false(sb_memo_stale_at(m, other, t0 + 1)); /* another object */
    json_decref(v1);
    json_decref(v2);
    json_decref(other);
}

/* A cache even older than the version a write replaced is stale too (two writes in one
 * pass: the memo holds the second's base); versions that are not ordered only match. */
static void test_older_versions_are_stale(void **state)
{
    json_t *v99 = obj("uid-memo-5", "99"), *v100 = obj("uid-memo-5", "100");
    json_t *v101 = obj("uid-memo-5", "101"), *v9 = obj("uid-memo-5", "9");
    json_t *odd = obj("uid-memo-6", "b"), *odd_older = obj("uid-memo-6", "a");
    usec_t t0 = 1000 * USEC_PER_SEC;
    struct sb_memo *m = *state;
    sb_memo_wrote_at(m, v100, t0);
    assert_true(sb_memo_stale_at(m, v99, t0 + 1));
    assert_true(sb_memo_stale_at(m, v9, t0 + 1)); /* shorter: older */
    assert_true(sb_memo_stale_at(m, v100, t0 + 1));
    assert_false(sb_memo_stale_at(m, v101, t0 + 1));
    assert_false(sb_memo_stale_at(m, v99, t0 + SB_MEMO_TTL)); /* the TTL still ends it */
    sb_memo_wrote_at(m, odd, t0);
    assert_true(sb_memo_stale_at(m, odd, t0 + 1));
    assert_false(sb_memo_stale_at(m, odd_older, t0 + 1));
    json_decref(v99);
    json_decref(v100);
    json_decref(v101);
    json_decref(v9);
    json_decref(odd);
    json_decref(odd_older);
}

static void test_expires_after_ttl(void **state)
{
    json_t *v = obj("uid-memo-3", "7");
    usec_t t0 = 2000 * USEC_PER_SEC;
    struct sb_memo *m = *state;
    sb_memo_wrote_at(m, v, t0);
    assert_true(sb_memo_stale_at(m, v, t0 + SB_MEMO_TTL / 2));
    assert_false(sb_memo_stale_at(m, v, t0 + SB_MEMO_TTL)); /* the event never came */
    assert_false(sb_memo_stale_at(m, v, t0 - 1));           /* a clock before the write */
    sb_memo_wrote_at(m, v, t0 + SB_MEMO_TTL);               /* a new write re-arms it */
    assert_true(sb_memo_stale_at(m, v, t0 + SB_MEMO_TTL + 1));
    json_decref(v);
}

static void test_unusable_objects_never_stale(void **state)
{
    json_t *no_rv = json_pack("{s:{s:s}}", "metadata", "uid", "uid-memo-4");
    json_t *long_uid =
        obj("uid-memo-5-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "1");
    struct sb_memo *m = *state;
    sb_memo_wrote_at(m, no_rv, 5);
    sb_memo_wrote_at(m, long_uid, 5);
    assert_false(sb_memo_stale_at(m, no_rv, 5));
    assert_false(sb_memo_stale_at(m, long_uid, 5));
    json_decref(no_rv);
    json_decref(long_uid);
}

#define W (1 * USEC_PER_SEC)

static void test_defer_window_from_first_sighting(void **state)
{
    usec_t t0 = 3000 * USEC_PER_SEC;
    struct sb_memo *m = *state;
    assert_int_equal(sb_defer_wait_at(m, "uid-defer-1", W, t0), W);
    /* Later sightings do not push the deadline: the wait only shrinks. */
    assert_int_equal(sb_defer_wait_at(m, "uid-defer-1", W, t0 + W / 4), W - W / 4);
    assert_int_equal(sb_defer_wait_at(m, "uid-defer-1", W, t0 + W - 1), 1);
    assert_int_equal(sb_defer_wait_at(m, "uid-defer-1", W, t0 + W), 0);
    assert_int_equal(sb_defer_wait_at(m, "uid-defer-1", W, t0 + 5 * W), 0); /* stays due */
    /* After the write, a new change starts a new window. */
    sb_defer_clear(m, "uid-defer-1");
    assert_int_equal(sb_defer_wait_at(m, "uid-defer-1", W, t0 + 6 * W), W);
    sb_defer_clear(m, "uid-defer-1");
    /* Window 0 and unusable UIDs never wait. */
    assert_int_equal(sb_defer_wait_at(m, "uid-defer-2", 0, t0), 0);
    assert_int_equal(sb_defer_wait_at(m, NULL, W, t0), 0);
    assert_int_equal(
        sb_defer_wait_at(m, "uid-defer-3-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", W, t0),
        0);
}

/* uid's bucket in a table of n slots (FNV-1a, as sandbox_memo.c; buckets of 8). */
static unsigned bucket(const char *uid, unsigned n)
{
    unsigned h = 2166136261u;
    for (const char *p = uid; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h & (n / 8 - 1);
}

/* Fills out[0..k) with UIDs "<prefix>-<i>" in the same bucket as uid (a table of n). */
static void same_bucket(const char *uid, unsigned n, const char *prefix, char (*out)[40], int k)
{
    int found = 0;
    for (int i = 0; i < 10000000 && found < k; i++) {
        (void)snprintf(out[found], sizeof(out[0]), "%s-%d", prefix, i);
        if (bucket(out[found], n) == bucket(uid, n))
            found++;
    }
    assert_int_equal(found, k);
}

/* Objects whose UIDs share a bucket each wait their own window (one slot per hash wrote
 * the second one's every step at once: 11 status writes for 10 cold Sandboxes); only a
 * ninth pending wait in a full bucket is written at once. */
static void test_defer_collision_writes_at_once(void **state)
{
    usec_t t0 = 4000 * USEC_PER_SEC;
    char other[8][40];
    struct sb_memo *m = *state;
    same_bucket("uid-defer-a", 4096, "uid-defer-c", other, 8);
    assert_int_equal(sb_defer_wait_at(m, "uid-defer-a", W, t0), W);
    for (int i = 0; i < 7; i++)
        assert_int_equal(sb_defer_wait_at(m, other[i], W, t0 + 1), W);
    /* The bucket is full of pending waits: the ninth object is not delayed. */
    assert_int_equal(sb_defer_wait_at(m, other[7], W, t0 + 1), 0);
    assert_int_equal(sb_defer_wait_at(m, "uid-defer-a", W, t0 + 2), W - 2);
    assert_int_equal(sb_defer_wait_at(m, other[3], W, t0 + 2), W - 1);
    /* An entry left behind (its Sandbox deleted while it waited) is reclaimed: the ninth
     * takes uid-defer-a's, the oldest. */
    assert_int_equal(sb_defer_wait_at(m, other[7], W, t0 + 2 * W), W);
    /* Clearing a UID no longer held leaves the others of its bucket as they were. */
    sb_defer_clear(m, "uid-defer-a");
    assert_int_equal(sb_defer_wait_at(m, other[7], W, t0 + 2 * W + 2), W - 2);
    sb_defer_clear(m, other[7]);
    assert_int_equal(sb_defer_wait_at(m, "uid-defer-a", W, t0 + 2 * W + 3), W);
    sb_defer_clear(m, "uid-defer-a");
    /* An empty UID never waits nor matches a free slot. */
    assert_int_equal(sb_defer_wait_at(m, "", W, t0), 0);
}

/* Writes of objects whose UIDs share a bucket are all remembered; a full bucket gives up
 * its oldest entry, not the newest. */
static void test_memo_bucket_holds_eight(void **state)
{
    usec_t t0 = 4500 * USEC_PER_SEC;
    char other[8][40];
    json_t *v[9];
    struct sb_memo *m = *state;
    same_bucket("uid-memo-b", 8192, "uid-memo-c", other, 8);
    v[0] = obj("uid-memo-b", "10");
    for (int i = 0; i < 8; i++)
        v[i + 1] = obj(other[i], "10");
    /* v[0] takes the bucket's first slot and is written again last: the oldest is v[1],
     * in the next slot */
    for (int i = 0; i < 8; i++)
        sb_memo_wrote_at(m, v[i], t0 + (usec_t)i);
    sb_memo_wrote_at(m, v[0], t0 + 8);
    for (int i = 0; i < 8; i++)
        assert_true(sb_memo_stale_at(m, v[i], t0 + 9));
    sb_memo_wrote_at(m, v[8], t0 + 9);
    assert_false(sb_memo_stale_at(m, v[1], t0 + 10)); /* the oldest, given up */
    assert_true(sb_memo_stale_at(m, v[0], t0 + 10));  /* not the first slot's */
    for (int i = 2; i < 9; i++)
        assert_true(sb_memo_stale_at(m, v[i], t0 + 10));
    /* An expired entry is taken before the oldest live one. */
    sb_memo_wrote_at(m, v[1], t0 + SB_MEMO_TTL + 2); /* v[2]'s (t0 + 2) has expired */
    assert_true(sb_memo_stale_at(m, v[1], t0 + SB_MEMO_TTL + 3));
    assert_true(sb_memo_stale_at(m, v[8], t0 + SB_MEMO_TTL + 3));
    assert_true(sb_memo_stale_at(m, v[0], t0 + SB_MEMO_TTL + 3));
    for (int i = 0; i < 9; i++)
        json_decref(v[i]);
}

static bool busy_flag;

static bool gate_busy(void *ctx)
{
    return *(bool *)ctx;
}

/* The Pod metadata patch after an adoption: held while the gate is busy, at most its bound
 * after it was first put off; never without a busy gate, nor when it sets the
 * Service-selector label. */
static void test_pod_meta_hold(void **state)
{
    usec_t t0 = 5000 * USEC_PER_SEC;
    struct sb_memo *m = *state;
    struct yield_gate g = {.busy = gate_busy, .ctx = &busy_flag, .max_wait = W};
    struct yield_gate open_gate = {.busy = NULL, .max_wait = W};
    struct yield_gate no_bound = {.busy = gate_busy, .ctx = &busy_flag, .max_wait = 0};
    json_t *meta = json_pack("{s:{s:{s:n}, s:{s:n}}}", "metadata", "labels", SB_LABEL_WARM_POOL,
                             "annotations", SB_ANN_SAFE_TO_EVICT);
    json_t *selector = json_pack("{s:{s:{s:s}}}", "metadata", "labels", SB_LABEL_NAME_HASH, "h");

    busy_flag = false; /* nothing to make way for: at once */
    assert_int_equal(sb_pod_meta_wait_at(m, &g, "pod-1", meta, t0), 0);
    busy_flag = true;
    assert_int_equal(sb_pod_meta_wait_at(m, &g, "pod-1", meta, t0), W);
    assert_int_equal(sb_pod_meta_wait_at(m, &g, "pod-1", meta, t0 + W / 2), W - W / 2);
    busy_flag = false; /* the claims are served: the held patch goes at the next pass */
    assert_int_equal(sb_pod_meta_wait_at(m, &g, "pod-1", meta, t0 + W / 2 + 1), 0);
    busy_flag = true; /* busy again, but its bound counts from the first hold */
    assert_int_equal(sb_pod_meta_wait_at(m, &g, "pod-1", meta, t0 + W - 2), 2);
    assert_int_equal(sb_pod_meta_wait_at(m, &g, "pod-1", meta, t0 + W), 0);
    assert_int_equal(sb_pod_meta_wait_at(m, &g, "pod-1", meta, t0 + 3 * W), 0);
    /* written: the next change of that Pod starts a new hold */
    sb_defer_clear(m, "pod-1");
    assert_int_equal(sb_pod_meta_wait_at(m, &g, "pod-1", meta, t0 + 4 * W), W);
    sb_defer_clear(m, "pod-1");
    /* the Service-selector label is never held; neither without a gate or a bound */
    assert_int_equal(sb_pod_meta_wait_at(m, &g, "pod-2", selector, t0), 0);
    assert_int_equal(sb_pod_meta_wait_at(m, NULL, "pod-2", meta, t0), 0);
    assert_int_equal(sb_pod_meta_wait_at(m, &open_gate, "pod-2", meta, t0), 0);
    assert_int_equal(sb_pod_meta_wait_at(m, &no_bound, "pod-2", meta, t0), 0);
    /* nor without a memo to count the bound in */
    assert_int_equal(sb_pod_meta_wait_at(NULL, &g, "pod-2", meta, t0), 0);
    json_decref(meta);
    json_decref(selector);
}

static void test_instances_do_not_share(void **state)
{
    struct sb_memo *m = *state, *other = sb_memo_new();
    json_t *v = obj("uid-memo-6", "9");
    usec_t t0 = 5000 * USEC_PER_SEC;
    sb_memo_wrote_at(m, v, t0);
    assert_true(sb_memo_stale_at(m, v, t0 + 1));
    assert_false(sb_memo_stale_at(other, v, t0 + 1));
    assert_int_equal(sb_defer_wait_at(m, "uid-defer-6", W, t0), W);
    /* The other memo starts its own window; clearing it leaves the first one's. */
    assert_int_equal(sb_defer_wait_at(other, "uid-defer-6", W, t0 + W / 2), W);
    sb_defer_clear(other, "uid-defer-6");
    assert_int_equal(sb_defer_wait_at(m, "uid-defer-6", W, t0 + W / 2), W - W / 2);
    sb_memo_free(other);
    sb_defer_clear(m, "uid-defer-6");
    json_decref(v);
}

static void test_null_memo_remembers_nothing(void **state)
{
    json_t *v = obj("uid-memo-7", "1");
    (void)state;
    sb_memo_wrote_at(NULL, v, 5);
    assert_false(sb_memo_stale_at(NULL, v, 5));
    assert_int_equal(sb_defer_wait_at(NULL, "uid-defer-7", W, 5), 0);
    sb_defer_clear(NULL, "uid-defer-7");
    sb_memo_created_at(NULL, &KUBE_RES_PODS, "owner-7", v, 5);
    assert_null(sb_memo_created_get_at(NULL, &KUBE_RES_PODS, "owner-7", "x", NULL, 5));
    sb_memo_created_forget(NULL, &KUBE_RES_PODS, "owner-7", "x", NULL);
    sb_memo_free(NULL);
    json_decref(v);
}

/* ---- children created, not yet cached ---- */

static json_t *child(const char *name, const char *uid)
{
    json_t *o = json_pack("{s:{s:s, s:s}}", "metadata", "name", name, "uid", uid);
    assert_non_null(o);
    return o;
}

/* A Sandbox's Pod, Service and PVC records never evict one another, whatever its UID:
 * 5,000 Sandboxes, each with the three recorded one after the other, all three answer.
 * (With one slot chosen by a hash of owner, kind and name, about five in 5,000 had their
 * Pod and Service in one slot.) */
static void test_created_kinds_apart(void **state)
{
    struct sb_memo *m = *state;
    usec_t t0 = 9000 * USEC_PER_SEC;
    for (int i = 0; i < 5000; i++) {
        char owner[40], name[32];
        json_t *pod, *svc, *pvc, *got[3];
        (void)snprintf(owner, sizeof(owner), "0a1b2c3d-%04d-4e5f-8a9b-%012d", i % 9973, i);
        (void)snprintf(name, sizeof(name), "sb-%d", i);
        pod = child(name, "u-pod");
        svc = child(name, "u-svc");
        pvc = child(name, "u-pvc");
        sb_memo_created_at(m, &KUBE_RES_PODS, owner, pod, t0);
        sb_memo_created_at(m, &KUBE_RES_SERVICES, owner, svc, t0);
        sb_memo_created_at(m, &KUBE_RES_PVCS, owner, pvc, t0);
        got[0] = sb_memo_created_get_at(m, &KUBE_RES_PODS, owner, name, NULL, t0);
        got[1] = sb_memo_created_get_at(m, &KUBE_RES_SERVICES, owner, name, NULL, t0);
        got[2] = sb_memo_created_get_at(m, &KUBE_RES_PVCS, owner, name, NULL, t0);
        assert_true(got[0] && json_equal(got[0], pod));
        assert_true(got[1] && json_equal(got[1], svc));
        assert_true(got[2] && json_equal(got[2], pvc));
        for (int k = 0; k < 3; k++)
            json_decref(got[k]);
        json_decref(pod);
        json_decref(svc);
        json_decref(pvc);
    }
}

/* The record answers for that owner, kind and name only, until a pass has seen the child
 * in the cache. */
static void test_created_until_seen(void **state)
{
    struct sb_memo *m = *state;
    json_t *pod = child("sb-1", "pod-uid-1"), *got;
    usec_t t0 = 7000 * USEC_PER_SEC, left = 0;
    assert_null(sb_memo_created_get_at(m, &KUBE_RES_PODS, "owner-1", "sb-1", &left, t0));
    sb_memo_created_at(m, &KUBE_RES_PODS, "owner-1", pod, t0);
    got = sb_memo_created_get_at(m, &KUBE_RES_PODS, "owner-1", "sb-1", &left, t0 + 1000);
    assert_true(json_equal(got, pod)); /* a copy: the record keeps text */
    assert_ptr_not_equal(got, pod);
    assert_int_equal(left, SB_MEMO_TTL - 1000);
    json_decref(got);
    /* another kind of the same name (the Sandbox's Service), owner or name */
    assert_null(sb_memo_created_get_at(m, &KUBE_RES_SERVICES, "owner-1", "sb-1", NULL, t0));
    assert_null(sb_memo_created_get_at(m, &KUBE_RES_PODS, "owner-2", "sb-1", NULL, t0));
    assert_null(sb_memo_created_get_at(m, &KUBE_RES_PODS, "owner-1", "sb-2", NULL, t0));
    /* the cache shows a Pod of that name: the record goes */
    sb_memo_created_forget(m, &KUBE_RES_PODS, "owner-1", "sb-1", NULL);
    assert_null(sb_memo_created_get_at(m, &KUBE_RES_PODS, "owner-1", "sb-1", NULL, t0 + 1));
    json_decref(pod);
}

/* A record keeps the reply as text in one allocation, not as a parse tree: 300 Pods
 * recorded leave no jansson allocation behind, where a tree is a hundred small ones each
 * (placed between long-lived cache entries, they left the heap fragmented: 15-20 MiB more
 * RSS at 10,000 Sandboxes). A read's copy is the caller's alone, and equal to the Pod. */
static json_t *pod_of(int i)
{
    char name[32], uid[40];
    (void)snprintf(name, sizeof(name), "sb-%d", i);
    (void)snprintf(uid, sizeof(uid), "pod-uid-%d", i);
    json_t *pod = json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s, s:s}}, s:{s:[{s:s, s:s, s:[s, s], s:[{s:i}]}]},"
        " s:{s:s}}",
        "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "uid", uid, "namespace",
        "default", "labels", "agents.x-k8s.io/sandbox-name-hash", "abc123", "app", "demo", "spec",
        "containers", "name", "main", "image", "busybox:local", "command", "sleep", "infinity",
        "ports", "containerPort", 8888, "status", "phase", "Pending");
    assert_non_null(pod);
    return pod;
}

static void test_created_holds_text(void **state)
{
    struct sb_memo *m = *state;
    usec_t t0 = 11000 * USEC_PER_SEC;
    json_t *last = pod_of(299), *got;
    long before = atomic_load(&json_live);
    for (int i = 0; i < 300; i++) {
        char owner[40];
        json_t *pod = i == 299 ? json_incref(last) : pod_of(i);
        (void)snprintf(owner, sizeof(owner), "owner-%d", i);
        sb_memo_created_at(m, &KUBE_RES_PODS, owner, pod, t0);
        json_decref(pod);
    }
    assert_int_equal(atomic_load(&json_live), before);
    /* the last one recorded (the table is lossy: an earlier one may have been evicted) */
    got = sb_memo_created_get_at(m, &KUBE_RES_PODS, "owner-299", "sb-299", NULL, t0 + 1);
    assert_true(got && json_equal(got, last));
    assert_ptr_not_equal(got, last);
    json_decref(got);
    assert_int_equal(atomic_load(&json_live), before);
    json_decref(last);
}

/* Past SB_MEMO_TTL the record is dropped: a pass creates again (and learns the truth). */
static void test_created_expires(void **state)
{
    struct sb_memo *m = *state;
    json_t *pvc = child("data-sb-3", "pvc-uid-3"), *got;
    usec_t t0 = 8000 * USEC_PER_SEC;
    sb_memo_created_at(m, &KUBE_RES_PVCS, "owner-3", pvc, t0);
    got = sb_memo_created_get_at(m, &KUBE_RES_PVCS, "owner-3", "data-sb-3", NULL,
                                 t0 + SB_MEMO_TTL - 1);
    assert_true(json_equal(got, pvc));
    json_decref(got);
    assert_null(
        sb_memo_created_get_at(m, &KUBE_RES_PVCS, "owner-3", "data-sb-3", NULL, t0 + SB_MEMO_TTL));
    /* dropped, not only hidden: a clock going back does not bring it back */
    assert_null(sb_memo_created_get_at(m, &KUBE_RES_PVCS, "owner-3", "data-sb-3", NULL, t0));
    /* nor does a time before the record */
    sb_memo_created_at(m, &KUBE_RES_PVCS, "owner-3", pvc, t0);
    assert_null(sb_memo_created_get_at(m, &KUBE_RES_PVCS, "owner-3", "data-sb-3", NULL, t0 - 1));
    sb_memo_created_forget(m, &KUBE_RES_PVCS, "owner-3", "data-sb-3", NULL);
    json_decref(pvc);
}

/* A deletion seen forgets that very child only, not a newer one of the same name; a
 * second create of the same name replaces the record (the first one's reference is
 * dropped: the sanitizer build would report a leak). */
static void test_created_forget_by_uid(void **state)
{
    struct sb_memo *m = *state;
    json_t *old = child("sb-4", "pod-uid-old"), *new = child("sb-4", "pod-uid-new"), *got;
    usec_t t0 = 9000 * USEC_PER_SEC;
    sb_memo_created_at(m, &KUBE_RES_PODS, "owner-4", old, t0);
    sb_memo_created_at(m, &KUBE_RES_PODS, "owner-4", new, t0 + 1);
    sb_memo_created_forget(m, &KUBE_RES_PODS, "owner-4", "sb-4", "pod-uid-old");
    got = sb_memo_created_get_at(m, &KUBE_RES_PODS, "owner-4", "sb-4", NULL, t0 + 2);
    assert_true(json_equal(got, new));
    json_decref(got);
    sb_memo_created_forget(m, &KUBE_RES_SERVICES, "owner-4", "sb-4", "pod-uid-new");
    got = sb_memo_created_get_at(m, &KUBE_RES_PODS, "owner-4", "sb-4", NULL, t0 + 2);
    assert_true(json_equal(got, new)); /* that UID under another kind: not this record */
    json_decref(got);
    sb_memo_created_forget(m, &KUBE_RES_PODS, "owner-4", "sb-4", "pod-uid-new");
    assert_null(sb_memo_created_get_at(m, &KUBE_RES_PODS, "owner-4", "sb-4", NULL, t0 + 2));
    json_decref(old);
    json_decref(new);
}

/* A child of kind kind named name with uid, controlled by owner_uid of kind owner_kind. */
static json_t *owned_child(const char *name, const char *uid, const char *owner_kind,
                           const char *owner_uid)
{
    json_t *o = json_pack("{s:{s:s, s:s, s:[{s:s, s:s, s:s, s:s, s:b}]}}", "metadata", "name", name,
                          "uid", uid, "ownerReferences", "apiVersion", SB_API_VERSION, "kind",
                          owner_kind, "name", "sb-6", "uid", owner_uid, "controller", 1);
    assert_non_null(o);
    return o;
}

/* The deletion seen by the child informers (any of the three kinds, not said which):
 * that very child's record goes, under its own kind; a newer child of the same name, a
 * child of another kind of owner or with no owner keeps whatever record there is. */
static void test_created_gone(void **state)
{
    struct sb_memo *m = *state;
    json_t *pod = child("sb-6", "pod-uid-6"), *svc = child("sb-6", "svc-uid-6"), *got;
    json_t *pod_gone = owned_child("sb-6", "pod-uid-6", SB_KIND, "owner-6");
    json_t *older = owned_child("sb-6", "svc-uid-older", SB_KIND, "owner-6");
    json_t *foreign = owned_child("sb-6", "svc-uid-6", "ReplicaSet", "owner-6");
    json_t *orphan = child("sb-6", "svc-uid-6");
    usec_t t0 = 9200 * USEC_PER_SEC;
    sb_memo_created_at(m, &KUBE_RES_PODS, "owner-6", pod, t0);
    sb_memo_created_at(m, &KUBE_RES_SERVICES, "owner-6", svc, t0);
    sb_memo_created_gone(m, older);
    sb_memo_created_gone(m, foreign);
    sb_memo_created_gone(m, orphan);
    sb_memo_created_gone(NULL, pod_gone);
    got = sb_memo_created_get_at(m, &KUBE_RES_SERVICES, "owner-6", "sb-6", NULL, t0 + 1);
    assert_true(json_equal(got, svc));
    json_decref(got);
    got = sb_memo_created_get_at(m, &KUBE_RES_PODS, "owner-6", "sb-6", NULL, t0 + 1);
    assert_true(json_equal(got, pod)); /* a copy: the record keeps text */
    assert_ptr_not_equal(got, pod);
    json_decref(got);
    sb_memo_created_gone(m, pod_gone);
    assert_null(sb_memo_created_get_at(m, &KUBE_RES_PODS, "owner-6", "sb-6", NULL, t0 + 1));
    got = sb_memo_created_get_at(m, &KUBE_RES_SERVICES, "owner-6", "sb-6", NULL, t0 + 1);
    assert_true(json_equal(got, svc)); /* the Service of the same name stays */
    json_decref(got);
    sb_memo_created_forget(m, &KUBE_RES_SERVICES, "owner-6", "sb-6", NULL);
    json_decref(pod);
    json_decref(svc);
    json_decref(pod_gone);
    json_decref(older);
    json_decref(foreign);
    json_decref(orphan);
}

/* Objects the table cannot key are not recorded; records still held when the memo is
 * freed are released with it (the teardown; the sanitizer build checks). */
static void test_created_unusable_and_held(void **state)
{
    struct sb_memo *m = *state;
    char long_uid[64];
    json_t *no_uid = json_pack("{s:{s:s}}", "metadata", "name", "sb-5");
    json_t *pod = child("sb-5", "pod-uid-5");
    usec_t t0 = 9500 * USEC_PER_SEC;
    memset(long_uid, 'u', sizeof(long_uid) - 1);
    long_uid[sizeof(long_uid) - 1] = '\0';
    sb_memo_created_at(m, &KUBE_RES_PODS, "owner-5", no_uid, t0);
    assert_null(sb_memo_created_get_at(m, &KUBE_RES_PODS, "owner-5", "sb-5", NULL, t0));
    sb_memo_created_at(m, &KUBE_RES_PODS, long_uid, pod, t0);
    assert_null(sb_memo_created_get_at(m, &KUBE_RES_PODS, long_uid, "sb-5", NULL, t0));
    sb_memo_created_at(m, NULL, "owner-5", pod, t0);
    assert_null(sb_memo_created_get_at(m, NULL, "owner-5", "sb-5", NULL, t0));
    sb_memo_created_at(m, &KUBE_RES_PODS, "owner-5", pod, t0); /* held at teardown */
    json_decref(no_uid);
    json_decref(pod);
}

static int setup(void **state)
{
    *state = sb_memo_new();
    return 0;
}

static int teardown(void **state)
{
    sb_memo_free(*state);
    return 0;
}

int main(void)
{
    json_set_alloc_funcs(json_counted_malloc, json_counted_free);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_older_versions_are_stale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_only_for_replaced_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expires_after_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unusable_objects_never_stale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defer_window_from_first_sighting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defer_collision_writes_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memo_bucket_holds_eight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pod_meta_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_instances_do_not_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_created_until_seen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_created_expires, setup, teardown),
        cmocka_unit_test_setup_teardown(test_created_forget_by_uid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_created_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_created_kinds_apart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_created_holds_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_created_unusable_and_held, setup, teardown),
        cmocka_unit_test(test_null_memo_remembers_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
