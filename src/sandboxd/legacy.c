/* SPDX-License-Identifier: Apache-2.0 */
/* Legacy API placeholder. */
#include "sandboxd/sbd_int.h"
#include "sandboxd/util.h"

int sbd__legacy_register(struct sbd *d)
{
    (void)d;
    return 0;
}

int sbd__legacy_error_body(void *ctx, int status, const char *detail, struct buf *out,
                           const char **ret_content_type)
{
    return sbd_error_body(ctx, status, detail, out, ret_content_type);
}
