/* SPDX-License-Identifier: Apache-2.0 */
/* Late-bound claim configuration: policy, token Secret, pool Sandbox volume, env
 * sources and delivery targets (see latebind_spec.h). */
#include "controller/latebind_spec.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <sys/random.h>

#include "controller/claim_meta.h"
#include "controller/sandbox_names.h"
#include "controller/template_build.h"
#include "kube/obj.h"

#define DEFAULT_PORT 8080

void lb_policy_of(const json_t *tpl, struct lb_policy *ret)
{
    const char *mode = kube_obj_path_str(tpl, "spec.claimConfigDelivery.mode");
    const char *onf = kube_obj_path_str(tpl, "spec.claimConfigDelivery.onFailure");
    const json_t *port = kube_obj_path(tpl, "spec.claimConfigDelivery.port");
    json_int_t p = json_is_integer(port) ? json_integer_value(port) : DEFAULT_PORT;
    *ret = (struct lb_policy){
        .late_bound = mode && strcmp(mode, "LateBound") == 0,
        .fail = onf && strcmp(onf, "Fail") == 0,
        .port = p >= 1 && p <= 65535 ? (int)p : DEFAULT_PORT,
    };
}

bool lb_claim_wants(const json_t *claim, const json_t *tpl)
{
    struct lb_policy pol;
    lb_policy_of(tpl, &pol);
    return pol.late_bound && json_array_size(kube_obj_path(claim, "spec.env")) > 0 &&
           json_array_size(kube_obj_path(claim, "spec.volumeClaimTemplates")) == 0;
}

int lb_env_check(const json_t *claim, const json_t *tpl, struct claim_err *reterr)
{
    /* The same rules as a cold start: inject into a throwaway copy of the pod spec. */
    json_t *spec = json_deep_copy(kube_obj_path(tpl, "spec.podTemplate.spec"));
    int r;
    if (!spec)
        spec = json_object();
    r = claim_env_inject(spec, kube_obj_path(claim, "spec.env"),
                         kube_obj_path_str(tpl, "spec.envVarsInjectionPolicy"), reterr);
    json_decref(spec);
    return r;
}

enum lb_source lb_env_source(const json_t *ev, const char **ret_obj, const char **ret_key)
{
    const json_t *vf = json_object_get(ev, "valueFrom");
    const char *kinds[] = {"secretKeyRef", "configMapKeyRef"};
    if (!json_string_value(json_object_get(ev, "name")))
        return LB_SRC_INVALID;
    if (!vf)
        return json_is_string(json_object_get(ev, "value")) ? LB_SRC_VALUE : LB_SRC_INVALID;
    for (size_t i = 0; i < 2; i++) {
        const json_t *ref = json_object_get(vf, kinds[i]);
        const char *n = json_string_value(json_object_get(ref, "name"));
        const char *k = json_string_value(json_object_get(ref, "key"));
        if (!ref)
            continue;
        if (!n || !*n || !k || !*k)
            return LB_SRC_INVALID;
        *ret_obj = n;
        *ret_key = k;
        return i == 0 ? LB_SRC_SECRET : LB_SRC_CONFIGMAP;
    }
    return LB_SRC_INVALID;
}

int lb_member_name(const json_t *sb, char *out, size_t size)
{
    /* The API server's generateName alphabet: no vowels, no look-alike digits. */
    static const char alpha[] = "bcdfghjklmnpqrstvwxz2456789";
    const char *gen = kube_obj_path_str(sb, "metadata.generateName");
    uint8_t rnd[5];
    char suffix[6];
    size_t plen;
    int n;
    if (!gen || !*gen)
        return -EINVAL;
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return -EIO;
    for (size_t i = 0; i < sizeof(rnd); i++)
        suffix[i] = alpha[rnd[i] % (sizeof(alpha) - 1)];
    suffix[5] = '\0';
    plen = strlen(gen);
    if (plen > LB_NAME_MAX - 5)
        plen = LB_NAME_MAX - 5;
    n = snprintf(out, size, "%.*s%s", (int)plen, gen, suffix);
    return n < 0 || (size_t)n >= size ? -E2BIG : 0;
}

int lb_token_new(char *out, size_t size)
{
    uint8_t rnd[LB_TOKEN_BYTES];
    if (size < 2 * LB_TOKEN_BYTES + 1)
        return -E2BIG;
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return -EIO;
    for (size_t i = 0; i < sizeof(rnd); i++)
        (void)snprintf(out + 2 * i, 3, "%02x", rnd[i]);
    explicit_bzero(rnd, sizeof(rnd));
    return 0;
}

int lb_secret_name(const char *sandbox, char *out, size_t size)
{
    int n = snprintf(out, size, "%s" LB_SECRET_SUFFIX, sandbox);
    return n < 0 || (size_t)n >= size ? -E2BIG : 0;
}

