/* SPDX-License-Identifier: Apache-2.0 */
/* Opt-in page merging and fixed layout for what sandboxd starts (see memmerge.h). */
#include "sandboxd/memmerge.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <strings.h>

#include <sys/personality.h>
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

int sbd_memmerge_parse(const char *s, enum sbd_memmerge_mode *mode)
{
    static const char *const yes[] = {"1", "true", "yes", "on", "enabled", NULL};
    static const char *const fixed[] = {"fixed-layout", "maximal", NULL};
    static const char *const no[] = {"", "0", "false", "no", "off", "disabled", NULL};
    if (!s)
        s = "";
    if (word_in(s, yes))
        *mode = SBD_MEMMERGE_ON;
    else if (word_in(s, fixed))
        *mode = SBD_MEMMERGE_FIXED_LAYOUT;
    else if (word_in(s, no))
        *mode = SBD_MEMMERGE_OFF;
    else
        return -EINVAL;
    return 0;
}

int sbd_memmerge_enable(void)
{
    if (prctl(PR_SET_MEMORY_MERGE, 1UL, 0UL, 0UL, 0UL) < 0)
        return -errno;
    return 0;
}

int sbd_memmerge_fix_layout(void)
{
    int cur = personality(0xffffffffUL); /* reads without changing */
    if (cur < 0)
        return -errno;
    if (personality((unsigned long)cur | ADDR_NO_RANDOMIZE) < 0)
        return -errno;
    return 0;
}

int sbd_memmerge_get(void)
{
    int r = prctl(PR_GET_MEMORY_MERGE, 0UL, 0UL, 0UL, 0UL);
    return r < 0 ? -errno : (r ? 1 : 0);
}
