/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for integration tests against the local kube-apiserver of hack/apiserver.sh:
 * kubeconfig and state-dir discovery, clients (admin or a static-token test user), a
 * unique namespace per test file, polling waits, CRD apply, etcd compaction and raw
 * HTTPS GETs (metrics). Test code only: failures are returned, never asserted here. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/err.h"

/** The admin kubeconfig: $AS_KUBECONFIG, else $AS_APISERVER_DIR/kubeconfig, else
 * <repo>/.cache/apiserver/kubeconfig (the repo found from $AS_TEST_DATA, which ctest
 * sets). Returns borrowed static storage, never NULL. */
const char *it_kubeconfig(void);
/** The hack/apiserver.sh state dir: $AS_APISERVER_DIR, else the kubeconfig's directory.
 * Returns borrowed static storage, never NULL. */
const char *it_state_dir(void);
/** Writes $AS_TEST_DATA/rel into out. Returns 0, -ENOENT without AS_TEST_DATA, -E2BIG. */
int it_data_path(const char *rel, char *out, size_t size);

/** Creates a client for the admin kubeconfig (opts may be NULL for defaults). Returns 0
 * and *ret (new, free with kube_client_free) or a negative errno with reterr filled
 * (may be NULL). */
int it_client_new(const struct kube_client_opts *opts, struct kube_client **ret,
                  struct kube_err *reterr);
/** Same for a static-token test user of tokens.csv ("alice", "bob", "as-throttled"),
 * through <state dir>/kubeconfig-<user>. */
int it_client_new_user(const char *user, const struct kube_client_opts *opts,
                       struct kube_client **ret, struct kube_err *reterr);
/** Copies user's static bearer token from <state dir>/tokens.csv into out. Returns 0,
 * -ENOENT (no such user or file) or -E2BIG. */
int it_user_token(const char *user, char *out, size_t size);

/** Creates a namespace named "<prefix>-<random>" (prefix borrowed, at most 40 bytes)
 * labelled agent-sandbox.test/integration=true and writes its name into out. Returns 0
 * or a negative errno with reterr filled (may be NULL). */
int it_ns_create(struct kube_client *c, const char *prefix, char *out, size_t size,
                 struct kube_err *reterr);
/** Deletes namespace ns and waits until it is gone (the namespace controller of
 * hack/apiserver.sh empties it). When it is still there after half of timeout, its
 * finalizer is removed through the finalize subresource. Returns 0 or -ETIMEDOUT or
 * another negative errno; 0 at once for a NULL client or an empty name (a teardown
 * after a setup that failed before either was made). */
int it_ns_delete(struct kube_client *c, const char *ns, usec_t timeout);

/** A condition polled by it_wait: true when satisfied. */
typedef bool it_cond_fn(void *ctx);
/** Calls fn(ctx) every few milliseconds (5 ms growing to 100 ms) until it returns true
 * or timeout passes. Returns 0 or -ETIMEDOUT. */
int it_wait(it_cond_fn *fn, void *ctx, usec_t timeout);
/** Polls GET of res ns/name until it returns 404. Returns 0 or -ETIMEDOUT (or another
 * error of the GET). */
int it_wait_gone(struct kube_client *c, const struct kube_res *res, const char *ns,
                 const char *name, usec_t timeout);
/** Like it_wait_gone, for the one object with that uid: done when GET returns 404 or an
 * object of that name with another uid (a controller may make it again at once).
 * Returns 0, -EINVAL for a NULL uid, -ETIMEDOUT, or another error of the GET. */
int it_wait_gone_uid(struct kube_client *c, const struct kube_res *res, const char *ns,
                     const char *name, const char *uid, usec_t timeout);

/** Loads a JSON (".json") or YAML (anything else) file into *ret (a new reference).
 * Returns 0, or a negative errno (-ENOENT, -EINVAL for a parse error). */
int it_load_file(const char *path, json_t **ret);
/** Applies the CRD in file path (server-side apply, field manager "as-integration",
 * forced) and waits until it is Established and its resource is served. Returns 0 or a
 * negative errno with reterr filled (may be NULL). */
int it_crd_apply(struct kube_client *c, const char *path, usec_t timeout, struct kube_err *reterr);

/** GET of a raw path (e.g. "/metrics") on the API server with the admin certificate;
 * appends the body to out (bounded by out's limit). Returns the HTTP status (> 0) or a
 * negative errno. */
int it_http_get(const char *path, struct buf *out);
/** Current etcd revision (POST /v3/kv/range on the etcd JSON gateway of
 * $AS_ETCD_ENDPOINT or <state dir>/etcd-endpoint). Returns 0 and *ret, or a negative
 * errno. */
int it_etcd_revision(int64_t *ret);
/** Compacts etcd up to revision (physical). Returns 0 or a negative errno. */
int it_etcd_compact(int64_t revision);

/** cmocka helper: fails the test with the expression, the errno and the API error text
 * when rc is negative. Use in test functions only. */
#define IT_OK(expr, err)                                                             \
    do {                                                                             \
        int it_rc_ = (expr);                                                         \
        if (it_rc_ < 0)                                                              \
            fail_msg("%s = %d (HTTP %ld %s: %s)", #expr, it_rc_, (err)->http_status, \
                     (err)->reason, (err)->message);                                 \
    } while (0)
