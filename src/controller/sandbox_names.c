/* SPDX-License-Identifier: Apache-2.0 */
/* Name hash, reserved keys and ownership predicates of the Sandbox API. */
#include "controller/sandbox_names.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api/extensions.h"
#include "common/hash.h"
#include "kube/obj.h"

void sb_name_hash(const char *s, char out[SB_HASH_LEN + 1])
{
    uint32_t h = hash_fnv1a32(HASH_FNV1A32_INIT, s ? s : "", s ? strlen(s) : 0);
    (void)snprintf(out, SB_HASH_LEN + 1, "%08x", h);
}

bool sb_key_reserved(const char *key)
{
    return strncmp(key, SB_KEY_PREFIX, strlen(SB_KEY_PREFIX)) == 0 ||
           strncmp(key, EXT_KEY_PREFIX, strlen(EXT_KEY_PREFIX)) == 0;
}

bool sb_annotation_system(const char *key)
{
    return sb_key_reserved(key) || strcmp(key, SB_ANN_TRACE_CONTEXT) == 0;
}

const char *sb_created_by_normalize(const char *v)
{
    static const char *const known[] = {"go-client", "python-client", "controller"};
    if (!v)
        return NULL;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(v, known[i]) == 0)
            return known[i];
    return "unknown";
}

bool sb_controlled_by(const json_t *obj, const char *uid)
{
    const char *c = kube_obj_controller_uid(obj);
    return c && uid && strcmp(c, uid) == 0;
}

bool sb_uncontrolled(const json_t *obj)
{
    return kube_obj_controller_ref(obj) == NULL;
}

bool sb_adoptable_label(const json_t *obj)
{
    const char *v = kube_obj_label(obj, SB_LABEL_ADOPTABLE);
    return v && strcmp(v, "true") == 0;
}

bool sb_controller_is(const json_t *obj, const char *group, const char *kind)
{
    const json_t *ref = kube_obj_controller_ref(obj);
    const char *av = json_string_value(json_object_get(ref, "apiVersion"));
    const char *k = json_string_value(json_object_get(ref, "kind"));
    size_t gl = strlen(group);
    if (!av || !k || strcmp(k, kind) != 0)
        return false;
    /* Owner references keep the version they were written with: ignore it. */
    return strncmp(av, group, gl) == 0 && av[gl] == '/';
}
