/* SPDX-License-Identifier: Apache-2.0 */
/* Limits private to the controller, beside common/limits.h. */
#pragma once

#define LIMIT_CTRL_ERRORS_TEXT  4096u               /* joined errors in one Ready message */
#define LIMIT_CTRL_PROP_LIST    (256u * 1024)       /* a propagated-labels/annotations value */
#define LIMIT_CTRL_METRICS_PAGE (32u * 1024 * 1024) /* one rendered /metrics page */
