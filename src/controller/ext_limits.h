/* SPDX-License-Identifier: Apache-2.0 */
/* Limits and timing constants of the extensions controllers. */
#pragma once

#include "common/clock.h"

#define LIMIT_EXT_MAX_POOL_REPLICAS 1000                    /* --max-pool-replicas default */
#define LIMIT_EXT_MAX_BATCH         300                     /* creates/deletes per pool pass */
#define LIMIT_EXT_EXPECT_TIMEOUT    (5 * 60 * USEC_PER_SEC) /* lost watch event fallback */
#define LIMIT_EXT_EXPECT_RECHECK    (30 * USEC_PER_SEC)     /* re-check of unmet expectations */
#define LIMIT_EXT_READY_GRACE       (5 * 60 * USEC_PER_SEC) /* non-Ready pool member grace */
#define LIMIT_EXT_UNSCHED_RECHECK   (60 * USEC_PER_SEC)
#define LIMIT_EXT_MISSING_REQUEUE   (60 * USEC_PER_SEC)      /* missing pool or template */
#define LIMIT_EXT_CACHE_LAG_REQUEUE (200 * USEC_PER_MSEC)    /* AlreadyExists on a cold create */
#define LIMIT_EXT_CLAIM_TIMEOUT     (10 * 60 * USEC_PER_SEC) /* --claim-timeout default */
#define LIMIT_EXT_ADOPT_ATTEMPTS    8                        /* warm candidates tried per pass */
#define LIMIT_EXT_CREATE_PARALLEL   32 /* bound on --sandbox-warm-pool-create-parallelism */
#define LIMIT_EXT_DOMAINS_FILE      (64u * 1024) /* allowed-label-domains file */
#define LIMIT_EXT_LABEL_VALUE       63
#define LIMIT_EXT_NAME_PART         63  /* qualified-name name part */
#define LIMIT_EXT_PREFIX            253 /* qualified-name DNS prefix */
