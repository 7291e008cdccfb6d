/* SPDX-License-Identifier: Apache-2.0 */
/* Placeholder so the library has a unit until its modules land. */
int as_http_placeholder(void);
int as_http_placeholder(void)
{
    return 0;
}
