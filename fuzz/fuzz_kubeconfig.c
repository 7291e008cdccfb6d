/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for kubeconfig parsing: the YAML loader (plain and typed) and the
 * whole kube_config_load path (merge, context selection, inline base64 TLS data, exec
 * plugin description) over the input written to a memfd. Invariants: a loaded document
 * is a JSON object, a failure carries a message, a loaded config has a server without
 * a trailing slash and a namespace. Nothing is executed: tokens are never fetched.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Isrc \
 *     fuzz/fuzz_kubeconfig.c src/kube/{config,config_kubeconfig,config_incluster,
 *     config_exec,yaml,b64,err}.c src/common/{buf,str,xalloc,log,clock}.c \
 *     -ljansson -lyaml -o build/fuzz_kubeconfig */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mman.h>

#include "common/xalloc.h"
#include "kube/config.h"
#include "kube/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_yaml(const char *buf, size_t len, bool typed)
{
    json_t *doc = NULL;
    char err[256] = "";
    int r = typed ? kube_yaml_load_typed(buf, len, &doc, err, sizeof(err))
                  : kube_yaml_load(buf, len, &doc, err, sizeof(err));
    if (r < 0) {
        ASSERT(doc == NULL && err[0] != '\0');
        return;
    }
    ASSERT(r == 0 && doc != NULL);
    /* A dump must succeed: no invalid UTF-8 or cycles got into the value. */
    char *s = json_dumps(doc, JSON_COMPACT | JSON_ENCODE_ANY);
    ASSERT(s != NULL);
    xfree(s); /* jansson allocates with libc malloc, which xfree releases */
    json_decref(doc);
}

static void fuzz_config(const uint8_t *data, size_t size)
{
    static int fd = -1;
    char path[64];
    struct kube_config *cfg = NULL;
    struct kube_err e = {0};
    if (fd < 0 && (fd = memfd_create("fuzz-kubeconfig", MFD_CLOEXEC)) < 0)
        abort();
    if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    (void)snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    struct kube_config_opts o = {.kubeconfig = path};
    if (kube_config_load(&o, &cfg, &e) < 0) {
        ASSERT(cfg == NULL && e.code < 0 && e.message[0] != '\0');
        return;
    }
    const char *srv = kube_config_server(cfg);
    ASSERT(srv && kube_config_namespace(cfg) && kube_config_context(cfg));
    ASSERT(srv[0] == '\0' || srv[strlen(srv) - 1] != '/');
    struct kube_tls tls;
    kube_config_tls(cfg, &tls);
    ASSERT(!tls.ca_data || tls.ca_len > 0);
    kube_config_free(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = xmalloc(size ? size : 1); /* exact size: ASan sees overreads */
    memcpy(buf, data, size);
    fuzz_yaml(buf, size, false);
    fuzz_yaml(buf, size, true);
    xfree(buf);
    fuzz_config(data, size);
    return 0;
}
