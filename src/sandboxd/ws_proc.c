/* SPDX-License-Identifier: Apache-2.0 */
/* Process API over WebSocket (placeholder). */
#include "sandboxd/api_proc.h"

int sbd__ws_register(struct sbd *d)
{
    (void)d;
    return 0;
}
