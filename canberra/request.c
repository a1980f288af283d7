/* What a play or a ca_context_cache asks of cued: libcanberra's properties made one request
 * line of protocol v1 (cued-wire.h's limits, label rule and path encoding). Pure but for
 * reading the property lists (under their own locks) and, for a relative path, getcwd. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"

/* A copy of a property list (libcanberra has no copy; a merge with an empty list is one). */
ca_proplist *copy_props(ca_proplist *src) {
        ca_proplist *empty = NULL, *copy = NULL;
        if (!src || ca_proplist_create(&empty) < 0)
                return NULL;
        if (ca_proplist_merge(&copy, empty, src) < 0)
                copy = NULL;
        ca_proplist_destroy(empty);
        return copy;
}

/* cued's labels (cued-wire.h): letters, digits, . _ -; 1 to 64 bytes; not . or .. */
static bool is_label(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > CUED_LABEL_BYTES || cued_label_refused(s))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!cued_label_byte((unsigned char) s[i]))
                        return false;
        return true;
}

/* An app name made a label as cuectl makes $CUED_APP one: "GNOME Shell" → "GNOME-Shell". */
static bool to_label(const char *s, char out[CUED_LABEL_BYTES + 1]) {
        size_t n = 0;
        for (; s[n] && n < CUED_LABEL_BYTES; n++)
                out[n] = cued_label_byte((unsigned char) s[n]) ? s[n] : '-';
        out[n] = 0;
        return is_label(out);
}

