/* typedecide inspect: what is inside a model. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide inspect M [--json]\n"
    "\n"
    "Architecture, parameter count, whether the embedding is tied and whether the file stores the table once or\n"
    "twice, each tensor's dtype, shape and bytes, the tensors the text model skips, and the slot map of a head\n"
    "pruned to the option letters. M is a Hugging Face model directory or a GGUF file.\n"
    "  --json   print the description as one JSON object\n";

int cmd_inspect(int argc, char **argv) {
    int as_json = 0;
    const cli_opt opts[] = {{"json", 0, NULL, &as_json}, {NULL, 0, NULL, NULL}};
    const char *pos[1];
    int np = 0;
    int r = cli_parse(argc, argv, opts, "inspect", pos, 1, &np);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
    if (np != 1) return cli_usage_error("inspect", "give the model");
    td_model *m;
    td_status st = cli_load_model(pos[0], 1, 1, NULL, &m);
    if (st != TD_OK) return cli_fail("inspect", st);
    char *js = NULL;
    st = td_model_describe(m, &js);
    td_model_free(m);
    if (st != TD_OK) return cli_fail("inspect", st);
    if (as_json) {
        puts(js);
        td_free(js);
        return 0;
    }
    json_t *o = json_loads(js, 0, NULL);
    td_free(js);
    printf("%s (%s)\n", json_string_value(json_object_get(o, "path")), json_string_value(json_object_get(o, "format")));
    printf("  architecture      %s, %lld layers", json_string_value(json_object_get(o, "architecture")),
           (long long)json_integer_value(json_object_get(o, "layers")));
    if (json_object_get(o, "deltanet_layers"))
        printf(" (%lld Gated DeltaNet)", (long long)json_integer_value(json_object_get(o, "deltanet_layers")));
    printf("\n  parameters        %lld\n", (long long)json_integer_value(json_object_get(o, "parameters")));
    int tied = json_is_true(json_object_get(o, "tied_embedding"));
    long long stored = json_integer_value(json_object_get(o, "embedding_tables_stored"));
    printf("  embedding         %s; the file stores %s table%s\n", tied ? "tied to the head" : "untied (separate head)",
           stored == 1 ? "one" : "two", stored == 1 ? "" : "s");
    printf("  head              %lld rows, %s; embedding %s\n", (long long)json_integer_value(json_object_get(o, "head_rows")),
           json_string_value(json_object_get(o, "head_dtype")), json_string_value(json_object_get(o, "embedding_dtype")));
    printf("  skipped tensors   %lld\n", (long long)json_integer_value(json_object_get(o, "skipped_tensors")));
    json_t *sm = json_object_get(o, "slot_map");
    if (json_is_object(sm)) {
        char *s = json_dumps(sm, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("  slot map          %s (decides only: cannot generate)\n", s);
        free(s);
    }
    printf("  tensors (%zu, %lld bytes):\n", json_array_size(json_object_get(o, "tensors")),
           (long long)json_integer_value(json_object_get(o, "tensor_bytes")));
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(o, "tensors"), i, t) {
        char shp[64] = "[";
        size_t k;
        json_t *d;
        json_array_foreach(json_object_get(t, "shape"), k, d) {
            size_t l = strlen(shp);
            snprintf(shp + l, sizeof shp - l, "%s%lld", k ? ", " : "", (long long)json_integer_value(d));
        }
        strncat(shp, "]", sizeof shp - strlen(shp) - 1);
        printf("    %-52s %-5s %-18s %12lld\n", json_string_value(json_object_get(t, "name")),
               json_string_value(json_object_get(t, "dtype")), shp, (long long)json_integer_value(json_object_get(t, "bytes")));
    }
    json_decref(o);
    return 0;
}
