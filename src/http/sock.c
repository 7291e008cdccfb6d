/* SPDX-License-Identifier: Apache-2.0 */
#include "http/sock.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "common/limits.h"

void http_sock_keepalive(uv_tcp_t *tcp)
{
    uv_os_fd_t fd;
    const int on = 1, idle = LIMIT_HTTP_KEEPALIVE_IDLE, intvl = LIMIT_HTTP_KEEPALIVE_INTVL,
              cnt = LIMIT_HTTP_KEEPALIVE_CNT;
    if (uv_fileno((const uv_handle_t *)tcp, &fd) < 0)
        return;
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}
