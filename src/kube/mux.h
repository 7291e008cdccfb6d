/* SPDX-License-Identifier: Apache-2.0 */
/* Private to src/kube: the client's request multiplexer. A few lanes each hold a curl
 * multi handle, and every unary request of the client's threads goes through one of them,
 * so that all of them share a few HTTP/2 connections (streams of one connection per lane)
 * instead of each thread keeping a TLS connection of its own. A lane has no thread of its
 * own: one of the threads waiting on it drives it (the first to come to an idle lane),
 * until its own transfer is done, and then hands the role to another waiter. So a request
 * on an idle lane runs without a thread switch. With 100
 * reconcile workers that is the difference between about 100 connections (their TLS state, buffers
 * and API server goroutines) and one. Streams (watches, port-forward) keep their own handles. */
#ifndef AS_KUBE_MUX_H
#define AS_KUBE_MUX_H

#include <stdbool.h>

#include <curl/curl.h>

struct kube__mux;

/** A multiplexer of lanes (at least 1), each with its own multi handle and so its own
 * connection (at most max_conns per host, more only when the server's stream limit is
 * reached); transfers go to the lanes in turn. Starts no thread. Never fails (aborts when
 * out of memory). */
struct kube__mux *kube__mux_new(int lanes, long max_conns);
/** Whether m can run transfers in this process: false in a child forked after its
 * creation (the connections belong to the parent; the caller runs
 * the transfer on its own handle instead) and for NULL. */
bool kube__mux_usable(const struct kube__mux *m);
/** Frees m and closes its connections. No transfer may be in flight. NULL is a no-op; in a
 * fork child nothing is freed or closed (the parent's connections stay intact). */
void kube__mux_free(struct kube__mux *m);
/** Runs the transfer set up on h on one of m's lanes and waits for it: the same result as
 * curl_easy_perform(h). h's callbacks run on whichever thread drives the lane (the
 * caller's, or another caller's while this one waits), and the caller may meanwhile run
 * other callers' callbacks: callbacks must not block on anything a caller of this
 * function may hold. h must not be in another multi handle. Sets CURLOPT_PIPEWAIT and
 * CURLOPT_PRIVATE on h. Returns CURLE_FAILED_INIT when curl refuses the transfer. */
CURLcode kube__mux_perform(struct kube__mux *m, CURL *h);

#endif
