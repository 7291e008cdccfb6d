/* SPDX-License-Identifier: Apache-2.0 */
/* Socket options of accepted connections. */
#pragma once

#include <uv.h>

/** Turns on TCP keepalive probes (LIMIT_HTTP_KEEPALIVE_*) on tcp's socket: a silent
 * connection whose peer vanished without a FIN or RST (a partition, a host gone to sleep,
 * a node lost) fails its reads, so what the connection holds (a silent call, its
 * process, a request waiting on it) is let go, where it used to be held for ever. (No
 * TCP_USER_TIMEOUT: recent kernels apply it to a peer that keeps a zero window too, which
 * would cut a client that only reads slowly before the servers' own stall bounds.) Best
 * effort: an option the kernel refuses is left as it is. */
void http_sock_keepalive(uv_tcp_t *tcp);
