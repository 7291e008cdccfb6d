/* SPDX-License-Identifier: Apache-2.0 */
/* Checks a Prometheus exposition against tests/data/observability/: every family in
 * upstream_metrics.txt is there with its type and, in its first sample, exactly its label
 * names in order; every histogram in upstream_buckets.txt has exactly those buckets. */
#pragma once

/** Fails the running cmocka test on the first mismatch (AS_TEST_DATA names the data
 * directory). Returns the number of families checked. */
int it_check_upstream_metrics(const char *exposition);
