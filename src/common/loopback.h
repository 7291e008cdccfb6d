/* SPDX-License-Identifier: Apache-2.0 */
/* Loopback tests on addresses, Host values and URLs: the router's trust of loopback
 * peers (a port-forward's) and the clients' rule that a kubeconfig credential goes in
 * clear text only to a loopback host. */
#pragma once

#include <stdbool.h>

#include "common/str.h"

/** ip (a numeric address, NUL-terminated) is in 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104.
 * Names, "" and anything not an address are not. */
bool loopback_addr(const char *ip);

/** host (a Host value: a name or address, an IPv6 one in brackets, then an optional
 * ":port") is "localhost", a name ending in ".localhost" (either with a trailing dot; any
 * case) or a loopback address. */
bool loopback_host(struct str host);

/** url (NUL-terminated) sends its credentials in clear text off this machine: its scheme
 * is not https and its host is not a loopback one (see loopback_host; userinfo before an
 * '@' is skipped). A URL without "://" is taken as http://, as curl does. */
bool loopback_url_exposes(const char *url);
