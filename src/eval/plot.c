/* SVG report: a reliability diagram (per ECE bin: accuracy against mean confidence, bar width = bin, with the
 * diagonal of perfect calibration and the row count on each bar) beside per-family balanced accuracy bars. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "typedecide_eval.h"
#include "util/error.h"
#include "util/json.h"
#include "util/strbuf.h"

typedef td_strbuf out;

static void emit(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    td_strbuf_vprintf(o, fmt, ap);
    va_end(ap);
}

/* Text with the five XML special characters escaped. */
static void emit_text(out *o, const char *t) {
    for (; *t; t++) {
        switch (*t) {
        case '<': emit(o, "&lt;"); break;
        case '>': emit(o, "&gt;"); break;
        case '&': emit(o, "&amp;"); break;
        case '"': emit(o, "&quot;"); break;
        case '\'': emit(o, "&apos;"); break;
        default: emit(o, "%c", *t);
        }
    }
}

td_status td_plot_svg(const char *metrics_json, const char *title, char **svg) {
    if (!metrics_json || !svg) return td_fail(TD_ERR_INVALID_ARG, "td_plot_svg: NULL argument");
    *svg = NULL;
    json_error_t e;
    int oom;
    json_t *m = td_json_loadb(metrics_json, strlen(metrics_json), 0, &e, &oom);
    if (!m && oom) return td_fail_nomem("the metrics");
    if (!m) return td_fail(TD_ERR_FORMAT, "metrics JSON:%d:%d: %s", e.line, e.column, e.text);
    json_t *bins = json_object_get(m, "ece_bins"), *fam = json_object_get(m, "family_balanced_accuracy");
    size_t nb = json_array_size(bins), nf = json_object_size(fam);
    const double W = 460, X0 = 60, Y0 = 50, PW = 340, PH = 260; /* reliability panel */
    double fw = 420, fh_row = 22, fx0 = W + 170;
    double height = Y0 + PH + 80;
    if (Y0 + 30 + nf * fh_row + 40 > height) height = Y0 + 30 + (double)nf * fh_row + 40;
    out o = TD_STRBUF_INIT;
    td_strbuf_reserve(&o, 8192); /* a report is ~10 KB */
    emit(&o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
         W + fw + 60, height);
    emit(&o, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"20\" y=\"24\" font-size=\"15\" font-weight=\"bold\">");
    emit_text(&o, title ? title : "typedecide evaluation");
    emit(&o, "</text>\n");
    json_t *acc = json_object_get(m, "accuracy"), *ece = json_object_get(m, "ece"), *br = json_object_get(m, "brier");
    emit(&o, "<text x=\"20\" y=\"42\" fill=\"#444\">accuracy %.3f, ECE %.3f, Brier %.3f, N = %lld</text>\n",
         json_number_value(acc), json_number_value(ece), json_number_value(br),
         (long long)json_integer_value(json_object_get(m, "n")));
    /* reliability diagram */
    emit(&o, "<g transform=\"translate(%.0f,%.0f)\">\n", X0, Y0 + 10);
    emit(&o, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#999\"/>\n", PW, PH);
    for (int t = 0; t <= 5; t++) {
        double v = t / 5.0;
        emit(&o, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#444\">%.1f</text>\n", v * PW, PH + 16, v);
        emit(&o, "<text x=\"-6\" y=\"%.1f\" text-anchor=\"end\" fill=\"#444\">%.1f</text>\n", PH - v * PH + 4, v);
    }
    for (size_t b = 0; b < nb; b++) {
        json_t *bin = json_array_get(bins, b);
        long long n = json_integer_value(json_object_get(bin, "n"));
        if (!n) continue;
        double a = json_number_value(json_object_get(bin, "accuracy"));
        double c = json_number_value(json_object_get(bin, "confidence"));
        double x = (double)b / (double)nb * PW, w = PW / (double)nb;
        emit(&o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#4a78b5\" opacity=\"0.85\"/>\n", x + 1,
             PH - a * PH, w - 2, a * PH);
        emit(&o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#d1495b\"/>\n", c * PW, PH - c * PH);
        emit(&o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"9\" fill=\"#222\">%lld</text>\n",
             x + w / 2, PH - a * PH - 3, n);
    }
    emit(&o, "<line x1=\"0\" y1=\"%.0f\" x2=\"%.0f\" y2=\"0\" stroke=\"#888\" stroke-dasharray=\"4 3\"/>\n", PH, PW);
    emit(&o, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">confidence (max probability)</text>\n", PW / 2, PH + 34);
    emit(&o, "<text transform=\"rotate(-90)\" x=\"%.0f\" y=\"-38\" text-anchor=\"middle\">accuracy</text>\n", -PH / 2);
    emit(&o, "<text x=\"0\" y=\"%.0f\" fill=\"#444\">bars: accuracy per bin (count above); dots: mean confidence</text>\n",
         PH + 52);
    emit(&o, "</g>\n");
    /* per-family balanced accuracy */
    emit(&o, "<g transform=\"translate(%.0f,%.0f)\">\n<text x=\"0\" y=\"0\" font-weight=\"bold\">balanced accuracy by family</text>\n",
         fx0, Y0 + 10);
    const char *key;
    json_t *v;
    int row = 0;
    json_object_foreach(fam, key, v) {
        double a = json_number_value(v), y = 14 + row * fh_row;
        emit(&o, "<text x=\"-6\" y=\"%.1f\" text-anchor=\"end\">", y + 13);
        emit_text(&o, key);
        emit(&o, "</text>\n<rect x=\"0\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#7aa95c\"/>\n", y + 2, a * (fw - 120),
             fh_row - 6);
        emit(&o, "<text x=\"%.1f\" y=\"%.1f\">%.3f</text>\n", a * (fw - 120) + 4, y + 13, a);
        row++;
    }
    double y_axis = 14 + row * fh_row + 4;
    emit(&o, "<line x1=\"0\" y1=\"10\" x2=\"0\" y2=\"%.1f\" stroke=\"#999\"/>\n", y_axis);
    emit(&o, "<line x1=\"%.1f\" y1=\"10\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ccc\" stroke-dasharray=\"3 3\"/>\n", fw - 120,
         fw - 120, y_axis);
    emit(&o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#444\">1.0</text>\n</g>\n</svg>\n", fw - 120,
         y_axis + 14 < height - Y0 ? y_axis + 14 : height - Y0);
    json_decref(m);
    *svg = td_strbuf_finish(&o, NULL);
    return *svg ? TD_OK : td_fail_nomem("the plot");
}
