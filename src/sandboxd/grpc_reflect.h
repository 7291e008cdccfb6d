/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC server reflection (grpc.reflection.v1 and v1alpha ServerReflectionInfo), so that
 * grpcurl and other tools find the ProcessService without being given its proto. */
#pragma once

#include <stddef.h>

#include "sandboxd/grpc.h"

/** The FileDescriptorSet of process/v1/process.proto and its imports, dependencies first
 * (gen-fdset.sh, at build time). */
extern const unsigned char sbd_process_fdset[];
extern const size_t sbd_process_fdset_len;

/** The ServerReflectionInfo handler of both packages (a streaming method: one answer per
 * request message, the call ends with the client's side). */
void sbd__grpc_reflect(struct sbd_gcall *c, const uint8_t *msg, size_t n, void *ctx);

#define SBD_REFLECT_V1      "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
#define SBD_REFLECT_V1ALPHA "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
