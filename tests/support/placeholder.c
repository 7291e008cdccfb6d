/* SPDX-License-Identifier: Apache-2.0 */
/* Test support library; helpers live beside this file. */
#include "support/placeholder.h"

int as_test_support_version(void)
{
    return 1;
}
