/* SPDX-License-Identifier: Apache-2.0 */
/* Global options of kubectl-sandbox, accepted before and after the command name. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xalloc.h"

enum gopt {
    G_KUBECONFIG,
    G_CONTEXT,
    G_NAMESPACE,
    G_ALL,
    G_OUTPUT,
    G_SELECTOR,
    G_VERBOSE,
    G_HELP,
    G_ROUTER,
    G_SANDBOXD,
    G_SBD_PORT,
    G_LOG_FORMAT,
};

struct gdef {
    const char *long_name;
    char short_name; /* 0: none */
    bool has_arg;
    enum gopt id;
};

static const struct gdef gdefs[] = {
    {"kubeconfig", 0, true, G_KUBECONFIG},
    {"context", 0, true, G_CONTEXT},
    {"namespace", 'n', true, G_NAMESPACE},
    {"all-namespaces", 'A', false, G_ALL},
    {"output", 'o', true, G_OUTPUT},
    {"selector", 'l', true, G_SELECTOR},
    {"v", 'v', true, G_VERBOSE},
    {"help", 'h', false, G_HELP},
    {"router-url", 0, true, G_ROUTER},
    {"sandboxd-url", 0, true, G_SANDBOXD},
    {"sandboxd-port", 0, true, G_SBD_PORT},
    {"log-format", 0, true, G_LOG_FORMAT},
};

static const struct gdef *find_long(struct str name)
{
    for (size_t i = 0; i < ARRAY_SIZE(gdefs); i++)
        if (str_eq_c(name, gdefs[i].long_name))
            return &gdefs[i];
    return NULL;
}

static const struct gdef *find_short(char c)
{
    for (size_t i = 0; i < ARRAY_SIZE(gdefs); i++)
        if (gdefs[i].short_name && gdefs[i].short_name == c)
            return &gdefs[i];
    return NULL;
}

static int set_global(struct cli_globals *g, const struct gdef *d, const char *val)
{
    enum log_level lv;
    uint64_t port;
    switch (d->id) {
    case G_KUBECONFIG:
        g->kubeconfig = val;
        break;
    case G_CONTEXT:
        g->context = val;
        break;
    case G_NAMESPACE:
        g->ns = val;
        break;
    case G_ALL:
        g->all_namespaces = true;
        break;
    case G_OUTPUT:
        g->output = val;
        break;
    case G_SELECTOR:
        g->selector = val;
        break;
    case G_HELP:
        g->help = true;
        break;
    case G_ROUTER:
        g->router_url = val;
        break;
    case G_SANDBOXD:
        g->sandboxd_url = val;
        break;
    case G_SBD_PORT:
        if (cstr_to_u64(val, &port) < 0 || port == 0 || port > 65535) {
            fprintf(g->err, "error: --sandboxd-port must be a port number, not %s\n", val);
            return -EINVAL;
        }
        g->sandboxd_port = (unsigned)port;
        break;
    case G_VERBOSE:
        if (log_parse_level(val, &lv) < 0) {
            fprintf(g->err, "error: invalid log level %s\n", val);
            return -EINVAL;
        }
        log_set_level(lv);
        break;
    case G_LOG_FORMAT:
        if (log_flag_format(val) < 0) {
            fprintf(g->err, "error: --log-format must be text or json, not %s\n", val);
            return -EINVAL;
        }
        break;
    }
    return 0;
}

/* "--name[=value]". Returns the number of argv entries used (1 or 2), 0 when it is not
 * a global option, or -EINVAL. */
static int take_long(struct cli_globals *g, int argc, char **argv, int i)
{
    struct str body = str_c(argv[i] + 2), name, val;
    bool has_eq = str_cut(body, '=', &name, &val);
    const struct gdef *d = find_long(name);
    if (!d)
        return 0;
    if (!d->has_arg) {
        if (has_eq) {
            fprintf(g->err, "error: option --%s takes no value\n", d->long_name);
            return -EINVAL;
        }
        return set_global(g, d, NULL) < 0 ? -EINVAL : 1;
    }
    if (has_eq)
        return set_global(g, d, val.p) < 0 ? -EINVAL : 1;
    if (i + 1 >= argc) {
        fprintf(g->err, "error: option --%s needs a value\n", d->long_name);
        return -EINVAL;
    }
    return set_global(g, d, argv[i + 1]) < 0 ? -EINVAL : 2;
}

