/* SPDX-License-Identifier: Apache-2.0 */
/* Warm-pool expectations: the over-creation guard. Per pool, the number of creates
 * sent but not yet seen in the cache and the UIDs of deletes sent but not yet seen.
 * A pool creates again only once its expectations are satisfied (all seen, or the
 * record is older than a timeout, when a lost watch event is assumed), so a reconcile
 * that runs on a cache which lags its own writes can never create twice.
 *
 * Thread-safe: one mutex; every call may come from any thread (informer handlers
 * lower expectations, workers raise them). Times are monotonic usec passed in. */
#pragma once

#include <stdbool.h>

#include "common/clock.h"

struct pool_expect;

/** Returns a new empty tracker whose records expire after timeout (0 = 5 minutes). */
struct pool_expect *pool_expect_new(usec_t timeout);
/** NULL is fine. */
void pool_expect_free(struct pool_expect *x);

/* The creates are recorded for the pool's UID: a pool deleted and made again under the
 * same name is another pool, and the creates of the first (their ADDED events, or their
 * record) never count for the second. uid NULL: any. */
/** Atomically: when pool's (uid's) expectations are satisfied, records n pending creates
 * of uid (and no pending deletes) and returns true; otherwise returns false. */
bool pool_expect_try_creations(struct pool_expect *x, const char *pool, const char *uid, int n,
                               usec_t now);
/** Lowers the pending creates of pool by n (a create seen, or a create that failed);
 * ignored when they were recorded for another pool UID than uid. */
void pool_expect_lower_creations(struct pool_expect *x, const char *pool, const char *uid, int n);
/** Records that uid of pool is about to be deleted (call before the DELETE). */
void pool_expect_deletion(struct pool_expect *x, const char *pool, const char *uid, usec_t now);
/** The delete of uid was seen (or failed): forget it. */
void pool_expect_deletion_observed(struct pool_expect *x, const char *pool, const char *uid);
/** True when uid's delete is pending (and the record has not expired). */
bool pool_expect_deleting(struct pool_expect *x, const char *pool, const char *uid, usec_t now);
/** True when nothing is pending for pool (or its record expired, or its creates are of
 * another pool UID than uid). */
bool pool_expect_satisfied(struct pool_expect *x, const char *pool, const char *uid, usec_t now);
/** Pending creates of pool (0 without a record). */
int pool_expect_pending_creations(struct pool_expect *x, const char *pool);
/** Drops pool's record. */
void pool_expect_forget(struct pool_expect *x, const char *pool);
