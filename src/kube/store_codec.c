/* SPDX-License-Identifier: Apache-2.0 */
/* A compact store's blobs: compact JSON text, zstd-compressed against a dictionary taken
 * from one object of the store (store_codec.h). */
#include "kube/store_codec.h"

#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_createCDict_advanced: a raw-content dictionary */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <zstd.h>

#include "common/log.h"
#include "common/xalloc.h"

/* zstd's fastest level: a dictionary does most of the work for objects this similar. */
#define CODEC_LEVEL 1
/* Size the match window for objects up to this long (plus the dictionary). */
#define CODEC_SRC_HINT (16 * 1024)
/* Decompression contexts (96 KB each) kept for reuse; more readers at once make their own. */
#define CODEC_DCTX_POOL 4

struct store_codec {
    ZSTD_CDict *cdict;
    ZSTD_DDict *ddict;
    ZSTD_CCtx *cctx; /* store_codec_pack runs on one thread at a time */
};

/* The blob: z == 0 means data holds the text itself, NUL-terminated. */
struct blob {
    uint32_t raw; /* the text's length */
    uint32_t z;   /* compressed bytes in data, or 0 */
    unsigned char data[];
};

static pthread_mutex_t dctx_lock = PTHREAD_MUTEX_INITIALIZER;
static ZSTD_DCtx *dctx_pool[CODEC_DCTX_POOL];
static size_t dctx_n;

/* A decompression context from the pool or a new one (NULL: out of memory). */
static ZSTD_DCtx *dctx_get(void)
{
    ZSTD_DCtx *d = NULL;
    pthread_mutex_lock(&dctx_lock);
    if (dctx_n > 0)
        d = dctx_pool[--dctx_n];
    pthread_mutex_unlock(&dctx_lock);
    return d ? d : ZSTD_createDCtx();
}

/* Returns d to the pool, or frees it when the pool is full. */
static void dctx_put(ZSTD_DCtx *d)
{
    pthread_mutex_lock(&dctx_lock);
    if (dctx_n < CODEC_DCTX_POOL) {
        dctx_pool[dctx_n++] = d;
        d = NULL;
    }
    pthread_mutex_unlock(&dctx_lock);
    ZSTD_freeDCtx(d);
}

int store_codec_new(const char *sample, size_t len, struct store_codec **ret)
{
    if (!sample || len == 0)
        return -EINVAL;
    struct store_codec *c = XNEW(struct store_codec);
    ZSTD_compressionParameters cp = ZSTD_getCParams(CODEC_LEVEL, CODEC_SRC_HINT, len);
    c->cdict = ZSTD_createCDict_advanced(sample, len, ZSTD_dlm_byCopy, ZSTD_dct_rawContent, cp,
                                         ZSTD_defaultCMem);
    c->ddict = ZSTD_createDDict_advanced(sample, len, ZSTD_dlm_byCopy, ZSTD_dct_rawContent,
                                         ZSTD_defaultCMem);
    c->cctx = ZSTD_createCCtx();
    if (!c->cdict || !c->ddict || !c->cctx) {
        store_codec_free(c);
        return -ENOMEM;
    }
    *ret = c;
    return 0;
}

void store_codec_free(struct store_codec *c)
{
    if (!c)
        return;
    ZSTD_freeCDict(c->cdict);
    ZSTD_freeDDict(c->ddict);
    ZSTD_freeCCtx(c->cctx);
    xfree(c);
}

/* A blob holding text (len bytes) as it is. */
static struct blob *blob_plain(const char *text, size_t len)
{
    struct blob *b = xmalloc(sizeof(*b) + len + 1);
    b->raw = (uint32_t)len;
    b->z = 0;
    memcpy(b->data, text, len + 1);
    return b;
}

/* A blob holding text compressed, or NULL when compression fails or does not pay. */
static struct blob *blob_packed(struct store_codec *c, const char *text, size_t len)
{
    size_t cap = ZSTD_compressBound(len);
    struct blob *b = xmalloc(sizeof(*b) + cap);
    size_t z = ZSTD_compress_usingCDict(c->cctx, b->data, cap, text, len, c->cdict);
    if (ZSTD_isError(z) || z >= len) {
        xfree(b);
        return NULL;
    }
    b->raw = (uint32_t)len;
    b->z = (uint32_t)z;
    return xrealloc(b, sizeof(*b) + z); /* shrinking: gives the slack back */
}

void *store_codec_pack(struct store_codec *c, const json_t *obj)
{
    /* An object parsed from the API server always encodes, so NULL is jansson out of
     * memory: that aborts, as xmalloc does (a put that failed would leave the cache
     * serving the object's older version). Responses are capped far below 4 GiB. */
    char *text = json_dumps(obj, JSON_COMPACT);
    ASSERT(text != NULL);
    size_t len = strlen(text);
    struct blob *b = NULL;
    ASSERT(len <= UINT32_MAX);
    if (c)
        b = blob_packed(c, text, len);
    if (!b)
        b = blob_plain(text, len);
    xfree(text);
    return b;
}

/* Decompresses b into a new NUL-terminated buffer of b->raw bytes, or NULL. */
static char *inflate_blob(const struct store_codec *c, const struct blob *b)
{
    char *text = xmalloc((size_t)b->raw + 1);
    ZSTD_DCtx *d = dctx_get();
    size_t n =
        d ? ZSTD_decompress_usingDDict(d, text, b->raw, b->data, b->z, c->ddict) : (size_t)-1;
    if (d)
        dctx_put(d);
    if (!d || ZSTD_isError(n) || n != b->raw) {
        log_debug("store: a packed object does not decompress (%s)",
                  d ? ZSTD_getErrorName(n) : "out of memory");
        xfree(text);
        return NULL;
    }
    text[n] = '\0';
    return text;
}

json_t *store_codec_unpack(const struct store_codec *c, const void *blob)
{
    const struct blob *b = blob;
    json_error_t e;
    json_t *obj;
    if (!b)
        return NULL;
    if (b->z == 0) {
        obj = json_loadb((const char *)b->data, b->raw, JSON_ALLOW_NUL, &e);
    } else {
        if (!c)
            return NULL;
        char *text = inflate_blob(c, b);
        if (!text)
            return NULL;
        obj = json_loadb(text, b->raw, JSON_ALLOW_NUL, &e);
        xfree(text);
    }
    if (!obj)
        log_debug("store: stored text no longer parses: %s", e.text);
    return obj;
}

size_t store_codec_blob_size(const void *blob)
{
    const struct blob *b = blob;
    return sizeof(*b) + (b->z ? b->z : (size_t)b->raw + 1);
}
