/* SPDX-License-Identifier: Apache-2.0 */
/* The connection from kubectl-sandbox to one sandbox's sandboxd, over libcurl, in one of
 * three modes:
 *   proxy   (default) the API server's pod proxy:
 *           https://APISERVER/api/v1/namespaces/NS/pods/POD:PORT/proxy/v1/...
 *           with the kubeconfig's TLS material and bearer token;
 *   router  --router-url: sandbox-router with X-Sandbox-ID/-Namespace/-Port headers and
 *           the kubeconfig's bearer token (the router checks it with a TokenReview);
 *   direct  --sandboxd-url: one sandboxd at that URL, for debugging (no cluster needed;
 *           $AGENT_SANDBOX_SANDBOXD_TOKEN is sent as its bearer token). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "common/buf.h"
#include "kube/sbd_client.h"

enum cli_sbd_mode {
    CLI_SBD_PROXY,
    CLI_SBD_ROUTER,
    CLI_SBD_DIRECT,
};

struct cli_sbd {
    enum cli_sbd_mode mode;
    struct sbd_client *client; /* owned: base URL, bearer token, routing headers, TLS */
    struct kube_config *cfg;   /* in proxy mode the client's TLS material, else NULL */
    bool cfg_borrowed;         /* cfg is the caller's (cli_sbd_open_server), not freed */
    char what[160];            /* "sandbox NS/NAME" or the direct URL, for messages */
};

/** Appends the pod-proxy prefix for port of pod in ns to out:
 * SERVER/api/v1/namespaces/NS/pods/POD:PORT/proxy (segments percent-escaped). Returns 0,
 * -EINVAL for an empty or "."/".." segment, or -E2BIG. */
int cli_sbd_proxy_base(const char *server, const char *ns, const char *pod, unsigned port,
                       struct buf *out);
/** Appends "/v1/files/" and path percent-escaped except '/' (a leading '/' is dropped:
 * sandboxd treats paths as relative to its root). Returns 0 or -E2BIG. */
int cli_sbd_files_path(const char *path, struct buf *out);
/** Writes a readable text for a failed sandboxd response (its {"code","message"}, the
 * router's {"detail"}, an API server Status message, or the body itself) into out. */
void cli_sbd_error_text(long status, const char *body, size_t len, char *out, size_t size);
/** Whether body is sandboxd's own error answer {"code": code, "message": ...}: not a
 * proxy's, the router's or the API server's (a pod proxy's 404 is "pod not found"). */
bool cli_sbd_error_is(const char *body, size_t len, const char *code);

/** Connects to the sandboxd of sandbox name (unused in direct mode). In proxy and router
 * mode the Sandbox is read first: it must exist and be Ready. Prints why not and returns
 * a CLI exit code; on CLI_OK *ret is new (free with cli_sbd_free). */
int cli_sbd_open(const struct cli_globals *g, const char *name, struct cli_sbd **ret);
/** A connection to the API server of cfg itself (borrowed; must outlive *ret), with its
 * TLS material and no token, for callers that send their own request (port-forward).
 * Returns a CLI exit code; on CLI_OK *ret is new. */
int cli_sbd_open_server(const struct cli_globals *g, struct kube_config *cfg, struct cli_sbd **ret);
void cli_sbd_free(struct cli_sbd *s);

/** Prepares h for method on path (below base): sbd_client_setup of the connection's
 * client (URL, headers with extra appended, TLS, timeouts, errbuf; *ret_headers must be
 * freed with curl_slist_free_all after the transfer). */
int cli_sbd_setup(struct cli_sbd *s, CURL *h, const char *method, const char *path,
                  const char *const *extra, struct curl_slist **ret_headers, char *errbuf);

/** One buffered request: body (may be NULL) with content type ctype; the response body
 * is appended to resp (bounded by its limit) and the status stored in *ret_status.
 * Returns 0 when a response arrived (any status), or a negative errno for a transport
 * failure with the text in err. */
int cli_sbd_call(struct cli_sbd *s, const char *method, const char *path, const void *body,
                 size_t len, const char *ctype, struct buf *resp, long *ret_status, char *err,
                 size_t errsize);
/** cli_sbd_call of req (borrowed), with its timeout and cancel function. Returns as
 * cli_sbd_call, or -ETIMEDOUT / -ECANCELED when req->timeout passed / req->cancel said
 * stop. */
int cli_sbd_request(struct cli_sbd *s, const struct sbd_client_req *req, struct buf *resp,
                    long *ret_status, char *err, size_t errsize);
