/* SPDX-License-Identifier: Apache-2.0 */
/* agent-sandbox-controller entry point (being written). */
int main(void);

int main(void)
{
    return 0;
}
