/* SPDX-License-Identifier: Apache-2.0 */
/* The extensions controller's own names and defaults; the extensions API's names are in
 * api/extensions.h. */
#pragma once

#include "api/extensions.h"
#include "controller/sandbox_names.h"

#define EXT_NP_SUFFIX        "-network-policy"
#define EXT_ROUTER_NAMESPACE "agent-sandbox-system"
#define EXT_ROUTER_APP       "sandbox-router"
#define EXT_CONTROLLER_APP   "agent-sandbox-controller" /* in EXT_ROUTER_NAMESPACE too */
#define EXT_FIELD_MANAGER    "sandbox-extensions-controller"
