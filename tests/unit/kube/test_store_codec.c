/* SPDX-License-Identifier: Apache-2.0 */
/* Compact stores' blobs (kube/store_codec.h): objects come back equal, similar objects
 * pack to a fraction of their text against a dictionary taken from one of them, text
 * that does not compress and codec-less blobs stay plain, damaged blobs read as NULL
 * rather than as another object, and a compact store packs its objects this way, also
 * when it switches at a threshold and when many threads read at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"
#include "kube/store.h"
#include "kube/store_codec.h"

/* A Pod like the controller caches: the same template, its own name, UID, IP, version. */
static json_t *pod(int i)
{
    char name[32], uid[64], ip[32], rv[16];
    (void)snprintf(name, sizeof(name), "sbx-%06d", i);
    (void)snprintf(uid, sizeof(uid), "%08x-4c76-a68d-%012x", (unsigned)i * 2654435761u,
                   (unsigned)i * 40503u);
    (void)snprintf(ip, sizeof(ip), "10.100.%d.%d", i / 250, i % 250);
    (void)snprintf(rv, sizeof(rv), "%d", 296000 + i);
    return json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:{s:s,s:s},s:[{s:s,s:s,s:b,s:s,s:s}]},"
        "s:{s:[{s:s,s:s,s:s,s:[{s:i,s:s}]}],s:s,s:s,s:i,s:[{s:s,s:s,s:s,s:i}]},"
        "s:{s:s,s:s,s:[{s:s}],s:[{s:s,s:s}]}}",
        "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", "bench", "uid",
        uid, "resourceVersion", rv, "labels", "app", "loadgen", "agents.x-k8s.io/hash", "bfec7c73",
        "ownerReferences", "kind", "Sandbox", "name", name, "controller", 1, "uid", uid,
        "apiVersion", "agents.x-k8s.io/v1beta1", "spec", "containers", "image",
        "registry.local/bench:1", "name", "runtime", "imagePullPolicy", "IfNotPresent", "ports",
        "containerPort", 8888, "protocol", "TCP", "dnsPolicy", "ClusterFirst", "schedulerName",
        "default-scheduler", "terminationGracePeriodSeconds", 1, "tolerations", "effect",
        "NoExecute", "key", "node.kubernetes.io/not-ready", "operator", "Exists",
        "tolerationSeconds", 300, "status", "phase", "Running", "podIP", ip, "podIPs", "ip", ip,
        "conditions", "type", "Ready", "status", "True");
}

static size_t text_len(const json_t *obj)
{
    char *t = json_dumps(obj, JSON_COMPACT);
    size_t n = strlen(t);
    xfree(t); /* jansson allocates with malloc */
    return n;
}

static void test_similar_objects_pack_small(void **state)
{
    (void)state;
    json_t *first = pod(0);
    char *sample = json_dumps(first, JSON_COMPACT);
    struct store_codec *c = NULL;
    assert_int_equal(store_codec_new(sample, strlen(sample), &c), 0);
    size_t raw = 0, packed = 0;
    for (int i = 1; i <= 100; i++) {
        json_t *p = pod(i);
        void *b = store_codec_pack(c, p);
        assert_non_null(b);
        raw += text_len(p);
        packed += store_codec_blob_size(b);
        json_t *back = store_codec_unpack(c, b);
        assert_non_null(back);
        assert_true(json_equal(back, p));
        json_decref(back);
        json_decref(p);
        xfree(b);
    }
    /* names, UIDs, IPs and versions are all that differ: well under a quarter */
    assert_true(packed * 4 < raw);
    xfree(sample);
    json_decref(first);
    store_codec_free(c);
    assert_int_equal(store_codec_new("", 0, &c), -EINVAL);
    store_codec_free(NULL);
}

