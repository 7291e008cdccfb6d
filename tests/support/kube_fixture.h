/* SPDX-License-Identifier: Apache-2.0 */
/* The group setup that integration suites share: an admin client and a namespace of
 * their own (optionally with a CRD), and for the controller and CLI suites the
 * agent-sandbox CRDs of api/crds/ and the namespace's default ServiceAccount. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/clock.h"
#include "kube/client.h"
#include "kube/err.h"
#include "kube/res.h"

/* The Widget test CRD (namespaced; status and scale subresources). */
#define IT_WIDGET_CRD_FILE "crds/widget-crd.json" /* under $AS_TEST_DATA */
#define IT_WIDGET_CRD_NAME "widgets.testing.agents.x-k8s.io"
extern const struct kube_res IT_RES_WIDGETS;

/** cmocka group-setup helper: creates the admin client (*ret_client, new, free with
 * it_fixture_teardown) and a namespace "<prefix>-<random>" (its name written into ns,
 * size bytes); then, when crd (a file under $AS_TEST_DATA, borrowed) is not NULL,
 * applies that CRD and waits up to a minute until it is served. Fails the running
 * cmocka setup (fail_msg) on any error. */
void it_fixture_setup(const char *prefix, const char *crd, struct kube_client **ret_client,
                      char *ns, size_t size);
/** cmocka group-teardown helper: deletes namespace ns and asserts it is gone within a
 * minute; when crd_name (borrowed) is not NULL, deletes that CRD and asserts it is gone
 * within a minute; then frees client (taken). */
void it_fixture_teardown(struct kube_client *client, const char *ns, const char *crd_name);

/** Applies the agent-sandbox CRDs of <repo>/api/crds/ (found from $AS_TEST_DATA): the
 * Sandbox and, with extensions, SandboxTemplate, SandboxWarmPool and SandboxClaim; each
 * is waited for until served (timeout each). Returns 0 or a negative errno with reterr
 * filled (may be NULL). */
int it_sandbox_crds_apply(struct kube_client *c, bool extensions, usec_t timeout,
                          struct kube_err *reterr);
/** Creates ServiceAccount "default" in ns (borrowed): no service-account controller
 * runs beside hack/apiserver.sh, and Pods need it. AlreadyExists counts as created.
 * Returns 0 or a negative errno with reterr filled (may be NULL). */
int it_default_sa_create(struct kube_client *c, const char *ns, struct kube_err *reterr);

struct it_sandbox_ns_opts {
    const char *prefix; /* of the namespace name, as for it_ns_create */
    bool extensions;    /* also the CRDs of the extensions (see it_sandbox_crds_apply) */
    bool default_sa;    /* create the ServiceAccount "default" (it_default_sa_create) */
    usec_t timeout;     /* for each CRD to be served */
};

/** The group setup of the controller and CLI suites: the CRDs (it_sandbox_crds_apply),
 * a new namespace (its name into ns, size bytes) and, if asked, its default
 * ServiceAccount. Returns 0 or a negative errno with reterr filled (may be NULL). */
int it_sandbox_ns_setup(struct kube_client *c, const struct it_sandbox_ns_opts *o, char *ns,
                        size_t size, struct kube_err *reterr);
