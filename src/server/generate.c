/* Generation endpoints. Waiting for the generation library (td_gen_*, td_chat_render on branch issue-14-gen):
 * until it is merged these endpoints answer 501 Not Implemented, saying so. */
#include "server/server_internal.h"

td_status td_server_gen_start(td_server *s) {
    s->gen = NULL;
    return TD_OK;
}

void td_server_gen_stop(td_server *s) { (void)s; }

int td_server_render_chat(td_server *s, const td_req *r, int add_generation_prompt, char **text, size_t *len,
                          td_reply *out) {
    (void)s, (void)r, (void)add_generation_prompt, (void)text, (void)len;
    td_reply_fail(out, 501, "server_error", "messages", "not_implemented", "chat templates are not built into this server yet");
    return -1;
}

void td_ep_chat(td_server *s, td_req *r, td_reply *out) {
    (void)s, (void)r;
    td_reply_fail(out, 501, "server_error", NULL, "not_implemented", "chat completions are not built into this server yet");
}

void td_ep_completion(td_server *s, td_req *r, td_reply *out) {
    (void)s, (void)r;
    td_reply_fail(out, 501, "server_error", NULL, "not_implemented", "completions are not built into this server yet");
}
