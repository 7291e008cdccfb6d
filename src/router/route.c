/* SPDX-License-Identifier: Apache-2.0 */
/* Request routing: header contract, path form and SSRF address classes. */
#include "router/route.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "common/loopback.h"

const char ROUTE_ERR_ID_REQUIRED[] = "X-Sandbox-ID header is required.";
const char ROUTE_ERR_ID_INVALID[] = "Invalid sandbox ID format.";
const char ROUTE_ERR_NS_INVALID[] = "Invalid namespace format.";
const char ROUTE_ERR_PORT_INVALID[] = "Invalid port format.";
const char ROUTE_ERR_IP_INVALID[] = "Invalid target IP address.";
const char ROUTE_ERR_UID_INVALID[] = "Invalid sandbox UID format.";
const char ROUTE_ERR_DUPLICATE[] = "Duplicate X-Sandbox-* header.";

#define DEFAULT_NS   "default"
#define DEFAULT_PORT 8888

static int fail(struct route_err *reterr, const char *detail)
{
    if (reterr) {
        reterr->status = 400;
        reterr->detail = detail;
    }
    return -EINVAL;
}

bool route_dns_label(struct str s)
{
    if (s.len == 0 || s.len > ROUTE_NAME_MAX)
        return false;
    for (size_t i = 0; i < s.len; i++) {
        char c = s.p[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !(c == '-' && i > 0 && i + 1 < s.len))
            return false;
    }
    return true;
}

static int parse_port(struct str s, uint16_t *ret)
{
    uint64_t v;
    if (s.len == 0 || s.len > 5 || str_to_u64(s, &v) < 0 || v < 1 || v > 65535)
        return -EINVAL;
    *ret = (uint16_t)v;
    return 0;
}

static void copy_label(char *dst, struct str s)
{
    memcpy(dst, s.p, s.len);
    dst[s.len] = '\0';
}

static bool valid_uid(struct str s)
{
    if (s.len == 0 || s.len > ROUTE_UID_MAX)
        return false;
    for (size_t i = 0; i < s.len; i++) {
        char c = s.p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return false;
    }
    return true;
}

/* X-Sandbox-Timeout: positive finite seconds; anything else is ignored (as upstream). */
static usec_t parse_timeout(struct str s)
{
    char tmp[32];
    if (!s.p || s.len == 0 || s.len >= sizeof(tmp))
        return 0;
    memcpy(tmp, s.p, s.len);
    tmp[s.len] = '\0';
    char *end;
    double d = strtod(tmp, &end);
    if (*end || !isfinite(d) || d <= 0 || d > 1e9)
        return 0;
    usec_t u = (usec_t)(d * (double)USEC_PER_SEC);
    return u ? u : 1;
}

/* Optional headers shared by both forms: Pod-IP, UID, Timeout. */
static int parse_common(const struct route_input *in, struct route *r, struct route_err *reterr)
{
    struct str ip = in->header(in->header_ctx, "X-Sandbox-Pod-IP");
    if (ip.p) {
        char tmp[ROUTE_IP_MAX];
        if (ip.len == 0 || ip.len >= sizeof(tmp))
            return fail(reterr, ROUTE_ERR_IP_INVALID);
        memcpy(tmp, ip.p, ip.len);
        tmp[ip.len] = '\0';
        /* Loopback is judged later against the router's flag; here only the syntax and
         * the classes that are never allowed. */
        if (route_ip_check(tmp, true, r->pod_ip) < 0)
            return fail(reterr, ROUTE_ERR_IP_INVALID);
    }
    struct str uid = in->header(in->header_ctx, "X-Sandbox-UID");
    if (uid.p) {
        if (!valid_uid(uid))
            return fail(reterr, ROUTE_ERR_UID_INVALID);
        copy_label(r->uid, uid);
    }
    r->timeout = parse_timeout(in->header(in->header_ctx, "X-Sandbox-Timeout"));
    return 0;
}

static int parse_header_form(const struct route_input *in, struct str id, struct route *r,
                             struct route_err *reterr)
{
    if (!route_dns_label(id))
        return fail(reterr, ROUTE_ERR_ID_INVALID);
    copy_label(r->name, id);
    struct str ns = in->header(in->header_ctx, "X-Sandbox-Namespace");
    if (!ns.p)
        ns = STR_LIT(DEFAULT_NS);
    if (!route_dns_label(ns))
        return fail(reterr, ROUTE_ERR_NS_INVALID);
    copy_label(r->ns, ns);
    struct str port = in->header(in->header_ctx, "X-Sandbox-Port");
    r->port = DEFAULT_PORT;
    if (port.p && parse_port(port, &r->port) < 0)
        return fail(reterr, ROUTE_ERR_PORT_INVALID);
    r->path = in->path;
    r->query = in->query;
    return 0;
}

