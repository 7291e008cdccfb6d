/* SPDX-License-Identifier: Apache-2.0 */
/* Limits and defaults of sandbox-router (sizes in bytes, times in microseconds). */
#pragma once

#include "common/clock.h"

#define LIMIT_ROUTER_CONNECT_TIMEOUT (5 * USEC_PER_SEC)    /* upstream TCP connect */
#define LIMIT_ROUTER_IDLE_TIMEOUT    (60 * USEC_PER_SEC)   /* no byte either way (HTTP) */
#define LIMIT_ROUTER_PROXY_TIMEOUT   (180 * USEC_PER_SEC)  /* one request, head to end */
#define LIMIT_ROUTER_TUNNEL_IDLE     (3600 * USEC_PER_SEC) /* upgraded tunnel, no byte */
#define LIMIT_ROUTER_SHUTDOWN_GRACE  (30 * USEC_PER_SEC)   /* drain budget */
#define LIMIT_ROUTER_POOL_IDLE       (30 * USEC_PER_SEC)   /* idle pooled upstream conn */
#define LIMIT_ROUTER_POOL_PER_HOST   128                   /* idle conns per ip:port */
#define LIMIT_ROUTER_POOL_TOTAL      1024                  /* idle conns in all */
#define LIMIT_ROUTER_UPSTREAM_HEAD   (64u * 1024)          /* an upstream response head */
#define LIMIT_ROUTER_UPSTREAM_QUEUE  (1u * 1024 * 1024)    /* bytes queued to one upstream */
#define LIMIT_ROUTER_TUNNEL_QUEUE    (1u * 1024 * 1024)    /* bytes queued per tunnel side */
#define LIMIT_ROUTER_REQ_HEAD        (80u * 1024)          /* a request head sent upstream */
#define LIMIT_ROUTER_AUTH_TTL        (30 * USEC_PER_SEC)   /* cached review decisions */
#define LIMIT_ROUTER_AUTH_ERROR_TTL  (1 * USEC_PER_SEC)    /* cached review API errors */
#define LIMIT_ROUTER_AUTH_CACHE      4096                  /* entries per review cache */
#define LIMIT_ROUTER_AUTH_QUEUE      1024                  /* pending review jobs */
#define LIMIT_ROUTER_AUTH_WORKERS    4                     /* review threads */
#define LIMIT_ROUTER_TOKEN           (16u * 1024)          /* a bearer token */
#define LIMIT_ROUTER_AUTH_GROUPS     64                    /* groups kept per user */
#define LIMIT_ROUTER_USER            512                   /* a username */