static void test_plain_and_damaged_blobs(void **state)
{
    (void)state;
    json_t *p = pod(7);
    /* no codec: the text as it is, readable without one */
    void *plain = store_codec_pack(NULL, p);
    assert_int_equal(store_codec_blob_size(plain), 8 + text_len(p) + 1);
    json_t *back = store_codec_unpack(NULL, plain);
    assert_true(json_equal(back, p));
    json_decref(back);
    xfree(plain);

    /* text unlike the dictionary that does not compress stays plain too */
    struct store_codec *c = NULL;
    assert_int_equal(store_codec_new("{\"zz\":1}", 8, &c), 0);
    json_t *tiny = json_pack("{s:i}", "q", 3);
    void *t = store_codec_pack(c, tiny);
    assert_int_equal(store_codec_blob_size(t), 8 + text_len(tiny) + 1);
    back = store_codec_unpack(c, t);
    assert_true(json_equal(back, tiny));
    json_decref(back);
    xfree(t);
    json_decref(tiny);
    store_codec_free(c);

    /* a compressed blob with a damaged body or length reads as NULL */
    char *sample = json_dumps(p, JSON_COMPACT);
    assert_int_equal(store_codec_new(sample, strlen(sample), &c), 0);
    json_t *q = pod(8);
    unsigned char *b = store_codec_pack(c, q);
    size_t n = store_codec_blob_size(b);
    assert_true(n < text_len(q));
    assert_null(store_codec_unpack(NULL, b)); /* compressed, and no codec */
    uint32_t raw;
    memcpy(&raw, b, sizeof(raw));
    raw += 1;
    memcpy(b, &raw, sizeof(raw));
    assert_null(store_codec_unpack(c, b));
    raw -= 1;
    memcpy(b, &raw, sizeof(raw));
    for (size_t i = 8; i < n; i++)
        b[i] ^= 0x5a;
    assert_null(store_codec_unpack(c, b));
    xfree(b);
    xfree(sample);
    json_decref(q);
    json_decref(p);
    store_codec_free(c);
}

static void test_store_packs(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    kube_store_set_compact_above(s, 10);
    size_t raw = 0;
    for (int i = 0; i < 200; i++) {
        json_t *p = pod(i);
        raw += text_len(p);
        assert_int_equal(kube_store_put(s, p, NULL), 0);
        if (i == 5)
            assert_int_equal(kube_store_packed_bytes(s), 0); /* trees below the threshold */
    }
    assert_true(kube_store_is_compact(s));
    size_t packed = kube_store_packed_bytes(s);
    assert_true(packed > 0 && packed * 4 < raw);
    /* the objects packed at the switch and after it read back equal */
    for (int i = 0; i < 200; i += 37) {
        json_t *p = pod(i);
        char key[64];
        (void)snprintf(key, sizeof(key), "bench/sbx-%06d", i);
        json_t *g = kube_store_get(s, key);
        assert_true(json_equal(g, p));
        json_decref(g);
        json_decref(p);
    }
    kube_store_free(s);
}

struct reader {
    struct kube_store *s;
    int bad;
};

static void *read_many(void *arg)
{
    struct reader *r = arg;
    for (int i = 0; i < 400; i++) {
        char key[64];
        (void)snprintf(key, sizeof(key), "bench/sbx-%06d", i % 50);
        json_t *g = kube_store_get(r->s, key);
        json_t *want = pod(i % 50);
        if (!json_equal(g, want))
            r->bad++;
        json_decref(g);
        json_decref(want);
    }
    return NULL;
}

static void test_concurrent_reads(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    assert_int_equal(kube_store_set_compact(s, true), 0);
    for (int i = 0; i < 50; i++)
        assert_int_equal(kube_store_put(s, pod(i), NULL), 0);
    pthread_t th[8];
    struct reader rd[8];
    for (int i = 0; i < 8; i++) {
        rd[i] = (struct reader){.s = s};
        assert_int_equal(pthread_create(&th[i], NULL, read_many, &rd[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(rd[i].bad, 0);
    }
    kube_store_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_similar_objects_pack_small),
        cmocka_unit_test(test_plain_and_damaged_blobs),
        cmocka_unit_test(test_store_packs),
        cmocka_unit_test(test_concurrent_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