/* Takes the next "/segment" off *rest; false when *rest is empty. */
static bool next_segment(struct str *rest, struct str *ret_seg)
{
    if (rest->len == 0 || rest->p[0] != '/')
        return false;
    struct str after = str_make(rest->p + 1, rest->len - 1);
    long slash = str_index(after, '/');
    size_t n = slash < 0 ? after.len : (size_t)slash;
    *ret_seg = str_make(after.p, n);
    *rest = str_make(after.p + n, after.len - n);
    return true;
}

static int parse_path_form(const struct route_input *in, struct route *r, struct route_err *reterr)
{
    struct str rest = str_make(in->path.p + 2, in->path.len - 2); /* after "/s" */
    struct str ns, name, port;
    if (!next_segment(&rest, &ns) || !route_dns_label(ns))
        return fail(reterr, ROUTE_ERR_NS_INVALID);
    if (!next_segment(&rest, &name) || !route_dns_label(name))
        return fail(reterr, ROUTE_ERR_ID_INVALID);
    if (!next_segment(&rest, &port) || parse_port(port, &r->port) < 0)
        return fail(reterr, ROUTE_ERR_PORT_INVALID);
    copy_label(r->ns, ns);
    copy_label(r->name, name);
    r->path_form = true;
    r->path = rest.len ? rest : STR_LIT("/");
    r->query = in->query;
    return 0;
}

static bool is_sandbox_header(struct str name)
{
    static const struct str prefix = STR_LIT("X-Sandbox-");
    return name.len > prefix.len && str_eq_nocase(str_make(name.p, prefix.len), prefix);
}

/* Is any X-Sandbox-* header sent twice? Two values invite front ends and the router to
 * disagree on the target (the router would read the first). */
static bool has_duplicate(const struct route_input *in)
{
    struct str a, b, v;
    for (size_t i = 0; in->header_at(in->header_ctx, i, &a, &v); i++) {
        if (!is_sandbox_header(a))
            continue;
        for (size_t j = i + 1; in->header_at(in->header_ctx, j, &b, &v); j++)
            if (str_eq_nocase(a, b))
                return true;
    }
    return false;
}

int route_parse(const struct route_input *in, struct route *ret, struct route_err *reterr)
{
    struct route r;
    memset(&r, 0, sizeof(r));
    if (in->header_at && has_duplicate(in))
        return fail(reterr, ROUTE_ERR_DUPLICATE);
    struct str id = in->header(in->header_ctx, "X-Sandbox-ID");
    int rc;
    if (id.p)
        rc = parse_header_form(in, id, &r, reterr);
    else if (str_has_prefix(in->path, STR_LIT("/s/")))
        rc = parse_path_form(in, &r, reterr);
    else
        rc = fail(reterr, ROUTE_ERR_ID_REQUIRED);
    if (rc >= 0)
        rc = parse_common(in, &r, reterr);
    if (rc < 0)
        return rc;
    *ret = r;
    return 0;
}

/* ---- SSRF address classes ------------------------------------------------------------ */

static bool v4_in(uint32_t a, uint32_t net, unsigned bits)
{
    uint32_t mask = bits == 0 ? 0 : 0xffffffffu << (32 - bits);
    return (a & mask) == (net & mask);
}

#define V4(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((c) << 8) | (d))

static int check_v4(uint32_t a, bool allow_loopback)
{
    if (v4_in(a, V4(127, 0, 0, 0), 8))
        return allow_loopback ? 0 : -EPERM;
    if (v4_in(a, V4(0, 0, 0, 0), 8) || v4_in(a, V4(169, 254, 0, 0), 16) ||
        v4_in(a, V4(224, 0, 0, 0), 4) || v4_in(a, V4(240, 0, 0, 0), 4) ||
        a == V4(168, 63, 129, 16) || a == V4(100, 100, 100, 200))
        return -EPERM; /* this-network, link-local, multicast, reserved+broadcast, metadata */
    return 0;
}

static uint32_t v4_at(const uint8_t *b)
{
    return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
}

/* The IPv6 forms that carry an IPv4 address a gateway may forward to: 6to4 (2002::/16,
 * bytes 2-5), Teredo (2001::/32: server in bytes 4-7, client inverted in bytes 12-15) and
 * the local-use NAT64 prefix 64:ff9b:1::/48, whose operators pick the prefix length: every
 * RFC 6052 position from /48 to /96 is judged, except those that read 0.0.0.0/8 (the
 * zero padding around another position). */
