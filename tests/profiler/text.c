/* text.c — CMocka tests of the inert-text helpers and the one JSON writer (profiler/text.c,
 * profiler/json.c): every escape, every cut, every misuse the writer must catch. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../profiler/profiler.h"

static void test_utf8_decode(void **state)
{
    (void)state;
    uint32_t c;
    assert_int_equal(prof_utf8_decode("A", 1, &c), 1);
    assert_int_equal(c, 'A');
    assert_int_equal(prof_utf8_decode("\xc3\xa9", 2, &c), 2);          /* é */
    assert_int_equal(c, 0xe9);
    assert_int_equal(prof_utf8_decode("\xe2\x80\xae", 3, &c), 3);      /* U+202E */
    assert_int_equal(c, 0x202e);
    assert_int_equal(prof_utf8_decode("\xf0\x9f\x98\x80", 4, &c), 4);  /* U+1F600 */
    assert_int_equal(c, 0x1f600);
    assert_int_equal(prof_utf8_decode("\xe9", 1, &c), 0);              /* Latin-1 é */
    assert_int_equal(prof_utf8_decode("\xc3\xa9", 1, &c), 0);          /* cut short */
    assert_int_equal(prof_utf8_decode("\xc0\xaf", 2, &c), 0);          /* overlong '/' */
    assert_int_equal(prof_utf8_decode("\xed\xa0\x80", 3, &c), 0);      /* surrogate */
    assert_int_equal(prof_utf8_decode("\xf4\x90\x80\x80", 4, &c), 0);  /* > U+10FFFF */
    assert_int_equal(prof_utf8_decode("\x80", 1, &c), 0);              /* lone continuation */
    assert_int_equal(prof_utf8_check("ab\xc3\xa9" "cd", 6), 6);
    assert_int_equal(prof_utf8_check("ab\xe9" "cd", 5), 2);
}

static void test_find_unsafe(void **state)
{
    (void)state;
    assert_null(prof_text_find_unsafe("plain name-1.0 caf\xc3\xa9 \xe4\xb8\xad"));
    const char *s = "ab\x1b]0;x\x07";
    assert_ptr_equal(prof_text_find_unsafe(s), s + 2);
    s = "ab\xe2\x80\xae" "cd";
    assert_ptr_equal(prof_text_find_unsafe(s), s + 2);
    s = "a\nb";
    assert_ptr_equal(prof_text_find_unsafe(s), s + 1);
    s = "a\xc2\x9b" "31m";                                            /* C1 CSI */
    assert_ptr_equal(prof_text_find_unsafe(s), s + 1);
    s = "Gr\xfc\xdf";                                                 /* Latin-1 */
    assert_ptr_equal(prof_text_find_unsafe(s), s + 2);
    assert_true(prof_text_is_hostile(0x7f));
    assert_true(prof_text_is_hostile(0x2066));
    assert_true(prof_text_is_hostile(0x2029));
    assert_false(prof_text_is_hostile(0xe9));
    assert_false(prof_text_is_hostile(' '));
}

static void test_visible(void **state)
{
    (void)state;
    char b[128];
    assert_string_equal(prof_text_visible(b, sizeof b, "\x1b]0;pwned\x07" "x\x1b[2J"),
                        "\\x1b]0;pwned\\x07x\\x1b[2J");
    assert_string_equal(prof_text_visible(b, sizeof b, "abc\xe2\x80\xae" "fed"), "abc\\u202efed");
    assert_string_equal(prof_text_visible(b, sizeof b, "a\nb\tc"), "a\\x0ab\\x09c");
    assert_string_equal(prof_text_visible(b, sizeof b, "caf\xc3\xa9 \xe9t\xe9"), "caf\xc3\xa9 \\xe9t\\xe9");
    assert_string_equal(prof_text_visible(b, sizeof b, "\xc2\x9b" "1m"), "\\u009b1m");
    assert_string_equal(prof_text_visible(b, sizeof b, NULL), "");
    prof_text_fit(b, sizeof b, "line 1\nline\t2\x1b", (size_t)-1, PROF_TEXT_KEEP_NL);
    assert_string_equal(b, "line 1\nline\t2\\x1b");
}

