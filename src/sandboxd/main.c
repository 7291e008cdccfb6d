/* SPDX-License-Identifier: Apache-2.0 */
/* sandboxd entry point (placeholder until the daemon is wired up). */
int main(void)
{
    return 0;
}