static bool utf8_valid(const unsigned char *s) {
        while (*s) {
                unsigned char b = *s;
                int extra = b < 0x80 ? 0 : (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : (b & 0xF8) == 0xF0 ? 3 : -1;
                if (extra < 0 || (extra == 1 && b < 0xC2) || (b == 0xF4 && (s[1] & 0xF0) != 0x80) || b > 0xF4)
                        return false;
                uint32_t cp = extra == 0 ? b : b & (0x3F >> extra);
                for (int i = 1; i <= extra; i++) {
                        if ((s[i] & 0xC0) != 0x80)
                                return false;
                        cp = (cp << 6) | (s[i] & 0x3F);
                }
                if ((extra == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (extra == 3 && cp < 0x10000))
                        return false;
                s += extra + 1;
        }
        return true;
}

/* canberra.volume: dB as a decimal ("-6", "3.5"; a comma too, as printf writes it in
 * some locales), clamped to cued's -60…12, in hundredths. No strtod: it follows the
 * host's locale. */
static bool parse_volume(const char *s, long *centi) {
        bool neg = false, digits = false;
        long whole = 0, frac = 0, scale = 10;
        if (*s == '-' || *s == '+')
                neg = *s++ == '-';
        for (; *s >= '0' && *s <= '9'; s++) {
                digits = true;
                if (whole < 100000)
                        whole = whole * 10 + (*s - '0');
        }
        if (*s == '.' || *s == ',')
                for (s++; *s >= '0' && *s <= '9'; s++) {
                        digits = true;
                        if (scale > 0)
                                frac += (*s - '0') * scale;
                        scale /= 10;
                }
        if (!digits || *s)
                return false;
        long v = whole * 100 + frac;
        if (neg)
                v = -v;
        *centi = v < CUED_GAIN_MIN_DB * 100 ? CUED_GAIN_MIN_DB * 100 : v > CUED_GAIN_MAX_DB * 100 ? CUED_GAIN_MAX_DB * 100 : v;
        return true;
}



void put(struct line *l, const char *s) {
        size_t k = strlen(s);
        if (l->over || l->n + k > CUED_LINE_BYTES) {
                l->over = true;
                return;
        }
        memcpy(l->s + l->n, s, k);
        l->n += k;
        l->s[l->n] = 0;
}

/* A play-file path as one word: a space, %, a control byte or DEL as %XX (cued-wire.h). */
static void put_path(struct line *l, const char *path) {
        static const char hex[] = "0123456789ABCDEF";
        for (const unsigned char *b = (const unsigned char *) path; *b; b++) {
                char one[4] = { (char) *b, 0, 0, 0 };
                if (cued_path_escaped(*b)) {
                        one[0] = '%';
                        one[1] = hex[*b >> 4];
                        one[2] = hex[*b & 15];
                }
                put(l, one);
        }
}

static void put_gain(struct line *l, long centi) {
        char g[24];
        long a = centi < 0 ? -centi : centi;
        if (centi == 0)
                return;
        if (a % 100)
                snprintf(g, sizeof g, " %s%ld.%02ld", centi < 0 ? "-" : "", a / 100, a % 100);
        else
                snprintf(g, sizeof g, " %s%ld", centi < 0 ? "-" : "", a / 100);
        put(l, g);
}

/* A property as a string: the play's, else the context's. 1 found (copied into
 * `out`), 0 absent (or binary), -1 longer than `cap`. */
static int prop(ca_proplist *play, ca_proplist *ctx, const char *key, char *out, size_t cap) {
        ca_proplist *lists[2] = { play, ctx };
        for (int i = 0; i < 2; i++) {
                if (!lists[i])
                        continue;
                ca_mutex_lock(lists[i]->mutex);
                const char *v = ca_proplist_gets_unlocked(lists[i], key);
                int r = 0;
                if (v) {
                        size_t n = strnlen(v, cap);
                        r = n < cap ? 1 : -1;
                        if (r == 1)
                                memcpy(out, v, n + 1);
                }
                ca_mutex_unlock(lists[i]->mutex);
                if (r)
                        return r;
        }
        return 0;
}

/* The app a play counts under: application.name, else .id, else the process's name. */
void app_of(ca_proplist *play, ca_proplist *ctx, char out[CUED_LABEL_BYTES + 1]) {
        char v[256];
        if (prop(play, ctx, CA_PROP_APPLICATION_NAME, v, sizeof v) == 1 && to_label(v, out))
                return;
        if (prop(play, ctx, CA_PROP_APPLICATION_ID, v, sizeof v) == 1 && to_label(v, out))
                return;
        if (to_label(program_invocation_short_name, out))
                return;
        strcpy(out, "libcanberra");
}

/* ` theme=NAME[:PROFILE]` from the xdg-theme properties: per request, as libcanberra
 * looks a sound up. A profile alone names libcanberra's default theme. */
static void put_theme(struct line *l, ca_proplist *play, ca_proplist *ctx) {
        char name[CUED_LABEL_BYTES + 2] = "", profile[CUED_LABEL_BYTES + 2] = "";
        bool has_name = prop(play, ctx, CA_PROP_CANBERRA_XDG_THEME_NAME, name, sizeof name) == 1 && is_label(name);
        bool has_profile = prop(play, ctx, CA_PROP_CANBERRA_XDG_THEME_OUTPUT_PROFILE, profile, sizeof profile) == 1 && is_label(profile);
        if (!has_name && !has_profile)
                return;
        put(l, " theme=");
        put(l, has_name ? name : "freedesktop");
        if (has_profile) {
                put(l, ":");
                put(l, profile);
        }
}

static int file_line(struct line *l, const char *file, long centi) {
        char abs[PROP_BYTES + 2];
        if (file[0] != '/') {
                /* libcanberra opens a relative path from the working directory */
                if (!getcwd(abs, sizeof abs) || strlen(abs) + 1 + strlen(file) >= sizeof abs)
                        return FALLBACK_ONLY;
                strcat(abs, "/");
                strcat(abs, file);
                file = abs;
        }
        if (!utf8_valid((const unsigned char *) file))
                return FALLBACK_ONLY;   /* cued takes UTF-8 paths; the fallback opens any */
        put(l, "play-file ");
        put_path(l, file);
        put_gain(l, centi);
        put(l, " id");
        return l->over ? FALLBACK_ONLY : SEND;   /* too long for a line: the fallback plays it */
}

/* Builds the request for a play (`cache` false) or a ca_context_cache. Returns SEND,
 * FALLBACK_ONLY (the fallback plays it), or a canberra error. */
int describe(ca_proplist *play, ca_proplist *ctx, bool cache, struct request *r) {
        char event[256], file[PROP_BYTES], vol[32];
        int has_event = prop(play, ctx, CA_PROP_EVENT_ID, event, sizeof event);
        int has_file = cache ? 0 : prop(play, ctx, CA_PROP_MEDIA_FILENAME, file, sizeof file);
        long centi = 0;
        int v = cache ? 0 : prop(play, ctx, CA_PROP_CANBERRA_VOLUME, vol, sizeof vol);

        memset(r, 0, sizeof *r);
        app_of(play, ctx, r->app);
        if (v < 0 || (v == 1 && !parse_volume(vol, &centi)))
                return CA_ERROR_INVALID;
        if (has_file < 0)
                return FALLBACK_ONLY;   /* a path longer than any line: the fallback plays it */
        bool event_ok = has_event == 1 && is_label(event);
        if (event_ok) {
                put(&r->line, cache ? "preload " : "play ");
                put(&r->line, event);
                put_gain(&r->line, centi);
                if (!cache)
                        put(&r->line, " id");
                put_theme(&r->line, play, ctx);
                if (r->line.over)
                        return CA_ERROR_TOOBIG;
                if (has_file == 1) {
                        /* libcanberra's order: the theme's sound, else the file */
                        if (file_line(&r->retry, file, centi) != SEND)
                                return FALLBACK_ONLY;
                        r->has_retry = true;
                }
                return SEND;
        }
        if (cache)
                return has_event ? CA_ERROR_NOTFOUND : CA_ERROR_INVALID;
        if (has_file == 1)
                return file_line(&r->line, file, centi);
        /* An event id cued cannot name (not a label): no theme has it. */
        return has_event ? CA_ERROR_NOTFOUND : CA_ERROR_INVALID;
}

