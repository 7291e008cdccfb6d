/* SPDX-License-Identifier: Apache-2.0 */
/* The ProcessService (api/proto/process/v1/process.proto) served over gRPC, on the same
 * process engine (proc.c) as the HTTP process API. */
#pragma once

#include "process/v1/process.pb-c.h"
#include "sandboxd/grpc.h"
#include "sandboxd/procreq.h"

struct sbd;

/** Starts the gRPC server of d on d->cfg.grpc_port. Returns 0 or a negative errno. */
int sbd__grpc_start(struct sbd *d);
/** Converts a ProcessConfig (borrowed; NULL allowed) into r (fresh; release with
 * sbd_procreq_done): argv, env overrides and the cwd cleaned against root_path. Returns
 * SBD_GRPC_OK, or an error status with a static message in *ret_msg. */
enum sbd_gstatus sbd__grpc_procreq(const Process__V1__ProcessConfig *cfg, const char *root_path,
                                   struct sbd_procreq *r, const char **ret_msg);
