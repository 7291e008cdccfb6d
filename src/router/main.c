/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox-router: flags, signals and the router's lifecycle. */
#include <stdio.h>

int main(void)
{
    fputs("sandbox-router: not yet wired\n", stderr);
    return 1;
}
