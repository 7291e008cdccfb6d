/* SPDX-License-Identifier: Apache-2.0 */
/* A configured cluster CA (a file or inline data) is the only trust anchor, as for
 * kubectl: libcurl's built-in CA directory (the system's) is not searched as well, or a
 * server with any publicly signed certificate for the name would get the token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/xalloc.h"
#include "kube/client_int.h"
#include "kube/config.h"

static int on_debug(CURL *h, curl_infotype t, char *d, size_t n, void *ctx)
{
    (void)h;
    if (t == CURLINFO_TEXT)
        (void)buf_append(ctx, d, n);
    return 0;
}

/* A loopback listener the kernel accepts on and nobody answers: the handshake starts,
 * which is as far as the trust set-up needs to be seen. */
static int listener(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* The text libcurl logs for a request through a handle set up by kube__curl_tls for a
 * kubeconfig whose cluster has ca ("certificate-authority: FILE" or
 * "certificate-authority-data: B64"). */
static void tls_log(const char *ca, struct buf *log)
{
    int port, lfd = listener(&port);
    char dir[] = "/tmp/as-test-tls-XXXXXX", kc[128], text[4096], url[64];
    assert_non_null(mkdtemp(dir));
    (void)snprintf(kc, sizeof(kc), "%s/kubeconfig", dir);
    (void)snprintf(text, sizeof(text),
                   "current-context: t\nclusters:\n- name: k\n  cluster: {server: "
                   "'https://127.0.0.1:%d', %s}\ncontexts:\n- name: t\n  context: {cluster: k, "
                   "user: u}\nusers:\n- name: u\n  user: {token: t}\n",
                   port, ca);
    FILE *f = fopen(kc, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    struct kube_config *cfg = NULL;
    struct kube_err e;
    assert_int_equal(kube_config_load(&(struct kube_config_opts){.kubeconfig = kc}, &cfg, &e), 0);
    CURL *h = curl_easy_init();
    kube__curl_tls(h, cfg);
    (void)snprintf(url, sizeof(url), "https://127.0.0.1:%d/version", port);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 2000L); /* the set-up, under valgrind too */
    curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
    curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, on_debug);
    curl_easy_setopt(h, CURLOPT_DEBUGDATA, log);
    (void)curl_easy_perform(h);
    curl_easy_cleanup(h);
    kube_config_free(cfg);
    close(lfd);
    assert_int_equal(unlink(kc), 0);
    assert_int_equal(rmdir(dir), 0);
}

static char *ca_path(void)
{
    const char *d = getenv("AS_TEST_DATA");
    char p[1024];
    assert_non_null(d);
    (void)snprintf(p, sizeof(p), "%s/kube/test-ca.pem", d);
    return xstrdup(p);
}

static void test_ca_file_is_the_only_anchor(void **state)
{
    (void)state;
    struct buf log;
    char ca[1200], *p = ca_path();
    (void)snprintf(ca, sizeof(ca), "certificate-authority: '%s'", p);
    buf_init(&log, 1u << 20);
    tls_log(ca, &log);
    if (!strstr(buf_str(&log), "CApath: none"))
        fail_msg("the system CA directory is trusted too:\n%s", buf_str(&log));
    assert_non_null(strstr(buf_str(&log), "test-ca.pem"));
    buf_done(&log);
    xfree(p);
}

static void test_ca_data_is_the_only_anchor(void **state)
{
    (void)state;
    struct buf log, pem, b64;
    char *p = ca_path();
    FILE *f = fopen(p, "rb");
    char chunk[4096];
    size_t n;
    buf_init(&pem, 1u << 16);
    buf_init(&b64, 1u << 17);
    buf_init(&log, 1u << 20);
    assert_non_null(f);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        assert_int_equal(buf_append(&pem, chunk, n), 0);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(base64_encode(pem.data, pem.len, &b64), 0);
    buf_reset(&pem);
    assert_int_equal(buf_printf(&pem, "certificate-authority-data: '%s'", buf_str(&b64)), 0);
    tls_log(buf_str(&pem), &log);
    /* the blob alone: no CA file or directory of the system's is loaded beside it */
    if (strstr(buf_str(&log), "CAfile: /") || strstr(buf_str(&log), "CApath: /"))
        fail_msg("the system CAs are trusted too:\n%s", buf_str(&log));
    assert_non_null(strstr(buf_str(&log), "CA certificate blob"));
    buf_done(&log);
    buf_done(&b64);
    buf_done(&pem);
    xfree(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ca_file_is_the_only_anchor),
        cmocka_unit_test(test_ca_data_is_the_only_anchor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
