/* The server side of a build without libmicrohttpd (CMake's "server not built: libmicrohttpd not found", or
 * -DTD_SERVER=OFF): the public td_server_* functions exist, so that the library exports the same symbols in every
 * build, and td_server_start refuses with the reason. Where libmicrohttpd is found, server.c replaces this file.
 * td_server_default_params is server_params.c's, in both builds. */
#include "typedecide_server.h"
#include "util/error.h"

td_status td_server_start(const td_model *model, const td_server_params *params, td_server **out) {
    (void)model, (void)params;
    if (out) *out = NULL;
    return td_fail(TD_ERR_UNSUPPORTED, "this typedecide was built without the HTTP server (libmicrohttpd was not found "
                                       "when it was configured: install libmicrohttpd-dev and configure again)");
}

int32_t td_server_port(const td_server *server) {
    (void)server;
    return 0;
}

void td_server_free(td_server *server) { (void)server; }
