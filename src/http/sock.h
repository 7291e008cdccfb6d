/* SPDX-License-Identifier: Apache-2.0 */
/* Socket options of accepted connections. */
#pragma once

#include <uv.h>

/** Turns on TCP keepalive probes (LIMIT_HTTP_KEEPALIVE_*) and TCP_USER_TIMEOUT
 * (LIMIT_HTTP_USER_TIMEOUT) on tcp's socket: a peer that vanished without a FIN or RST
 * (a partition, a host gone to sleep, a node lost) fails the socket's reads, so what the
 * connection holds (a silent call, its process, a request waiting on it) is let go,
 * where it used to be held for ever. Best effort: an option the kernel refuses is left
 * as it is. */
void http_sock_keepalive(uv_tcp_t *tcp);