static int check_v6_tunnels(const uint8_t *b, bool allow_loopback)
{
    static const uint8_t local_nat64[6] = {0, 0x64, 0xff, 0x9b, 0, 1};
    static const uint8_t pos[4][4] = {
        {6, 7, 9, 10}, {7, 9, 10, 11}, {9, 10, 11, 12}, {12, 13, 14, 15}};
    if (b[0] == 0x20 && b[1] == 0x02)
        return check_v4(v4_at(b + 2), allow_loopback);
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) {
        uint8_t client[4] = {(uint8_t)~b[12], (uint8_t)~b[13], (uint8_t)~b[14], (uint8_t)~b[15]};
        int r = check_v4(v4_at(b + 4), allow_loopback);
        return r < 0 ? r : check_v4(v4_at(client), allow_loopback);
    }
    if (memcmp(b, local_nat64, sizeof(local_nat64)) != 0)
        return 0;
    bool any = false;
    for (size_t i = 0; i < 4; i++) {
        uint8_t v4[4] = {b[pos[i][0]], b[pos[i][1]], b[pos[i][2]], b[pos[i][3]]};
        uint32_t a = v4_at(v4);
        if (v4_in(a, 0, 8))
            continue; /* the zero padding of another prefix length */
        any = true;
        int r = check_v4(a, allow_loopback);
        if (r < 0)
            return r;
    }
    return any ? 0 : -EPERM; /* 0.0.0.0/8 at every position */
}

static int check_v6(const struct in6_addr *a, bool allow_loopback)
{
    static const uint8_t zero[12] = {0};
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
    static const uint8_t aws_md[16] = {0xfd, 0, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54};
    const uint8_t *b = a->s6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a))
        return allow_loopback ? 0 : -EPERM;
    if (IN6_IS_ADDR_UNSPECIFIED(a) || (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || b[0] == 0xff ||
        (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) || memcmp(b, aws_md, 16) == 0)
        return -EPERM; /* unspecified, link-local, multicast, site-local, metadata */
    if (memcmp(b, mapped, 12) == 0 || memcmp(b, zero, 12) == 0 || memcmp(b, nat64, 12) == 0)
        return check_v4(v4_at(b + 12), allow_loopback);
    return check_v6_tunnels(b, allow_loopback);
}

int route_ip_check(const char *ip, bool allow_loopback, char *ret_canon)
{
    struct in_addr a4;
    struct in6_addr a6;
    char canon[ROUTE_IP_MAX];
    int r;
    if (inet_pton(AF_INET, ip, &a4) == 1) {
        r = check_v4(ntohl(a4.s_addr), allow_loopback);
        if (r == 0 && !inet_ntop(AF_INET, &a4, canon, sizeof(canon)))
            r = -EINVAL;
    } else if (inet_pton(AF_INET6, ip, &a6) == 1) {
        r = check_v6(&a6, allow_loopback);
        if (r == 0 && !inet_ntop(AF_INET6, &a6, canon, sizeof(canon)))
            r = -EINVAL;
    } else {
        return -EINVAL;
    }
    if (r < 0)
        return r;
    if (ret_canon)
        memcpy(ret_canon, canon, strlen(canon) + 1);
    return 0;
}

const char *route_loopback_refusal(struct str host, struct str origin, struct str fetch_site)
{
    host = str_trim(host);
    if (host.p && !loopback_host(host))
        return "the Host of a request trusted as a loopback peer's must be a loopback name "
               "or address";
    fetch_site = str_trim(fetch_site);
    if (fetch_site.p && !str_eq_nocase(fetch_site, STR_LIT("same-origin")) &&
        !str_eq_nocase(fetch_site, STR_LIT("none")))
        return "a request from another site is not trusted as a loopback peer's";
    origin = str_trim(origin);
    if (!origin.p)
        return NULL;
    struct str rest = origin;
    if (rest.len > 7 && str_eq_nocase(str_make(rest.p, 7), STR_LIT("http://")))
        rest = str_make(rest.p + 7, rest.len - 7);
    else if (rest.len > 8 && str_eq_nocase(str_make(rest.p, 8), STR_LIT("https://")))
        rest = str_make(rest.p + 8, rest.len - 8);
    else
        rest = STR_NULL;
    if (!rest.p || !host.p || !str_eq_nocase(rest, host))
        return "a request whose Origin is not its Host is not trusted as a loopback peer's";
    return NULL;
}
