/* SPDX-License-Identifier: Apache-2.0 */
/* How a compact store keeps an object: its compact JSON text compressed with zstd against a
 * dictionary, the text of one object of the same store. Objects of one kind share almost
 * all of their text (field names, the pod template, labels, tolerations), so what is left
 * per object is its names, UIDs, versions, times and addresses: a 1.7 KB Pod packs into
 * about 130 bytes, a 1 KB Sandbox into about 100.
 *
 * A blob is a small header (the text's length, the compressed length) and the compressed
 * bytes, or the text itself when there is no dictionary or compression did not pay.
 *
 * Thread-safety: a codec is immutable once made. store_codec_pack may run on one thread
 * at a time per codec (the store's write lock); store_codec_unpack on any number of
 * threads (decompression contexts come from a small shared pool). */
#pragma once

#include <jansson.h>
#include <stddef.h>

struct store_codec;

/** Makes a codec whose dictionary is a copy of the len bytes of sample (the compact text
 * of a typical object). Returns 0 and *ret (free with store_codec_free), -EINVAL for an
 * empty sample, or -ENOMEM when zstd cannot build the dictionary. */
int store_codec_new(const char *sample, size_t len, struct store_codec **ret);
/** Frees the codec; NULL is fine. Blobs it packed can no longer be unpacked. */
void store_codec_free(struct store_codec *c);

/** Packs obj (borrowed) into a new blob (free with xfree). c NULL keeps the text as it is.
 * Never returns NULL: an object that cannot be encoded (jansson out of memory, or a
 * string built without its UTF-8 check) aborts. */
void *store_codec_pack(struct store_codec *c, const json_t *obj);
/** Returns a new object parsed from blob (borrowed), packed by the same codec (or by
 * none, for a blob that holds its text), or NULL when the blob is damaged. */
json_t *store_codec_unpack(const struct store_codec *c, const void *blob);
/** The bytes blob takes (header included), for accounting. */
size_t store_codec_blob_size(const void *blob);
