/* SPDX-License-Identifier: Apache-2.0 */
/* A scripted HTTP/1.1 server for unit tests, standing in for an API server whose answers
 * a test decides: a thread accepts connections on 127.0.0.1 (at most SCRIPT_SRV_CONNS at
 * once), reads each request (its head, a body sized by Content-Length) and hands it to
 * the test's handler, which answers on the connection. Loopback only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "kube/client.h"

#define SCRIPT_SRV_CONNS 16

struct script_req {
    char method[16];
    char target[2048];
    const char *head; /* the request line and headers, NUL-terminated (script_header) */
    const char *body; /* NUL-terminated copy */
    size_t body_len;
};

/** Answers rq on fd (script_respond). Returns 0 to keep the connection, 1 to close it.
 * Runs on the server's thread, with its lock held when the server was started locked. */
typedef int script_handler(int fd, const struct script_req *rq, void *ctx);

struct script_srv;

/** Starts a server on a free port with handler h (ctx: its argument). locked: h runs
 * under the server's lock, which the test takes (script_srv_lock) to read or change what
 * h keeps. Asserts (cmocka) on failure. Stop with script_srv_stop. */
struct script_srv *script_srv_start(script_handler *h, void *ctx, bool locked);
/** Stops the thread, closes every connection and frees s. */
void script_srv_stop(struct script_srv *s);
int script_srv_port(const struct script_srv *s);
/** Replaces the handler (the next request gets it). */
void script_srv_set_handler(struct script_srv *s, script_handler *h, void *ctx);
void script_srv_lock(struct script_srv *s);
void script_srv_unlock(struct script_srv *s);
/** Connections accepted so far; script_srv_reset_accepted sets the count to 0. */
int script_srv_accepted(struct script_srv *s);
void script_srv_reset_accepted(struct script_srv *s);

/** Sends all len bytes of p (gives up when the peer is gone). */
void script_send(int fd, const char *p, size_t len);
/** A whole answer: status, Content-Type application/json, extra header lines (each
 * ending in CRLF; NULL: none) and body. */
void script_respond(int fd, long status, const char *extra, const char *body);
/** A metav1 Status failure (new string): reason NULL picks the usual one for code. */
char *script_failure(long code, const char *reason);
/** The value of header name (given as "\r\nName: ") in head into out ("" when absent). */
void script_header(const char *head, const char *name, char *out, size_t size);

/** A kube client of s: a kubeconfig is written to dir/kubeconfig, with namespace ns and
 * the user map user (YAML flow, e.g. "{token: t}"). Asserts on failure. */
struct kube_client *script_client(const struct script_srv *s, const char *dir, const char *ns,
                                  const char *user, const struct kube_client_opts *o);

/** A scripted server with a kube client of it: a unit test's usual set-up. */
struct script_env {
    struct script_srv *srv;
    struct kube_client *client;
    char dir[64]; /* a temporary directory holding the client's kubeconfig */
};

/** Starts env's server (h, ctx and locked as for script_srv_start) and a client of it
 * with namespace ns and a token; o NULL: no retries and a 5 s timeout. Asserts on
 * failure. */
void script_env_start(struct script_env *env, script_handler *h, void *ctx, bool locked,
                      const char *ns, const struct kube_client_opts *o);
/** Frees the client, stops the server and removes the kubeconfig and its directory. */
void script_env_stop(struct script_env *env);
