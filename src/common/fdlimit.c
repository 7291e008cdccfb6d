/* SPDX-License-Identifier: Apache-2.0 */
#include "common/fdlimit.h"

#include <errno.h>

int fdlimit_raise(rlim_t want, struct rlimit *ret_old)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -errno;
    if (ret_old)
        *ret_old = rl;
    if (rl.rlim_max != RLIM_INFINITY && want > rl.rlim_max)
        want = rl.rlim_max;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= want)
        return 0;
    if (rl.rlim_cur == RLIM_INFINITY)
        return 0;
    rl.rlim_cur = want;
    return setrlimit(RLIMIT_NOFILE, &rl) < 0 ? -errno : 0;
}
