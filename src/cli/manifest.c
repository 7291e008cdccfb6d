/* SPDX-License-Identifier: Apache-2.0 */
/* Multi-document manifests and the resource table of kubectl-sandbox. */
#include "cli/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "api/res.h"
#include "common/buf.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/yaml.h"

#define RES(g, v, k, p, n)                                                \
    {                                                                     \
        .group = g, .version = v, .kind = k, .plural = p, .namespaced = n \
    }
const struct kube_res CLI_RES_CLUSTERROLES =
    RES("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false);
const struct kube_res CLI_RES_CLUSTERROLEBINDINGS =
    RES("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false);
const struct kube_res CLI_RES_ROLES = RES("rbac.authorization.k8s.io", "v1", "Role", "roles", true);
const struct kube_res CLI_RES_ROLEBINDINGS =
    RES("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true);
const struct kube_res CLI_RES_PDBS =
    RES("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", true);
const struct kube_res CLI_RES_VAPS =
    RES("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies", false);
const struct kube_res CLI_RES_VAPBINDINGS =
    RES("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings", false);

static const struct kube_res *const known[] = {
    &API_RES_SANDBOXES,     &API_RES_SANDBOXTEMPLATES,
    &API_RES_SANDBOXCLAIMS, &API_RES_SANDBOXWARMPOOLS,
    &KUBE_RES_NAMESPACES,   &KUBE_RES_SERVICEACCOUNTS,
    &KUBE_RES_CRDS,         &KUBE_RES_DEPLOYMENTS,
    &KUBE_RES_SERVICES,     &KUBE_RES_CONFIGMAPS,
    &KUBE_RES_SECRETS,      &KUBE_RES_NETWORKPOLICIES,
    &CLI_RES_CLUSTERROLES,  &CLI_RES_CLUSTERROLEBINDINGS,
    &CLI_RES_ROLES,         &CLI_RES_ROLEBINDINGS,
    &CLI_RES_PDBS,          &CLI_RES_VAPS,
    &CLI_RES_VAPBINDINGS,
};

const struct kube_res *cli_manifest_res(const json_t *obj)
{
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    if (!av || !kind)
        return NULL;
    for (size_t i = 0; i < ARRAY_SIZE(known); i++) {
        char want[128];
        if (kube_res_api_version(known[i], want, sizeof(want)) < 0)
            continue;
        if (strcmp(want, av) == 0 && strcmp(known[i]->kind, kind) == 0)
            return known[i];
    }
    return NULL;
}

/* Adds doc (taken) to out: a List's items one by one, an empty document not at all. */
static void add_doc(json_t *out, json_t *doc)
{
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    if (kind && strcmp(kind, "List") == 0 && json_is_array(json_object_get(doc, "items"))) {
        (void)json_array_extend(out, json_object_get(doc, "items"));
        json_decref(doc);
    } else if (json_is_object(doc) && json_object_size(doc) > 0) {
        (void)json_array_append_new(out, doc);
    } else {
        json_decref(doc);
    }
}

/* Length of the document starting at p: up to a line that is "---" (optionally followed
 * by spaces or a comment). *ret_next gets where the next document starts. */
static size_t doc_len(const char *p, const char *end, const char **ret_next)
{
    const char *line = p;
    while (line < end) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *eol = nl ? nl : end;
        if (eol - line >= 3 && memcmp(line, "---", 3) == 0 &&
            (eol - line == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r')) {
            *ret_next = nl ? nl + 1 : end;
            return (size_t)(line - p);
        }
        line = nl ? nl + 1 : end;
    }
    *ret_next = end;
    return (size_t)(end - p);
}

int cli_manifest_parse(const char *text, size_t len, json_t **ret, char *err, size_t errsize)
{
    json_t *out = json_array();
    const char *p = text, *end = text + len, *next;
    for (int n = 1; p < end; n++, p = next) {
        size_t dl = doc_len(p, end, &next);
        json_t *doc = NULL;
        char e[256];
        if (kube_yaml_load_typed(p, dl, &doc, e, sizeof(e)) < 0) {
            (void)snprintf(err, errsize, "document %d: %s", n, e);
            json_decref(out);
            return -EINVAL;
        }
        add_doc(out, doc);
    }
    *ret = out;
    return 0;
}

int cli_manifest_load(const char *path, json_t **ret, char *err, size_t errsize)
{
    int fd = strcmp(path, "-") == 0 ? dup(0) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int r = -errno;
        (void)snprintf(err, errsize, "cannot open %s: %s", path, strerror(-r));
        return r;
    }
    struct buf b;
    buf_init(&b, LIMIT_CLI_MANIFEST);
    char chunk[65536];
    ssize_t n;
    int r = 0;
    while (r == 0 && (n = read(fd, chunk, sizeof(chunk))) > 0)
        r = buf_append(&b, chunk, (size_t)n);
    if (r == 0 && n < 0)
        r = -errno;
    (void)close(fd);
    if (r < 0)
        (void)snprintf(err, errsize, "cannot read %s: %s", path,
                       r == -E2BIG ? "file too large" : strerror(-r));
    else
        r = cli_manifest_parse(buf_str(&b), b.len, ret, err, errsize);
    buf_done(&b);
    return r;
}
