/* SPDX-License-Identifier: Apache-2.0 */
/* Limits private to the Kubernetes client, beside the shared ones in common/limits.h. */
#pragma once

#include "common/clock.h"

#define LIMIT_KUBE_EXEC_STDERR     (4u * 1024)         /* exec plugin stderr kept for errors */
#define LIMIT_KUBE_REQUEST_BODY    (16u * 1024 * 1024) /* one serialised request body */
#define LIMIT_KUBE_HEADER          (80u * 1024)        /* one request header (bearer token) */
#define LIMIT_KUBE_POOL_IDLE_SLOTS 32                  /* idle easy handles kept for reuse */
#define LIMIT_KUBE_TOKEN_RECHECK   (60 * USEC_PER_SEC) /* token file re-read at least this often */
#define LIMIT_KUBE_CERT            (1u * 1024 * 1024)  /* one CA / certificate / key file */
#define LIMIT_KUBECONFIG_FILES     16                  /* files in $KUBECONFIG */
#define LIMIT_KUBE_YAML_DEPTH      64                  /* nesting depth of a kubeconfig */
