/* SPDX-License-Identifier: Apache-2.0 */
/* FNV-1a (32-bit): the unkeyed hash behind names and fingerprints that other processes
 * and earlier versions must reproduce (the sandbox-name-hash label, template hashes),
 * and behind small fixed tables. A hash table an outsider can fill uses common/map.h
 * (SipHash with a random key) instead. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/** Offset basis: the state before the first byte. */
#define HASH_FNV1A32_INIT 0x811c9dc5u

/** Continues the FNV-1a state h over p[0..n) and returns the new state; start with
 * HASH_FNV1A32_INIT. Feeding a string in pieces gives the hash of the whole. */
uint32_t hash_fnv1a32(uint32_t h, const void *p, size_t n);
