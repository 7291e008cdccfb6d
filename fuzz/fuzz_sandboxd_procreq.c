/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the JSON process request: the first message of a WebSocket
 * process (/v1/processes/ws) and the body of POST /v1/processes and /v1/run. The input is
 * the message as it arrives; it is loaded as sandboxd does and parsed against a root.
 * Invariants: a refusal is -EINVAL, -EPERM or -E2BIG with a message; an accepted request
 * has a non-empty argv[0], "K=V" environment entries with a non-empty name, a cwd that
 * is relative and never climbs (no ".." component), a timeout in [0, 86400], at most
 * the capped output and at most LIMIT_SBD_STDIN bytes of stdin; and every path frees
 * what it took (ASan's leak check). */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/xalloc.h"
#include "sandboxd/procreq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OUTPUT (1u << 20)

static struct sbd_root *fuzz_root;

static bool climbs(const char *rel)
{
    for (const char *p = rel; (p = strstr(p, "..")) != NULL; p += 2)
        if ((p == rel || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
            return true;
    return false;
}

static void check(const struct sbd_procreq *r)
{
    ASSERT(r->argv && r->argv[0] && r->argv[0][0]);
    for (char **e = r->env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        ASSERT(eq && eq != *e);
    }
    if (r->cwd)
        ASSERT(r->cwd[0] != '/' && !climbs(r->cwd));
    ASSERT(r->timeout_s >= 0 && r->timeout_s <= LIMIT_SBD_MAX_TIMEOUT_S);
    ASSERT(r->max_output <= MAX_OUTPUT);
    ASSERT(r->stdin_data.len <= LIMIT_SBD_STDIN);
    ASSERT(r->pty || (r->cols == 0 && r->rows == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_root && sbd_root_open("/tmp", false, &fuzz_root) < 0)
        abort();
    json_t *j = json_loadb((const char *)data, size, 0, NULL);
    if (!j)
        return 0;
    struct sbd_procreq r;
    const char *msg = NULL;
    int e = sbd_procreq_parse(j, fuzz_root, MAX_OUTPUT, &r, &msg);
    json_decref(j);
    if (e == 0)
        check(&r);
    else
        ASSERT((e == -EINVAL || e == -EPERM || e == -E2BIG) && msg && *msg);
    sbd_procreq_done(&r);
    return 0;
}
