/* SPDX-License-Identifier: Apache-2.0 */
/* Placeholder so the library has a unit until its modules land. */
int as_kube_placeholder(void);
int as_kube_placeholder(void)
{
    return 0;
}
