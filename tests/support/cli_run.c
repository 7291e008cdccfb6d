/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox as a child process of an integration test. */
#include "support/cli_run.h"

#include <errno.h>
#include <stdlib.h>

#include <sys/wait.h>

#include "support/apiserver.h"

#define IT_CLI_CMD_MAX 8192 /* the whole shell command line */

int it_cli_start(const char *args, FILE **ret)
{
    const char *bin = getenv("AS_BIN_DIR");
    char cmd[IT_CLI_CMD_MAX];
    FILE *p;
    int n;

    if (!bin)
        return -ENOENT;
    n = snprintf(cmd, sizeof(cmd), "{ '%s/kubectl-sandbox' --kubeconfig '%s' %s ; } 2>&1", bin,
                 it_kubeconfig(), args);
    if (n < 0 || (size_t)n >= sizeof(cmd))
        return -E2BIG;
    p = popen(cmd, "r");
    if (!p)
        return errno ? -errno : -ENOMEM;
    *ret = p;
    return 0;
}

int it_cli_finish(FILE *p, struct buf *out)
{
    char chunk[4096];
    size_t got;
    int r = 0, st;

    buf_reset(out);
    while ((got = fread(chunk, 1, sizeof(chunk), p)) > 0)
        if (r == 0)
            r = buf_append(out, chunk, got); /* keep reading: the child must not block */
    st = pclose(p);
    if (r < 0)
        return r;
    if (st < 0)
        return -errno;
    if (!WIFEXITED(st))
        return -EPROTO;
    return WEXITSTATUS(st);
}

int it_cli_run(const char *args, struct buf *out)
{
    FILE *p = NULL;
    int r = it_cli_start(args, &p);
    if (r < 0)
        return r;
    return it_cli_finish(p, out);
}

int it_cli_vrunf(struct buf *out, const char *fmt, va_list ap)
{
    char args[IT_CLI_CMD_MAX];
    int n = vsnprintf(args, sizeof(args), fmt, ap);
    if (n < 0 || (size_t)n >= sizeof(args))
        return -E2BIG;
    return it_cli_run(args, out);
}

int it_cli_runf(struct buf *out, const char *fmt, ...)
{
    va_list ap;
    int r;
    va_start(ap, fmt);
    r = it_cli_vrunf(out, fmt, ap);
    va_end(ap);
    return r;
}