/* Adds the mount and the token-file variable to one container. */
static void inject_container(json_t *c)
{
    json_t *mounts = json_object_get(c, "volumeMounts"), *env = json_object_get(c, "env");
    if (!json_is_array(mounts)) {
        mounts = json_array();
        json_object_set_new(c, "volumeMounts", mounts);
    }
    if (!json_is_array(env)) {
        env = json_array();
        json_object_set_new(c, "env", env);
    }
    json_array_append_new(mounts, json_pack("{s:s, s:s, s:b}", "name", LB_VOLUME, "mountPath",
                                            LB_MOUNT_DIR, "readOnly", 1));
    json_array_append_new(env, json_pack("{s:s, s:s}", "name", LB_ENV_TOKEN_FILE, "value",
                                         LB_MOUNT_DIR "/" LB_TOKEN_KEY));
}

void lb_pod_spec_inject(json_t *ps, const char *secret)
{
    json_t *vols, *c;
    size_t i;
    if (!json_is_object(ps))
        return;
    vols = json_object_get(ps, "volumes");
    if (!json_is_array(vols)) {
        vols = json_array();
        json_object_set_new(ps, "volumes", vols);
    }
    /* 0444: the sandbox may run as any user; everything in it is one trust domain. */
    json_array_append_new(vols, json_pack("{s:s, s:{s:s, s:i}}", "name", LB_VOLUME, "secret",
                                          "secretName", secret, "defaultMode", 0444));
    json_array_foreach(json_object_get(ps, "containers"), i, c) inject_container(c);
}

void lb_pool_inject(json_t *sb, const char *name, const char *secret)
{
    json_t *meta = ext_obj_ensure(sb, "metadata");
    json_t *pt = ext_obj_ensure(ext_obj_ensure(sb, "spec"), "podTemplate");
    json_object_del(meta, "generateName");
    json_object_set_new(meta, "name", json_string(name));
    json_object_set_new(ext_obj_ensure(meta, "annotations"), EXT_ANN_TOKEN_SECRET,
                        json_string(secret));
    lb_pod_spec_inject(ext_obj_ensure(pt, "spec"), secret);
}

json_t *lb_token_secret(const json_t *sb, const char *secret, const char *token)
{
    const char *n = kube_obj_name(sb), *u = kube_obj_uid(sb);
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}, s:[{s:s, s:s, s:s, s:s, s:b, s:b}]},"
                     " s:s, s:{s:s}}",
                     "apiVersion", "v1", "kind", "Secret", "metadata", "name", secret, "namespace",
                     kube_obj_namespace(sb) ?: "", "labels", EXT_LABEL_TOKEN_FOR, n ? n : "",
                     "ownerReferences", "apiVersion", SB_API_VERSION, "kind", SB_KIND, "name",
                     n ? n : "", "uid", u ? u : "", "controller", 1, "blockOwnerDeletion", 1,
                     "type", "Opaque", "stringData", LB_TOKEN_KEY, token);
}

bool lb_secret_is_for(const json_t *secret, const json_t *sb)
{
    const char *uid = kube_obj_uid(sb), *name = kube_obj_name(sb);
    const char *label = kube_obj_label(secret, EXT_LABEL_TOKEN_FOR);
    const json_t *o;
    size_t i;
    if (!uid || !*uid || !name || !label || strcmp(label, name) != 0)
        return false;
    json_array_foreach(kube_obj_path(secret, "metadata.ownerReferences"), i, o)
    {
        const char *u = json_string_value(json_object_get(o, "uid"));
        const char *k = json_string_value(json_object_get(o, "kind"));
        if (json_is_true(json_object_get(o, "controller")) && u && strcmp(u, uid) == 0 && k &&
            strcmp(k, SB_KIND) == 0)
            return true;
    }
    return false;
}

static bool v4_forbidden(const uint8_t a[4], bool allow_loopback)
{
    uint32_t v = (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];
    if (v == 0 || v == 0xffffffffu || a[0] == 0 || a[0] >= 224)
        return true; /* unspecified, "this network", multicast, reserved, broadcast */
    if (a[0] == 169 && a[1] == 254)
        return true; /* link-local: cloud metadata lives here */
    return a[0] == 127 && !allow_loopback;
}

int lb_target_check(const char *ip, bool allow_loopback)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    uint8_t a[16];
    if (!ip)
        return -EINVAL;
    if (inet_pton(AF_INET, ip, a) == 1)
        return v4_forbidden(a, allow_loopback) ? -EPERM : 0;
    if (inet_pton(AF_INET6, ip, a) != 1)
        return -EINVAL;
    if (memcmp(a, mapped, sizeof(mapped)) == 0)
        return v4_forbidden(a + 12, allow_loopback) ? -EPERM : 0;
    if (a[0] == 0xff || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80))
        return -EPERM; /* multicast, link-local */
    for (size_t i = 0; i < 15; i++)
        if (a[i])
            return 0;
    /* :: is unspecified, ::1 loopback */
    return a[15] == 1 && allow_loopback ? 0 : -EPERM;
}
