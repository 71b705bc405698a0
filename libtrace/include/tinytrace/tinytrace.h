/* SPDX-License-Identifier: MIT */
/* tinytrace — record and replay a program's run. Include this header for the whole API.
 * See session.h for the life of a session, event.h for the recording calls, replay.h for
 * divergence reports, store.h for reading and verifying trace files, sync.h for the order of
 * locks and other synchronization. */
#ifndef TINYTRACE_H
#define TINYTRACE_H

#include <tinytrace/version.h>
#include <tinytrace/error.h>
#include <tinytrace/event.h>
#include <tinytrace/store.h>
#include <tinytrace/index.h>
#include <tinytrace/session.h>
#include <tinytrace/replay.h>
#include <tinytrace/checkpoint.h>
#include <tinytrace/sync.h>

#endif
