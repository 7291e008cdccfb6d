/* SPDX-License-Identifier: Apache-2.0 */
/* Watching a set of namespaces (--namespace=a,b,c) with one informer and one store, as
 * controller-runtime's multi-namespace cache does with one informer per namespace: the
 * LIST and the WATCH go to each namespace separately (so namespaced RBAC in those
 * namespaces is enough and the API server sends nothing from other namespaces), and the
 * source merges them: LIST hands every namespace's pages to the informer in turn (one
 * page held at a time; a later namespace's expired continue token lists all again),
 * WATCH runs one stream per namespace on its own thread and hands complete event lines
 * to the informer one at a time. Each namespace resumes from its own resourceVersion (from its
 * LIST, then from its events and bookmarks); when any stream ends, all are stopped and the informer
 * calls watch again. A 410 from any namespace makes the informer relist them all.
 *
 * The rest of the controller is unchanged: it sees one store keyed "ns/name". */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/limits.h"
#include "kube/client.h"
#include "kube/informer.h"

struct ctrl_ns_source;

/** Splits a --namespace value into *ret_v (new: free with ctrl_ns_list_free) and
 * *ret_n: NULL or "" = all namespaces (n = 0), "a" one, "a,b,c" several (spaces around
 * names allowed). Every name must be a DNS-1123 label; duplicates are refused. Returns 0
 * or -EINVAL (nothing allocated). */
int ctrl_ns_list_parse(const char *spec, char ***ret_v, size_t *ret_n);
void ctrl_ns_list_free(char **v, size_t n);

/** For an informer over spec (a --namespace value, borrowed): when spec names several
 * namespaces, *ret gets a new source (free with ctrl_ns_source_free after the informer)
 * and *ret_src its functions, for kube_informer_opts.source with .ns NULL and .client
 * set; otherwise *ret is NULL and the informer is to use spec as its .ns. Returns 0 or
 * -EINVAL. */
int ctrl_ns_source_for(const char *spec, struct ctrl_ns_source **ret,
                       struct kube_informer_source *ret_src);
/** NULL is fine. */
void ctrl_ns_source_free(struct ctrl_ns_source *s);
