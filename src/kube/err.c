/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes API errors: metav1.Status parsing, errno mapping and predicates. */
#include "kube/err.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/str.h"

void kube_err_clear(struct kube_err *e)
{
    if (!e)
        return;
    memset(e, 0, sizeof(*e));
}

int kube_err_code_for_status(long http_status, const char *reason)
{
    if (http_status >= 200 && http_status < 300)
        return 0;
    switch (http_status) {
    case 400:
    case 422:
        return -EINVAL;
    case 401:
        return -EACCES;
    case 403:
        return -EPERM;
    case 404:
        return -ENOENT;
    case 405:
        return -EOPNOTSUPP;
    case 409:
        return reason && strcmp(reason, "AlreadyExists") == 0 ? -EEXIST : -EBUSY;
    case 410:
        return -ESTALE;
    case 413:
        return -E2BIG;
    case 429:
        return -EAGAIN;
    case 504:
        return -ETIMEDOUT;
    default:
        break;
    }
    if (http_status >= 500 && http_status < 600)
        return -EIO;
    return -EPROTO;
}

/* Copies printable text of a non-Status body into the message, so a proxy's HTML or
 * plain-text error still says something. */
static void message_from_text(struct kube_err *e, const char *body, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < sizeof(e->message); i++) {
        unsigned char ch = (unsigned char)body[i];
        e->message[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : ' ';
    }
    e->message[n] = '\0';
    struct str t = str_trim(str_make(e->message, n));
    memmove(e->message, t.p, t.len);
    e->message[t.len] = '\0';
}

/* Whether a Status's details name the cause NamespaceTerminating (a StatusCause's type
 * is its "reason" on the wire). */
static bool ns_terminating(const json_t *details)
{
    const json_t *causes = json_object_get(details, "causes"), *c;
    size_t i;
    json_array_foreach(causes, i, c)
    {
        const char *type = json_string_value(json_object_get(c, "reason"));
        if (type && strcmp(type, "NamespaceTerminating") == 0)
            return true;
    }
    return false;
}

static void fill_from_status(struct kube_err *e, const json_t *st)
{
    const char *reason = json_string_value(json_object_get(st, "reason"));
    const char *message = json_string_value(json_object_get(st, "message"));
    json_t *details = json_object_get(st, "details");
    json_int_t ra = json_integer_value(json_object_get(details, "retryAfterSeconds"));
    json_int_t code = json_integer_value(json_object_get(st, "code"));

    if (reason)
        (void)str_copy(e->reason, sizeof(e->reason), reason);
    if (message)
        (void)str_copy(e->message, sizeof(e->message), message);
    if (ra > 0) /* the longest honoured is far below this; a long cannot wrap then */
        e->retry_after_s = ra < 86400 ? (long)ra : 86400;
    e->ns_terminating = ns_terminating(details);
    if (e->http_status == 0 && code > 0 && code < 1000)
        e->http_status = (long)code;
}

void kube_err_from_response(struct kube_err *e, long http_status, const char *body, size_t len)
{
    if (!e)
        return;
    kube_err_clear(e);
    e->http_status = http_status;
    json_t *st = NULL;
    if (body && len > 0)
        st = json_loadb(body, len, 0, NULL);
    if (json_is_object(st))
        fill_from_status(e, st);
    else if (body && len > 0)
        message_from_text(e, body, len);
    json_decref(st);
    if (e->message[0] == '\0')
        (void)snprintf(e->message, sizeof(e->message), "HTTP status %ld", e->http_status);
    e->code = kube_err_code_for_status(e->http_status, e->reason);
    if (e->ns_terminating && e->http_status == 403)
        e->code = -ESHUTDOWN;
    else
        e->ns_terminating = false;
}

void kube_err_set(struct kube_err *e, int code, const char *fmt, ...)
{
    if (!e)
        return;
    kube_err_clear(e);
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    if (n < 0)
        e->message[0] = '\0';
}

static bool has_reason(const struct kube_err *e, const char *reason)
{
    return strcmp(e->reason, reason) == 0;
}

bool kube_err_is_not_found(const struct kube_err *e)
{
    return e && (e->http_status == 404 || has_reason(e, "NotFound"));
}

bool kube_err_is_conflict(const struct kube_err *e)
{
    return e && (has_reason(e, "Conflict") || (e->http_status == 409 && e->reason[0] == '\0'));
}

bool kube_err_is_already_exists(const struct kube_err *e)
{
    return e && has_reason(e, "AlreadyExists");
}

bool kube_err_is_gone(const struct kube_err *e)
{
    return e && (e->http_status == 410 || has_reason(e, "Expired") || has_reason(e, "Gone"));
}

bool kube_err_is_too_many_requests(const struct kube_err *e)
{
    return e && (e->http_status == 429 || has_reason(e, "TooManyRequests"));
}

bool kube_err_is_invalid(const struct kube_err *e)
{
    return e && (e->http_status == 422 || has_reason(e, "Invalid"));
}

bool kube_err_is_forbidden(const struct kube_err *e)
{
    return e && (e->http_status == 403 || has_reason(e, "Forbidden"));
}

bool kube_err_is_unauthorized(const struct kube_err *e)
{
    return e && (e->http_status == 401 || has_reason(e, "Unauthorized"));
}

static bool is_transport_code(int code)
{
    switch (code) {
    case -ECONNREFUSED:
    case -ECONNRESET:
    case -ECONNABORTED:
    case -ETIMEDOUT:
    case -EHOSTUNREACH:
    case -ENETUNREACH:
    case -EPIPE:
    case -EIO:
    case -EAGAIN:
        return true;
    default:
        return false;
    }
}

bool kube_err_outcome_unknown(const struct kube_err *e)
{
    if (!e)
        return false;
    if (e->maybe_done || e->http_status >= 500)
        return true;
    return e->http_status == 0 && e->sent;
}

bool kube_err_is_retryable(const struct kube_err *e)
{
    if (!e)
        return false;
    if (e->http_status == 429)
        return true;
    if (e->http_status >= 500 && e->http_status < 600)
        return e->http_status != 501 && e->http_status != 505;
    return e->http_status == 0 && is_transport_code(e->code);
}
