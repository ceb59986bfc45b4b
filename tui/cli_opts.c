/* cli_opts.c — the one option parser of the `nnbench` commands. Each command describes its
 * options once (a cli_spec over a struct of its own, listed in the command table) and
 * cli_parse reads argv by it: --help, values as `--opt V` or `--opt=V`, a missing value, an
 * unknown option with "did you mean", the positional arguments kept in order. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Optimal string alignment distance (Damerau-Levenshtein with adjacent transpositions). */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return (size_t)-1;
    size_t d[65][65];
    for (size_t i = 0; i <= la; i++) d[i][0] = i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

const char *cli_suggest(const char *word, const char *const *cands, size_t n)
{
    /* a typo: at most 1 edit for short words, 2 from 6 characters on; a unique prefix too */
    size_t len = strlen(word), limit = len >= 6 ? 2 : 1, best = (size_t)-1;
    const char *pick = NULL, *prefix = NULL;
    size_t n_prefix = 0;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, cands[i]);
        if (d < best) { best = d; pick = cands[i]; }
        if (len >= 3 && !strncmp(cands[i], word, len)) { prefix = cands[i]; n_prefix++; }
    }
    if (n_prefix == 1) return prefix;
    return pick && best <= limit ? pick : NULL;
}

int cli_value_error(const char *cmd, const char *opt, const char *got, const char *const *cands, size_t n)
{
    const char *s = cli_suggest(got, cands, n);
    fprintf(stderr, "nnbench %s: %s: unknown value '%s'", cmd, opt, got);
    if (s) fprintf(stderr, "; did you mean '%s'?", s);
    fprintf(stderr, " (one of:");
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %s", cands[i]);
    fprintf(stderr, ")\n");
    return 2;
}

static int takes_value(const cli_opt *o) { return o->kind == CLI_VALUE || o->kind == CLI_CALL; }

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "nnbench %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see nnbench %s --help)\n", cmd);
    va_end(ap);
    return 2;
}

/* "unknown option", with the spec's closest option when it looks like a typo of one. */
static int unknown_option(const cli_spec *sp, const char *opt)
{
    const char *names[2 * CLI_MAX_OPTS + 1];
    size_t n = 0;
    names[n++] = "--help";
    for (size_t i = 0; i < sp->n_opts && n + 2 <= sizeof names / sizeof names[0]; i++) {
        names[n++] = sp->opts[i].name;
        if (sp->opts[i].alias) names[n++] = sp->opts[i].alias;
    }
    /* "--profil=x" is judged by its name */
    char name[128];
    snprintf(name, sizeof name, "%s", opt);
    char *eq = strchr(name, '=');
    if (eq) *eq = 0;
    const char *s = cli_suggest(name, names, n);
    if (s) fprintf(stderr, "nnbench %s: unknown option '%s'; did you mean '%s'? (see nnbench %s --help)\n",
                   sp->cmd, opt, s, sp->cmd);
    else fprintf(stderr, "nnbench %s: unknown option '%s' (see nnbench %s --help)\n", sp->cmd, opt, sp->cmd);
    return 2;
}

/* The option argv[i] names ("--opt" or its alias, "--opt=V" or "-o=V" for one taking a
 * value), with the inline value in *inl (NULL when none); NULL when it is none of the spec's. */
static const cli_opt *find(const cli_spec *sp, const char *a, const char **inl)
{
    *inl = NULL;
    for (size_t k = 0; k < sp->n_opts; k++) {
        const cli_opt *o = &sp->opts[k];
        if (!strcmp(a, o->name) || (o->alias && !strcmp(a, o->alias))) return o;
        for (int n = 0; n < 2 && takes_value(o) && o->nvals <= 1; n++) {
            const char *nm = n ? o->alias : o->name;
            size_t l = nm ? strlen(nm) : 0;
            if (l && !strncmp(a, nm, l) && a[l] == '=') { *inl = a + l + 1; return o; }
        }
    }
    return NULL;
}

int cli_parse(const cli_spec *sp, void *opts, int argc, char **argv, int *n_pos)
{
    int np = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { sp->help(stdout); return 0; }
        const char *inl;
        const cli_opt *o = a[0] == '-' && a[1] ? find(sp, a, &inl) : NULL;
        if (!o) {
            if (a[0] == '-' && a[1]) return unknown_option(sp, a);
            argv[1 + np++] = a; /* never past i: the positionals move to the front in order */
            continue;
        }
        if (o->kind == CLI_FLAG) { *(int *)((char *)opts + o->off) = 1; continue; }
        if (o->kind == CLI_ACTION) { o->act(); return 0; }
        int nv = o->nvals ? o->nvals : 1;
        char *vals[2] = { (char *)inl, NULL };
        if (!inl) {
            if (i + nv >= argc) {
                fprintf(stderr, "nnbench %s: %s needs %s (see nnbench %s --help)\n", sp->cmd, a,
                        nv == 1 ? "a value" : "two values", sp->cmd);
                return 2;
            }
            for (int v = 0; v < nv; v++) vals[v] = argv[++i];
        }
        if (o->kind == CLI_VALUE) *(const char **)((char *)opts + o->off) = vals[0];
        else if (o->call(opts, sp->cmd, o->name, vals)) return 2;
    }
    *n_pos = np;
    return -1;
}

int cli_option_at(const cli_spec *sp, int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++) {
        const char *inl;
        const cli_opt *o = argv[i][0] == '-' ? find(sp, argv[i], &inl) : NULL;
        if (!o) continue;
        if (!strcmp(o->name, name)) return i;
        if (takes_value(o) && !inl) i += o->nvals ? o->nvals : 1;
    }
    return -1;
}
