/* The server's defaults, in every build: with libmicrohttpd (server.c) and without it (server_none.c), so a caller
 * may fill and print them before starting either way. */
#include <string.h>

#include "typedecide_server.h"

td_server_params td_server_default_params(void) {
    td_server_params p;
    memset(&p, 0, sizeof p);
    p.host = "127.0.0.1";
    p.port = 8080;
    p.parallel = 4;
    p.queue_max = 64;
    p.max_body = (int64_t)1 << 20;
    p.max_tokens = 4096;
    p.timeout_s = 30;
    p.max_connections = 1024;
    p.max_connections_per_ip = 16;
    p.n_threads = 1;
    p.memory_mb = 0; /* automatic: 1024 MB for generation, /v1/decide's by its device (td_decide_params) */
    return p;
}
