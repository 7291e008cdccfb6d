/* SPDX-License-Identifier: Apache-2.0 */
#include "http/progress.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>

/* The socket's unsent or unacknowledged bytes, or -1 when they cannot be read. */
static int outq_of(uv_tcp_t *tcp)
{
    uv_os_fd_t fd;
    int n = 0;
    if (uv_fileno((uv_handle_t *)tcp, &fd) < 0 || ioctl(fd, SIOCOUTQ, &n) < 0 || n < 0)
        return -1;
    return n;
}

void http_progress_mark(struct http_progress *p, uv_tcp_t *tcp, usec_t now)
{
    p->at = now;
    p->outq = outq_of(tcp);
}

usec_t http_progress_at(struct http_progress *p, uv_tcp_t *tcp, usec_t now)
{
    int n = outq_of(tcp);
    if (n >= 0 && n != p->outq) {
        p->outq = n;
        p->at = now;
    }
    return p->at;
}
