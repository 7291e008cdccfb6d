/* SPDX-License-Identifier: Apache-2.0 */
/* Code contexts (stateful code execution): named Python kernels, each a driver process
 * (driver/kernel.py) spawned like any other process, with the REST API under
 * /v1/contexts and /v1/code/execute. See docs/code-interpreter.md. */
#pragma once

#include <stddef.h>

struct sbd;

#define SBD_KERNEL_DRIVER "/usr/local/lib/agent-sandbox/kernel.py"
#define SBD_KERNEL_PYTHON "python3"

/** The driver embedded in sandboxd (kernel_driver.c, generated from driver/kernel.py),
 * run when the --kernel-driver file does not exist. */
extern const char sbd_kernel_driver_source[];
extern const size_t sbd_kernel_driver_size;

/** Creates d's context table and registers the routes. Returns 0 or negative. */
int sbd__kernels_register(struct sbd *d);
/** Number of contexts whose kernel runs but executes nothing (not activity). */
size_t sbd__kernels_idle(const struct sbd *d);
/** Ends every execution and kills every kernel (daemon shutdown). */
void sbd__kernels_shutdown(struct sbd *d);
/** Frees the table (after the shutdown; NULL table is fine). */
void sbd__kernels_free(struct sbd *d);
