/* SPDX-License-Identifier: Apache-2.0 */
/* The open-file limit of a server whose connection caps are above the usual soft limit. */
#pragma once

#include <sys/resource.h>

/** Raises the soft RLIMIT_NOFILE to want, or to the hard limit when that is lower (never
 * lowers it). The soft limit before the call goes to *ret_old when ret_old is not NULL
 * (for children that should start with it). Returns 0, or a negative errno (the limit
 * is then as it was). */
int fdlimit_raise(rlim_t want, struct rlimit *ret_old);
