/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
int as_test_support_version(void);
