/* SPDX-License-Identifier: Apache-2.0 */
/* Structured Kubernetes API errors, parsed from the metav1.Status body the API server
 * returns, with predicates. Filled as an optional out-parameter (reterr), never global. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct kube_err {
    int code;            /* negative errno of the failure (-ENOENT, -EEXIST, -ECONNREFUSED...) */
    long http_status;    /* HTTP status, 0 when no response arrived */
    char reason[64];     /* Status.reason: NotFound, Conflict, AlreadyExists, Expired, ... */
    char message[1024];  /* Status.message, or a transport error text; cut to fit */
    long retry_after_s;  /* Retry-After header or Status.details.retryAfterSeconds, else 0 */
    bool ns_terminating; /* a create refused because its namespace is being deleted (403,
                          * cause NamespaceTerminating); code is then -ESHUTDOWN */
    bool maybe_done;     /* an earlier attempt of the request failed after it was sent (a 5xx,
                          * a cut connection), so the server may have carried it out: e.g. a
                          * create retried into AlreadyExists may have made the object */
    bool sent;           /* the last attempt's request left (some of it) for the server:
                          * false for a failure before that (no connection, no token, TLS
                          * handshake, refused here), which the server cannot have acted on */
};

/** Resets e to "no error". */
void kube_err_clear(struct kube_err *e);
/** Fills e from an HTTP status and a response body (a Status object or anything else;
 * body may be NULL). Sets e->code from the status. */
void kube_err_from_response(struct kube_err *e, long http_status, const char *body, size_t len);
/** Fills e for a failure without a response (transport error), with message. */
void kube_err_set(struct kube_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** Maps an HTTP status to a negative errno: 404 -ENOENT, 409 conflict -EBUSY / already
 * exists -EEXIST (by reason), 410 -ESTALE, 429 -EAGAIN, 401 -EACCES, 403 -EPERM,
 * 422/400 -EINVAL, 5xx -EIO, 504 -ETIMEDOUT. (kube_err_from_response gives a 403 whose
 * cause is NamespaceTerminating -ESHUTDOWN instead.) */
int kube_err_code_for_status(long http_status, const char *reason);

bool kube_err_is_not_found(const struct kube_err *e);
bool kube_err_is_conflict(const struct kube_err *e);          /* 409 reason Conflict */
bool kube_err_is_already_exists(const struct kube_err *e);    /* 409 reason AlreadyExists */
bool kube_err_is_gone(const struct kube_err *e);              /* 410, or reason Expired */
bool kube_err_is_too_many_requests(const struct kube_err *e); /* 429 */
bool kube_err_is_invalid(const struct kube_err *e);           /* 422 */
bool kube_err_is_forbidden(const struct kube_err *e);         /* 403 */
bool kube_err_is_unauthorized(const struct kube_err *e);      /* 401 */
/** True for errors worth retrying as-is: 429, 5xx, transport failures. */
bool kube_err_is_retryable(const struct kube_err *e);
/** True when the failed request may still have been carried out, so its effect must be
 * read back before anything relies on it either way: an earlier attempt may have been
 * (maybe_done), a 5xx answered the last one, or no answer came after the request had left
 * (sent: a timeout, a cut connection, a cancel in the transfer, a 2xx whose body could
 * not be read). False for a 4xx and for failures before anything was sent (no
 * connection, no token, a TLS handshake, a create refused here for a terminating
 * namespace, a cancel before the attempt). NULL: false. */
bool kube_err_outcome_unknown(const struct kube_err *e);
