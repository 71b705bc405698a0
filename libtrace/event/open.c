/* SPDX-License-Identifier: MIT */
/* tt_session_open: the one place that knows both backends, and picks one for the config's mode.
 *
 * It sits above the record and replay layers so that neither the session layer nor either
 * backend needs to know of the other (docs/ARCHITECTURE.md).
 */
#include "record.h"
#include "replay-int.h"

int tt_session_open(const tt_config *cfg, tt_session **out, tt_error_info *err)
{
    if (!cfg || !out)
        return tt_fail(err, TT_E_INVAL, 0, UINT64_MAX, "tt_session_open: NULL argument");
    const struct tt_config_impl *c = tt_cfg(cfg);
    *out = NULL;
    switch (c->mode) {
    case TT_MODE_OFF:
        *out = &tt_off_session;
        return TT_OK;
    case TT_MODE_RECORD:
        return tt_session_create_(cfg, &tt_record_backend, out, err);
    case TT_MODE_REPLAY:
        return tt_session_create_(cfg, &tt_replay_backend, out, err);
    default:
        return tt_fail(err, TT_E_CONFIG, 0, UINT64_MAX, "invalid mode %u", c->mode);
    }
}