/* A cut never splits an escape or a UTF-8 sequence, whether by bytes or by characters. */
static void test_fit_cuts_whole(void **state)
{
    (void)state;
    char b[64];
    /* "ab\x1b" → "ab\\x1b": 6 characters; 5 allowed → the escape goes whole */
    assert_int_equal(prof_text_fit(b, sizeof b, "ab\x1b" "cd", 5, 0), 2);
    assert_string_equal(b, "ab");
    assert_int_equal(prof_text_fit(b, sizeof b, "ab\x1b" "cd", 6, 0), 6);
    assert_string_equal(b, "ab\\x1b");
    /* by bytes: cap 5 holds 4 bytes; "\xc3\xa9" would need 2 after "abc" */
    prof_text_fit(b, 5, "abc\xc3\xa9", (size_t)-1, 0);
    assert_string_equal(b, "abc");
    prof_text_fit(b, 6, "abc\xc3\xa9", (size_t)-1, 0);
    assert_string_equal(b, "abc\xc3\xa9");
    /* by characters: é counts one */
    assert_int_equal(prof_text_fit(b, sizeof b, "\xc3\xa9\xc3\xa9\xc3\xa9", 2, 0), 2);
    assert_string_equal(b, "\xc3\xa9\xc3\xa9");
    /* by cells: 中 (U+4E2D) and 🚀 (U+1F680) take two, and are never cut in half */
    assert_int_equal(prof_text_chars("\xc3\xa9\xe4\xb8\xad" "a\xff"), 5);
    assert_int_equal(prof_text_fit(b, sizeof b, "a\xe4\xb8\xad\xe4\xb8\xad", 4, 0), 3);
    assert_string_equal(b, "a\xe4\xb8\xad");
    assert_int_equal(prof_text_fit(b, sizeof b, "\xf0\x9f\x9a\x80x", 2, 0), 2);
    assert_string_equal(b, "\xf0\x9f\x9a\x80");
    assert_int_equal(prof_text_cell_width(0xff21), 2);   /* fullwidth A */
    assert_int_equal(prof_text_cell_width(0xe9), 1);
    /* text made visible before is cut whole as well */
    assert_int_equal(prof_text_fit(b, sizeof b, "ab\\u202ecd", 5, 0), 2);
    assert_string_equal(b, "ab");
    assert_int_equal(prof_text_fit(b, sizeof b, "ab\\u202ecd", 9, 0), 9);
    assert_string_equal(b, "ab\\u202ec");
    assert_int_equal(prof_text_fit(b, sizeof b, "a\\b\\x1", 9, 0), 6);   /* not escapes: plain text */
    /* every cut of a hostile string is valid UTF-8 with no raw control byte */
    const char *h = "\xe2\x80\xae\x1b[31m\xc3\xa9\xf0\x9f\x98\x80\xff";
    for (size_t cap = 1; cap < 40; cap++) {
        char c[40];
        prof_text_fit(c, cap, h, (size_t)-1, 0);
        assert_true(strlen(c) < cap);
        assert_null(prof_text_find_unsafe(c));
    }
}

static void test_pad(void **state)
{
    (void)state;
    char b[64];
    prof_text_pad(b, sizeof b, "\xc3\xa9t\xc3\xa9", 5, 0);
    assert_string_equal(b, "\xc3\xa9t\xc3\xa9  ");
    prof_text_pad(b, sizeof b, "ab", 4, PROF_TEXT_RIGHT);
    assert_string_equal(b, "  ab");
    prof_text_pad(b, sizeof b, "abcdef", 3, 0);
    assert_string_equal(b, "abc");
    prof_text_pad(b, sizeof b, "a\x1b" "b", 4, 0);          /* the escape does not fit in 4 */
    assert_string_equal(b, "a   ");
}

/* Runs fn on a writer over a memory stream; returns prof_json_end's result, text in out. */
static int json_out(void (*fn)(prof_json *), int pretty, char **out)
{
    size_t n;
    FILE *f = open_memstream(out, &n);
    assert_non_null(f);
    prof_json j;
    prof_json_begin(&j, f, pretty);
    fn(&j);
    int rc = prof_json_end(&j);
    fclose(f);
    return rc;
}

static void doc_strings(prof_json *j)
{
    prof_json_object(j);
    prof_json_kstr(j, "esc", "\x1b]0;t\x07");
    prof_json_kstr(j, "bidi", "a\xe2\x80\xae" "b");
    prof_json_kstr(j, "latin1", "caf\xe9");
    prof_json_kstr(j, "utf8", "caf\xc3\xa9 \xf0\x9f\x98\x80");
    prof_json_kstr(j, "quote", "\"\\\n\t\r/");
    prof_json_kstr(j, "null", NULL);
    prof_json_key(j, "n\xff");
    prof_json_strn(j, "abc", 2);
    prof_json_close(j);
}

