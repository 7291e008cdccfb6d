/* SPDX-License-Identifier: Apache-2.0 */
/* The events recorder against the real kube-apiserver: it creates core/v1 Events about
 * an object, aggregates repeats into one Event with a growing count, keeps different
 * messages apart, and its per-object spam filter caps what reaches the API. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "kube/client.h"
#include "kube/events.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "support/apiserver.h"
#include "support/kube_fixture.h"

#define WAIT (60 * USEC_PER_SEC)

static struct kube_client *client;
static char ns[64];

static int setup(void **state)
{
    (void)state;
    it_fixture_setup("it-events", NULL, &client, ns, sizeof(ns));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    it_fixture_teardown(client, ns, NULL);
    return 0;
}

static json_t *make_object(const char *name)
{
    struct kube_err err;
    json_t *got = NULL;
    json_t *obj = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                            "metadata", "name", name);
    IT_OK(kube_create(client, &KUBE_RES_CONFIGMAPS, ns, obj, &got, &err), &err);
    json_decref(obj);
    return got;
}

/* The Events about the object called name, as a new reference to the items array. */
static json_t *events_about(const char *name)
{
    struct kube_err err;
    struct kube_req req;
    char sel[128];
    json_t *list = NULL;
    snprintf(sel, sizeof(sel), "involvedObject.name=%s", name);
    kube_req_init(&req, "GET", &KUBE_RES_EVENTS);
    req.field_selector = sel;
    IT_OK(kube_list_all(client, &KUBE_RES_EVENTS, ns, &req, &list, &err), &err);
    json_t *items = json_incref(json_object_get(list, "items"));
    json_decref(list);
    return items;
}

static const json_t *find_reason(const json_t *items, const char *reason)
{
    size_t i;
    const json_t *ev;
    json_array_foreach(items, i, ev)
    {
        const char *r = json_string_value(json_object_get(ev, "reason"));
        if (r && strcmp(r, reason) == 0)
            return ev;
    }
    return NULL;
}

static struct events_recorder *recorder(unsigned burst)
{
    struct events_opts o = {.component = "as-integration", .instance = "it-1", .burst = burst};
    struct events_recorder *r = NULL;
    events_api_kube(client, &o.api);
    assert_int_equal(events_recorder_new(&o, &r), 0);
    return r;
}

static void test_create_and_aggregate(void **state)
{
    struct events_stats st;
    (void)state;
    json_t *obj = make_object("evented");
    struct events_recorder *r = recorder(0);

    events_record(r, obj, EVENTS_NORMAL, "Reconciled", "step %d done", 1);
    events_flush(r);
    json_t *items = events_about("evented");
    assert_int_equal(json_array_size(items), 1);
    const json_t *ev = json_array_get(items, 0);
    assert_string_equal(kube_obj_path_str(ev, "type"), "Normal");
    assert_string_equal(kube_obj_path_str(ev, "message"), "step 1 done");
    assert_string_equal(kube_obj_path_str(ev, "involvedObject.uid"), kube_obj_uid(obj));
    assert_string_equal(kube_obj_path_str(ev, "involvedObject.kind"), "ConfigMap");
    assert_string_equal(kube_obj_path_str(ev, "source.component"), "as-integration");
    json_decref(items);

    for (int i = 0; i < 3; i++)
        events_record(r, obj, EVENTS_NORMAL, "Reconciled", "step %d done", 1);
    events_record(r, obj, EVENTS_WARNING, "Failed", "could not %s", "finish");
    events_flush(r);
    items = events_about("evented");
    assert_int_equal(json_array_size(items), 2);
    ev = find_reason(items, "Reconciled");
    assert_non_null(ev);
    assert_int_equal(json_integer_value(json_object_get(ev, "count")), 4);
    ev = find_reason(items, "Failed");
    assert_non_null(ev);
    assert_string_equal(kube_obj_path_str(ev, "type"), "Warning");
    assert_string_equal(kube_obj_path_str(ev, "message"), "could not finish");
    json_decref(items);

    events_stats(r, &st);
    assert_int_equal(st.created, 2);
    assert_int_equal(st.patched, 3);
    assert_int_equal(st.failed, 0);
    events_recorder_free(r);
    json_decref(obj);
}

static void test_spam_filter(void **state)
{
    struct events_stats st;
    (void)state;
    json_t *obj = make_object("noisy");
    struct events_recorder *r = recorder(5);

    for (int i = 0; i < 20; i++)
        events_record(r, obj, EVENTS_WARNING, "Flapping", "attempt %d", i);
    events_flush(r);
    events_stats(r, &st);
    assert_int_equal(st.created, 5);
    assert_int_equal(st.dropped_spam, 15);
    json_t *items = events_about("noisy");
    assert_int_equal(json_array_size(items), 5);
    json_decref(items);
    events_recorder_free(r);
    json_decref(obj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_and_aggregate),
        cmocka_unit_test(test_spam_filter),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
