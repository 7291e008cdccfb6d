/* SPDX-License-Identifier: Apache-2.0 */
#include "common/loopback.h"

#include <string.h>

#include <arpa/inet.h>

bool loopback_addr(const char *ip)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, ip, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, ip, &a6) != 1)
        return false;
    if (IN6_IS_ADDR_LOOPBACK(&a6))
        return true;
    return memcmp(a6.s6_addr, mapped, 12) == 0 && a6.s6_addr[12] == 127;
}

bool loopback_host(struct str host)
{
    char ip[64];
    struct str name = host;
    if (host.len > 0 && host.p[0] == '[') { /* [v6]:port */
        const char *end = memchr(host.p, ']', host.len);
        if (!end)
            return false;
        name = str_make(host.p + 1, (size_t)(end - host.p - 1));
    } else {
        const char *colon = memchr(host.p, ':', host.len);
        if (colon)
            name = str_make(host.p, (size_t)(colon - host.p));
    }
    if (name.len > 0 && name.p[name.len - 1] == '.')
        name.len--; /* a fully qualified "localhost." */
    if (str_eq_nocase(name, STR_LIT("localhost")) ||
        (name.len > 10 &&
         str_eq_nocase(str_make(name.p + name.len - 10, 10), STR_LIT(".localhost"))))
        return true;
    if (name.len == 0 || name.len >= sizeof(ip))
        return false;
    memcpy(ip, name.p, name.len);
    ip[name.len] = '\0';
    return loopback_addr(ip);
}

bool loopback_url_exposes(const char *url)
{
    const char *sep = strstr(url, "://");
    if (sep && sep - url == 5 && str_eq_nocase(str_make(url, 5), STR_LIT("https")))
        return false;
    const char *auth = sep ? sep + 3 : url; /* no scheme: http, as curl guesses */
    size_t alen = strcspn(auth, "/?#");
    const char *at = memchr(auth, '@', alen);
    if (at) {
        alen -= (size_t)(at + 1 - auth);
        auth = at + 1;
    }
    return !loopback_host(str_make(auth, alen));
}