static void test_json_strings(void **state)
{
    (void)state;
    char *s;
    assert_int_equal(json_out(doc_strings, 0, &s), 0);
    assert_string_equal(s, "{\"esc\":\"\\u001b]0;t\\u0007\",\"bidi\":\"a\\u202eb\",\"latin1\":\"caf\\ufffd\","
                           "\"utf8\":\"caf\xc3\xa9 \xf0\x9f\x98\x80\",\"quote\":\"\\\"\\\\\\n\\t\\r/\","
                           "\"null\":\"\",\"n\\ufffd\":\"ab\"}\n");
    free(s);
}

static void doc_values(prof_json *j)
{
    prof_json_object(j);
    prof_json_knum(j, "x", 0.1);
    prof_json_knum(j, "nan", NAN);
    prof_json_knum(j, "inf", -INFINITY);
    prof_json_key(j, "g");
    prof_json_numg(j, 3.14159, 3);
    prof_json_kint(j, "i", -42);
    prof_json_key(j, "u");
    prof_json_uint(j, 18446744073709551615ull);
    prof_json_key(j, "t");
    prof_json_bool(j, 1);
    prof_json_key(j, "z");
    prof_json_null(j);
    prof_json_key(j, "a");
    prof_json_array(j);
    prof_json_int(j, 1);
    prof_json_array(j);
    prof_json_close(j);
    prof_json_object(j);
    prof_json_close(j);
    prof_json_close(j);
    prof_json_close(j);
}

static void test_json_values(void **state)
{
    (void)state;
    char *s;
    assert_int_equal(json_out(doc_values, 0, &s), 0);
    assert_string_equal(s, "{\"x\":0.10000000000000001,\"nan\":null,\"inf\":null,\"g\":3.14,\"i\":-42,"
                           "\"u\":18446744073709551615,\"t\":true,\"z\":null,\"a\":[\n1,\n[],\n{}\n]}\n");
    free(s);
    assert_int_equal(json_out(doc_values, 1, &s), 0);
    assert_non_null(strstr(s, "{\n  \"x\": 0.10000000000000001,\n  \"nan\": null,"));
    assert_non_null(strstr(s, "\"a\": [\n    1,\n    [],\n    {}\n  ]\n}\n"));
    free(s);
}

static void misuse_value_without_key(prof_json *j) { prof_json_object(j); prof_json_int(j, 1); prof_json_close(j); }
static void misuse_unclosed(prof_json *j) { prof_json_array(j); prof_json_int(j, 1); }
static void misuse_extra_close(prof_json *j) { prof_json_array(j); prof_json_close(j); prof_json_close(j); }
static void misuse_key_in_array(prof_json *j) { prof_json_array(j); prof_json_key(j, "k"); prof_json_close(j); }
static void misuse_two_values(prof_json *j) { prof_json_int(j, 1); prof_json_int(j, 2); }
static void misuse_dangling_key(prof_json *j) { prof_json_object(j); prof_json_key(j, "k"); prof_json_close(j); }
static void misuse_nothing(prof_json *j) { (void)j; }
static void misuse_too_deep(prof_json *j)
{
    for (int i = 0; i <= PROF_JSON_MAX_DEPTH; i++) prof_json_array(j);
    for (int i = 0; i <= PROF_JSON_MAX_DEPTH; i++) prof_json_close(j);
}

static void test_json_misuse(void **state)
{
    (void)state;
    void (*bad[])(prof_json *) = { misuse_value_without_key, misuse_unclosed, misuse_extra_close,
                                   misuse_key_in_array, misuse_two_values, misuse_dangling_key,
                                   misuse_nothing, misuse_too_deep };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *s;
        assert_int_equal(json_out(bad[i], 0, &s), -1);
        free(s);
    }
}

int test_profiler_text(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_decode),
        cmocka_unit_test(test_find_unsafe),
        cmocka_unit_test(test_visible),
        cmocka_unit_test(test_fit_cuts_whole),
        cmocka_unit_test(test_pad),
        cmocka_unit_test(test_json_strings),
        cmocka_unit_test(test_json_values),
        cmocka_unit_test(test_json_misuse),
    };
    return cmocka_run_group_tests_name("profiler_text", tests, NULL, NULL);
}
