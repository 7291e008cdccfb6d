/* SPDX-License-Identifier: Apache-2.0 */
/* A bounded, lossy table of the Sandbox versions our status writes replaced. */
#include "controller/sandbox_memo.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "kube/obj.h"

#define LIMIT_SB_MEMO_SLOTS 8192u /* power of two */
#define SB_MEMO_UID         40
#define SB_MEMO_RV          24

struct memo_slot {
    char uid[SB_MEMO_UID];
    char rv[SB_MEMO_RV];
    usec_t at; /* CLOCK_MONOTONIC time of the write */
};

static struct memo_slot slots[LIMIT_SB_MEMO_SLOTS];
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static struct memo_slot *slot_of(const char *uid)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = uid; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return &slots[h & (LIMIT_SB_MEMO_SLOTS - 1)];
}

static bool fits(const char *uid, const char *rv)
{
    return uid && rv && strlen(uid) < SB_MEMO_UID && strlen(rv) < SB_MEMO_RV;
}

bool sb_memo_stale_at(const json_t *sb, usec_t now)
{
    const char *uid = kube_obj_uid(sb), *rv = kube_obj_resource_version(sb);
    struct memo_slot *s;
    bool stale;

    if (!fits(uid, rv))
        return false;
    s = slot_of(uid);
    pthread_mutex_lock(&memo_lock);
    stale = strcmp(s->uid, uid) == 0 && strcmp(s->rv, rv) == 0 && now >= s->at &&
            now - s->at < SB_MEMO_TTL;
    pthread_mutex_unlock(&memo_lock);
    return stale;
}

void sb_memo_wrote_at(const json_t *sb, usec_t now)
{
    const char *uid = kube_obj_uid(sb), *rv = kube_obj_resource_version(sb);
    struct memo_slot *s;

    if (!fits(uid, rv))
        return;
    s = slot_of(uid);
    pthread_mutex_lock(&memo_lock);
    memcpy(s->uid, uid, strlen(uid) + 1);
    memcpy(s->rv, rv, strlen(rv) + 1);
    s->at = now;
    pthread_mutex_unlock(&memo_lock);
}

bool sb_memo_stale(const json_t *sb)
{
    return sb_memo_stale_at(sb, clock_now());
}

void sb_memo_wrote(const json_t *sb)
{
    sb_memo_wrote_at(sb, clock_now());
}
