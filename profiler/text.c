/* text.c — text from outside (names, config values, paths, database rows) made inert
 * before it reaches a terminal, the workbench or a report: UTF-8 validation, control and
 * bidirectional characters written visibly (\x1b, \u202e), cutting that never splits one.
 * Here, at the bottom layer, because profiler/, engine/, store/ and tui/ all need it. */
#include "profiler.h"

#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

size_t prof_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *p = (const unsigned char *)s;
    if (!n) return 0;
    uint32_t c = p[0];
    size_t len;
    uint32_t min;
    if (c < 0x80) { if (cp) *cp = c; return 1; }
    if (c >= 0xc2 && c <= 0xdf) { len = 2; c &= 0x1f; min = 0x80; }
    else if (c >= 0xe0 && c <= 0xef) { len = 3; c &= 0x0f; min = 0x800; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; c &= 0x07; min = 0x10000; }
    else return 0;                       /* continuation byte, overlong lead, > U+10FFFF */
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        c = (c << 6) | (p[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    if (cp) *cp = c;
    return len;
}

size_t prof_utf8_check(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t l = prof_utf8_decode(s + i, n - i, NULL);
        if (!l) return i;
        i += l;
    }
    return n;
}

int prof_text_is_hostile(uint32_t c)
{
    return c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f)          /* C0, DEL, C1 */
        || c == 0x061c || c == 0x200e || c == 0x200f                   /* bidi marks */
        || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) /* embeddings, isolates */
        || c == 0x2028 || c == 0x2029;                                 /* line, paragraph separators */
}

const char *prof_text_find_unsafe(const char *s)
{
    size_t n = strlen(s), i = 0;
    while (i < n) {
        uint32_t c;
        size_t l = prof_utf8_decode(s + i, n - i, &c);
        if (!l || prof_text_is_hostile(c)) return s + i;
        i += l;
    }
    return NULL;
}

int prof_text_cell_width(uint32_t c)
{
    /* East Asian Wide and Fullwidth ranges and the emoji blocks terminals draw two cells
     * wide (after Markus Kuhn's wcwidth); everything else counts one, so a width is never
     * underestimated (combining marks count one: a line may come out a cell short, never
     * long). Here, not wcwidth(3): the answer must not depend on the locale. */
    static const uint32_t wide[][2] = {
        { 0x1100, 0x115f }, { 0x2329, 0x232a }, { 0x2e80, 0x303e }, { 0x3040, 0xa4cf }, { 0xac00, 0xd7a3 },
        { 0xf900, 0xfaff }, { 0xfe10, 0xfe19 }, { 0xfe30, 0xfe6f }, { 0xff00, 0xff60 }, { 0xffe0, 0xffe6 },
        { 0x1f300, 0x1f64f }, { 0x1f680, 0x1f6ff }, { 0x1f900, 0x1f9ff }, { 0x1fa70, 0x1faff },
        { 0x20000, 0x2fffd }, { 0x30000, 0x3fffd } };
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
        if (c >= wide[i][0] && c <= wide[i][1]) return 2;
    return 1;
}

/* The visible form of one character: itself, or \xHH / \uHHHH; 0 = keep the bytes. */
static int escape_of(uint32_t c, size_t len, int invalid, int flags, char *out)
{
    if (invalid) return snprintf(out, 8, "\\x%02x", c & 0xff);
    if (!prof_text_is_hostile(c)) return 0;
    if ((flags & PROF_TEXT_KEEP_NL) && (c == '\n' || c == '\t')) return 0;
    if (c < 0x80 || len == 1) return snprintf(out, 8, "\\x%02x", c);
    return snprintf(out, 8, "\\u%04x", (unsigned)c);
}

static int hexdig(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* Length of an escape this file writes (\xHH, \uHHHH) at s, else 0. */
static size_t visible_escape(const char *s, size_t n)
{
    if (n < 4 || s[0] != '\\') return 0;
    if (s[1] == 'x' && hexdig(s[2]) && hexdig(s[3])) return 4;
    if (n >= 6 && s[1] == 'u' && hexdig(s[2]) && hexdig(s[3]) && hexdig(s[4]) && hexdig(s[5])) return 6;
    return 0;
}

size_t prof_text_fit(char *dst, size_t cap, const char *src, size_t max_chars, int flags)
{
    size_t o = 0, chars = 0, n = src ? strlen(src) : 0, i = 0;
    if (!cap) return 0;
    while (i < n && chars < max_chars) {
        uint32_t c = (unsigned char)src[i];
        size_t l = prof_utf8_decode(src + i, n - i, &c);
        int invalid = l == 0;
        if (invalid) { l = 1; c = (unsigned char)src[i]; }
        char esc[8];
        int e = escape_of(c, l, invalid, flags, esc);
        const char *piece = e ? esc : src + i;
        size_t plen = e ? (size_t)e : l, pchars = e ? (size_t)e : (size_t)prof_text_cell_width(c);
        size_t vis = e ? 0 : visible_escape(src + i, n - i);
        if (vis) plen = pchars = l = vis;   /* text made visible before: cut it whole too */
        if (o + plen >= cap || chars + pchars > max_chars) break; /* never half a piece */
        memcpy(dst + o, piece, plen);
        o += plen;
        chars += pchars;
        i += l;
    }
    dst[o] = '\0';
    return chars;
}

const char *prof_text_visible(char *dst, size_t cap, const char *src)
{
    prof_text_fit(dst, cap, src, (size_t)-1, 0);
    return dst;
}

size_t prof_text_chars(const char *s)
{
    size_t n = strlen(s), i = 0, cells = 0;
    while (i < n) {
        uint32_t c;
        size_t l = prof_utf8_decode(s + i, n - i, &c);
        i += l ? l : 1;
        cells += l ? (size_t)prof_text_cell_width(c) : 1;
    }
    return cells;
}

int prof_text_pad(char *dst, size_t cap, const char *src, size_t width, int flags)
{
    char tmp[1024];
    size_t chars = prof_text_fit(tmp, sizeof tmp < cap ? sizeof tmp : cap, src, width, flags);
    size_t pad = width > chars ? width - chars : 0, len = strlen(tmp);
    if (len + pad + 1 > cap) pad = cap - len - 1;
    size_t at = (flags & PROF_TEXT_RIGHT) ? pad : 0;
    memset(dst, ' ', len + pad);
    memcpy(dst + at, tmp, len);
    dst[len + pad] = '\0';
    return (int)(len + pad);
}

size_t prof_text_columns(FILE *f)
{
    int fd = fileno(f);
    struct winsize ws;
    if (fd < 0 || !isatty(fd) || ioctl(fd, TIOCGWINSZ, &ws) || ws.ws_col == 0) return 0;
    return ws.ws_col;
}
