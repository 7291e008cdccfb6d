/* SPDX-License-Identifier: Apache-2.0 */
/* struct http_cut: a front's word that an adopted connection's input was cut off rather
 * than ended (server.h). Any thread: a reference count and a flag, both atomic. */
#include <stdatomic.h>

#include "common/xalloc.h"
#include "http/server.h"

struct http_cut {
    atomic_uint refs;
    atomic_bool marked;
};

struct http_cut *http_cut_new(void)
{
    struct http_cut *c = XNEW(struct http_cut);
    atomic_init(&c->refs, 1);
    atomic_init(&c->marked, false);
    return c;
}

struct http_cut *http_cut_ref(struct http_cut *c)
{
    if (c)
        atomic_fetch_add(&c->refs, 1);
    return c;
}

void http_cut_unref(struct http_cut *c)
{
    if (c && atomic_fetch_sub(&c->refs, 1) == 1)
        xfree(c);
}

void http_cut_mark(struct http_cut *c)
{
    if (c)
        atomic_store(&c->marked, true);
}

bool http_cut_marked(struct http_cut *c)
{
    return c && atomic_load(&c->marked);
}
