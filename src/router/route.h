/* SPDX-License-Identifier: Apache-2.0 */
/* Request routing for sandbox-router: the header contract (X-Sandbox-ID,
 * X-Sandbox-Namespace, X-Sandbox-Port, X-Sandbox-Pod-IP, X-Sandbox-UID,
 * X-Sandbox-Timeout) and the path form /s/{namespace}/{name}/{port}/{rest}, validated
 * with upstream's status codes and {"detail": ...} texts; and the SSRF address checks.
 * Pure functions: no I/O, no allocation. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"
#include "common/str.h"

#define ROUTE_NAME_MAX 63
#define ROUTE_IP_MAX   46 /* INET6_ADDRSTRLEN */
#define ROUTE_UID_MAX  64

/* Details of the routing errors (upstream's texts, compared by identity in tests). */
extern const char ROUTE_ERR_ID_REQUIRED[];
extern const char ROUTE_ERR_ID_INVALID[];
extern const char ROUTE_ERR_NS_INVALID[];
extern const char ROUTE_ERR_PORT_INVALID[];
extern const char ROUTE_ERR_IP_INVALID[];
extern const char ROUTE_ERR_UID_INVALID[];
extern const char ROUTE_ERR_DUPLICATE[];

/** Why a request cannot be routed: HTTP status and a static detail text. */
struct route_err {
    int status;
    const char *detail;
};

/** Reads one request header (case-insensitive name); .p NULL when absent. */
typedef struct str route_header_fn(void *ctx, const char *name);
/** The i-th request header in arrival order: false past the last. */
typedef bool route_header_at_fn(void *ctx, size_t i, struct str *ret_name, struct str *ret_value);

/** What route_parse reads (all borrowed). */
struct route_input {
    struct str path;  /* as sent, percent-encoding kept, without the query */
    struct str query; /* without '?', empty when none */
    route_header_fn *header;
    route_header_at_fn *header_at; /* optional: finds repeated X-Sandbox-* headers */
    void *header_ctx;
};

/** A validated target. Slices point into the route_input's buffers. */
struct route {
    char ns[ROUTE_NAME_MAX + 1];
    char name[ROUTE_NAME_MAX + 1];
    uint16_t port;
    char pod_ip[ROUTE_IP_MAX];   /* "" when X-Sandbox-Pod-IP was absent */
    char uid[ROUTE_UID_MAX + 1]; /* "" when X-Sandbox-UID was absent */
    usec_t timeout;              /* X-Sandbox-Timeout; 0 when absent */
    bool path_form;
    struct str path;  /* to forward: the whole path, or "/{rest}" for the path form */
    struct str query; /* to forward */
};

/** Parses and validates the target of a request. The header form is used when
 * X-Sandbox-ID is present, else the path form when the path starts with "/s/". An
 * X-Sandbox-* header sent more than once is refused (with header_at). Returns 0 and fills
 * *ret, or -EINVAL with *reterr (status 400 and a detail). */
int route_parse(const struct route_input *in, struct route *ret, struct route_err *reterr);

/** True for a DNS-1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 bytes. */
bool route_dns_label(struct str s);

/** Classifies an IP literal for SSRF defence. Returns 0 when the address may be dialled:
 * -EINVAL when it is not a plain IPv4/IPv6 literal, -EPERM when it is unspecified,
 * loopback (unless allow_loopback), link-local (169.254/16, fe80::/10), multicast,
 * broadcast or a cloud metadata address; IPv4-mapped, IPv4-compatible, NAT64
 * (64:ff9b::/96 and the local-use 64:ff9b:1::/48), 6to4 (2002::/16) and Teredo
 * (2001::/32) IPv6 forms are judged by the IPv4 addresses they carry. On 0, *ret_canon (optional,
 * ROUTE_IP_MAX bytes) gets the canonical text form. */
int route_ip_check(const char *ip, bool allow_loopback, char *ret_canon);

/** For a request let through as a loopback peer's (--trust-loopback, no Authorization):
 * NULL when it may go, else why not (a static string). A browser on the machine a
 * port-forward to the router runs on is a loopback peer too, so a page of any site could
 * reach a sandbox through it: refused are a request whose Host is not a loopback name or
 * address (a DNS name rebound to 127.0.0.1), one a browser marks as from another site
 * (Sec-Fetch-Site other than same-origin or none) and one whose Origin is not the Host it
 * was sent to. host, origin, fetch_site: those headers (STR_NULL when absent). */
const char *route_loopback_refusal(struct str host, struct str origin, struct str fetch_site);
