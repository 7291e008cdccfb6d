/* SPDX-License-Identifier: Apache-2.0 */
#include "memmerge.h"

#include <errno.h>
#include <stddef.h>
#include <strings.h>

#include <sys/prctl.h>

/* Linux 6.4 (include/uapi/linux/prctl.h); older headers lack them. */
#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#endif
#ifndef PR_GET_MEMORY_MERGE
#define PR_GET_MEMORY_MERGE 68
#endif

static bool word_in(const char *s, const char *const *words)
{
    for (; *words; words++)
        if (strcasecmp(s, *words) == 0)
            return true;
    return false;
}

int sbd_memmerge_parse(const char *s, bool *on)
{
    static const char *const yes[] = {"1", "true", "yes", "on", "enabled", NULL};
    static const char *const no[] = {"", "0", "false", "no", "off", "disabled", NULL};
    if (!s)
        s = "";
    if (word_in(s, yes)) {
        *on = true;
        return 0;
    }
    if (word_in(s, no)) {
        *on = false;
        return 0;
    }
    return -EINVAL;
}

int sbd_memmerge_enable(void)
{
    if (prctl(PR_SET_MEMORY_MERGE, 1UL, 0UL, 0UL, 0UL) < 0)
        return -errno;
    return 0;
}

int sbd_memmerge_get(void)
{
    int r = prctl(PR_GET_MEMORY_MERGE, 0UL, 0UL, 0UL, 0UL);
    return r < 0 ? -errno : (r ? 1 : 0);
}
