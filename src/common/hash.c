/* SPDX-License-Identifier: Apache-2.0 */
/* FNV-1a, 32-bit. */
#include "common/hash.h"

uint32_t hash_fnv1a32(uint32_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x01000193u;
    }
    return h;
}
