/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the JSON object accessors (kube/obj) and the store key: the
 * input's first line is a dotted path and a label/annotation/condition/finalizer key,
 * the rest a JSON document of any shape. Invariants: accessors never crash on wrong
 * types, a returned string is a JSON string of the document, kube_obj_key and
 * kube_store_key agree, and setting metadata on a copy makes the name readable.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Isrc \
 *     fuzz/fuzz_kube_obj.c src/kube/{obj,store}.c src/common/{buf,str,xalloc,log,clock,
 *     map}.c -ljansson -o build/fuzz_kube_obj   (or: fuzz/run.sh kube_obj) */
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/obj.h"
#include "kube/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_str(const char *s)
{
    if (s)
        (void)strlen(s); /* readable to its terminator (ASan checks) */
}

static void fuzz_meta(const json_t *obj, const char *key)
{
    check_str(kube_obj_name(obj));
    check_str(kube_obj_namespace(obj));
    check_str(kube_obj_uid(obj));
    check_str(kube_obj_resource_version(obj));
    check_str(kube_obj_kind(obj));
    (void)kube_obj_generation(obj);
    (void)kube_obj_deleting(obj);
    check_str(kube_obj_label(obj, key));
    check_str(kube_obj_annotation(obj, key));
    const json_t *ref = kube_obj_controller_ref(obj);
    ASSERT(!ref || json_is_true(json_object_get(ref, "controller")));
    check_str(kube_obj_controller_uid(obj));
    (void)kube_obj_has_finalizer(obj, key);
    const json_t *cond = kube_obj_condition(obj, key);
    ASSERT(!kube_obj_condition_true(obj, key) || cond);
}

static void fuzz_keys(const json_t *obj)
{
    struct buf b;
    char key[LIMIT_KUBE_STORE_KEY + 1];
    buf_init(&b, 1024);
    int r1 = kube_obj_key(obj, &b);
    int r2 = kube_store_key(obj, key, sizeof(key));
    if (r1 >= 0 && r2 >= 0)
        ASSERT(strcmp(buf_str(&b), key) == 0);
    if (r2 >= 0)
        ASSERT(kube_obj_name(obj) && kube_obj_name(obj)[0]);
    buf_done(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *nl = memchr(p, '\n', size);
    size_t klen = nl ? (size_t)(nl - p) : 0;
    char *dotted = xstrndup(p, klen);
    const char *key = strchr(dotted, ' ') ? strchr(dotted, ' ') + 1 : dotted;
    json_t *obj = json_loadb(p + (nl ? klen + 1 : 0), size - (nl ? klen + 1 : 0),
                             JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (obj) {
        const json_t *v = kube_obj_path(obj, dotted);
        const char *s = kube_obj_path_str(obj, dotted);
        ASSERT(!s || (v && json_is_string(v)));
        fuzz_meta(obj, key);
        fuzz_keys(obj);
        if (json_is_object(obj)) {
            json_t *copy = json_deep_copy(obj);
            kube_obj_set_meta_str(copy, "name", "fuzz");
            ASSERT(strcmp(kube_obj_name(copy), "fuzz") == 0);
            json_decref(copy);
        }
        json_decref(obj);
    }
    xfree(dotted);
    return 0;
}
