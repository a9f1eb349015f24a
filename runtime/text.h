/* Text from users shown safely: UTF-8 recognition and the replacement of bytes that would act
 * on a terminal (C0 and C1 controls, DEL) in messages that quote a model, a data file or a job
 * file.
 */
#ifndef JF_TEXT_H
#define JF_TEXT_H

#include <stddef.h>

#include "common.h"

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong forms, surrogates or
 * code points above U+10FFFF; p must hold a NUL-terminated string or at least 4 bytes), 0 when
 * there is none. */
JF_INTERNAL size_t jf_utf8_len(const unsigned char *p);
/* Columns the n bytes at s take on a terminal: one per UTF-8 character (East Asian wide ones
 * excepted) and one per byte outside a sequence. A sequence that starts before n is read whole,
 * so s must be NUL-terminated (a NUL ends any sequence). */
JF_INTERNAL size_t jf_text_columns(const char *s, size_t n);

/* Replaces, in the n bytes at s (fewer when a NUL comes first; nothing past them is read, so s
 * need not be NUL-terminated), every byte a terminal could act on with '?': C0 controls (tabs too unless keep_tabs), DEL, the C1 controls U+0080..U+009F
 * written in UTF-8, and bytes 0x80..0x9f outside a UTF-8 sequence (C1 controls on a terminal
 * in an 8-bit mode). Other text, UTF-8 or not, is kept byte for byte, so lengths and columns
 * do not move. */
JF_INTERNAL void jf_text_printable(char *s, size_t n, int keep_tabs);

#endif