/* "-xyz" where every letter is a global option (the last may take a value, attached or
 * in the next entry). Returns entries used, 0 when it is not (all) global, or -EINVAL. */
static int take_short(struct cli_globals *g, int argc, char **argv, int i)
{
    const char *s = argv[i] + 1;
    for (const char *p = s; *p; p++) {
        const struct gdef *d = find_short(*p);
        if (!d)
            return 0;
        if (d->has_arg)
            break;
    }
    for (const char *p = s; *p; p++) {
        const struct gdef *d = find_short(*p);
        if (!d->has_arg) {
            if (set_global(g, d, NULL) < 0)
                return -EINVAL;
            continue;
        }
        if (p[1])
            return set_global(g, d, p + 1) < 0 ? -EINVAL : 1;
        if (i + 1 >= argc) {
            fprintf(g->err, "error: option -%c needs a value\n", *p);
            return -EINVAL;
        }
        return set_global(g, d, argv[i + 1]) < 0 ? -EINVAL : 2;
    }
    return 1;
}

int cli_split_globals(struct cli_globals *g, int argc, char **argv, char ***ret_rest)
{
    char **rest = xcalloc((size_t)argc + 1, sizeof(char *));
    int n = 0;
    bool verbatim = false;
    for (int i = 1; i < argc;) {
        const char *a = argv[i];
        int used = 0;
        if (!verbatim && strcmp(a, "--") == 0)
            verbatim = true;
        else if (!verbatim && a[0] == '-' && a[1] == '-')
            used = take_long(g, argc, argv, i);
        else if (!verbatim && a[0] == '-' && a[1])
            used = take_short(g, argc, argv, i);
        if (used < 0) {
            xfree(rest);
            return -EINVAL;
        }
        if (used == 0) {
            if (n == 0 && a[0] == '-') {
                fprintf(g->err, "error: unknown option %s before the command\n", a);
                xfree(rest);
                return -EINVAL;
            }
            rest[n++] = argv[i];
            used = 1;
        }
        i += used;
    }
    *ret_rest = rest;
    return n;
}

void cli_globals_env(struct cli_globals *g)
{
    if (!g->router_url && getenv("AGENT_SANDBOX_ROUTER_URL") &&
        getenv("AGENT_SANDBOX_ROUTER_URL")[0])
        g->router_url = getenv("AGENT_SANDBOX_ROUTER_URL");
    if (!g->sandboxd_url && getenv("AGENT_SANDBOX_SANDBOXD_URL") &&
        getenv("AGENT_SANDBOX_SANDBOXD_URL")[0])
        g->sandboxd_url = getenv("AGENT_SANDBOX_SANDBOXD_URL");
    if (getenv("AGENT_SANDBOX_ROUTER_TOKEN") && getenv("AGENT_SANDBOX_ROUTER_TOKEN")[0])
        g->router_token = getenv("AGENT_SANDBOX_ROUTER_TOKEN");
    const char *pt = getenv("AGENT_SANDBOX_ROUTER_ALLOW_PLAINTEXT_TOKEN");
    g->router_plaintext_ok =
        pt && (!strcasecmp(pt, "true") || !strcasecmp(pt, "t") || !strcmp(pt, "1"));
    if (getenv("AGENT_SANDBOX_SANDBOXD_TOKEN") && getenv("AGENT_SANDBOX_SANDBOXD_TOKEN")[0])
        g->sandboxd_token = getenv("AGENT_SANDBOX_SANDBOXD_TOKEN");
    if (!g->sandboxd_port)
        g->sandboxd_port = 8080;
}
