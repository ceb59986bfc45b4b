/* json.c — the one JSON writer of nnbench (run summaries, reports, traces, sysinfo): a
 * streaming writer that places commas itself, escapes every string and never writes
 * invalid UTF-8 (a bad byte becomes U+FFFD), so no caller can emit broken JSON. */
#include "profiler.h"

#include <math.h>
#include <string.h>

void prof_json_begin(prof_json *j, FILE *f, int pretty)
{
    memset(j, 0, sizeof *j);
    j->f = f;
    j->pretty = pretty;
}

static void indent(prof_json *j)
{
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
}

/* Separator and layout before a value (or a key, inside an object). */
static void before(prof_json *j, int is_key)
{
    if (j->depth == 0) {
        if (j->done) j->bad = 1;   /* a second top-level value */
        return;
    }
    int obj = j->is_obj[j->depth - 1];
    if (obj && !is_key && !j->after_key) { j->bad = 1; }   /* object member without a key */
    if (obj && is_key && j->after_key) { j->bad = 1; }     /* two keys in a row */
    if (j->after_key) { j->after_key = 0; return; }
    if (j->count[j->depth - 1]++) fputc(',', j->f);
    if (j->pretty) indent(j);
    else if (!obj && j->depth <= 2) fputc('\n', j->f);    /* one array element per line */
}

static void after_value(prof_json *j)
{
    if (j->depth == 0) {
        j->done = 1;
        if (j->pretty) fputc('\n', j->f);
    }
}

static void open_(prof_json *j, int obj)
{
    before(j, 0);
    if (j->depth == PROF_JSON_MAX_DEPTH) { j->bad = 1; return; }
    fputc(obj ? '{' : '[', j->f);
    j->is_obj[j->depth] = (unsigned char)obj;
    j->count[j->depth] = 0;
    j->depth++;
}

void prof_json_object(prof_json *j) { open_(j, 1); }
void prof_json_array(prof_json *j) { open_(j, 0); }

void prof_json_close(prof_json *j)
{
    if (j->depth == 0 || j->after_key) { j->bad = 1; return; }
    j->depth--;
    if (j->pretty && j->count[j->depth]) indent(j);
    else if (!j->pretty && !j->is_obj[j->depth] && j->depth <= 1 && j->count[j->depth])
        fputc('\n', j->f);                                  /* "...}\n]": the last element's line ends */
    fputc(j->is_obj[j->depth] ? '}' : ']', j->f);
    after_value(j);
}

static void put_string(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    size_t i = 0;
    while (i < n) {
        uint32_t c;
        size_t l = prof_utf8_decode(s + i, n - i, &c);
        if (!l) { fputs("\\ufffd", f); i++; continue; }   /* never invalid UTF-8 in JSON */
        if (c == '"' || c == '\\') { fputc('\\', f); fputc((int)c, f); }
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (prof_text_is_hostile(c)) fprintf(f, "\\u%04x", (unsigned)c); /* inert when cat'ed */
        else fwrite(s + i, 1, l, f);
        i += l;
    }
    fputc('"', f);
}

void prof_json_key(prof_json *j, const char *k)
{
    if (j->depth == 0 || !j->is_obj[j->depth - 1]) { j->bad = 1; return; }
    before(j, 1);
    put_string(j->f, k, strlen(k));
    fputs(j->pretty ? ": " : ":", j->f);
    j->after_key = 1;
}

void prof_json_strn(prof_json *j, const char *s, size_t n)
{
    before(j, 0);
    put_string(j->f, s ? s : "", s ? n : 0);
    after_value(j);
}

void prof_json_str(prof_json *j, const char *s) { prof_json_strn(j, s, s ? strlen(s) : 0); }

void prof_json_numg(prof_json *j, double v, int digits)
{
    before(j, 0);
    if (isfinite(v)) fprintf(j->f, "%.*g", digits, v);
    else fputs("null", j->f);            /* JSON has no NaN or Infinity */
    after_value(j);
}

void prof_json_num(prof_json *j, double v) { prof_json_numg(j, v, 17); }

void prof_json_int(prof_json *j, long long v)
{
    before(j, 0);
    fprintf(j->f, "%lld", v);
    after_value(j);
}

void prof_json_uint(prof_json *j, unsigned long long v)
{
    before(j, 0);
    fprintf(j->f, "%llu", v);
    after_value(j);
}

void prof_json_bool(prof_json *j, int v)
{
    before(j, 0);
    fputs(v ? "true" : "false", j->f);
    after_value(j);
}

void prof_json_null(prof_json *j)
{
    before(j, 0);
    fputs("null", j->f);
    after_value(j);
}

void prof_json_kstr(prof_json *j, const char *k, const char *s) { prof_json_key(j, k); prof_json_str(j, s); }
void prof_json_knum(prof_json *j, const char *k, double v) { prof_json_key(j, k); prof_json_num(j, v); }
void prof_json_kint(prof_json *j, const char *k, long long v) { prof_json_key(j, k); prof_json_int(j, v); }

int prof_json_end(prof_json *j)
{
    if (!j->pretty && j->done) fputc('\n', j->f);
    return j->bad || j->depth || !j->done || ferror(j->f) ? -1 : 0;
}
