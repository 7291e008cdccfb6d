/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox: placeholder entry point until the CLI lands. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "version") == 0) {
        printf("kubectl-sandbox %s\n", AS_VERSION);
        return 0;
    }
    fprintf(stderr, "usage: kubectl-sandbox version\n");
    return 2;
}
