/* SPDX-License-Identifier: Apache-2.0 */
/* Process API placeholder. */
#include "sandboxd/sbd_int.h"

int sbd__procs_register(struct sbd *d)
{
    (void)d;
    return 0;
}
