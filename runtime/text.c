/* Text from users shown safely (text.h). */
#include "text.h"

#include <string.h>

size_t jf_utf8_len(const unsigned char *p) {
    size_t len = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 0;
    if (!len || p[0] > 0xf4 || p[0] == 0xc0 || p[0] == 0xc1) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return len;
}

size_t jf_text_columns(const char *s, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < n; w++) {
        size_t k = jf_utf8_len((const unsigned char *)s + i);
        i += k > 1 ? k : 1;
    }
    return w;
}

void jf_text_printable(char *s, size_t n, int keep_tabs) {
    unsigned char *p = (unsigned char *)s;
    size_t i = 0;
    while (i < n && p[i]) {
        unsigned char c = p[i];
        if (c < 0x80) {
            if ((c < 0x20 && !(keep_tabs && c == '\t')) || c == 0x7f) p[i] = '?';
            i++;
            continue;
        }
        /* A sequence cut by n is not recognized: its bytes are judged one by one. Near the
         * end, jf_utf8_len reads a copy: s need not hold a NUL after its n bytes. */
        unsigned char tail[5] = {0};
        const unsigned char *at = p + i;
        if (n - i < 4) {
            memcpy(tail, p + i, n - i);
            at = tail;
        }
        size_t len = jf_utf8_len(at);
        if (len) {
            if (c == 0xc2 && p[i + 1] < 0xa0) p[i] = p[i + 1] = '?'; /* U+0080..U+009F */
            i += len;
            continue;
        }
        if (c < 0xa0) p[i] = '?';
        i++;
    }
}
