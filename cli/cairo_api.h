/* cairo for `--plot`, loaded with dlopen when the first plot is drawn rather than linked:
 * libcairo and what it pulls in (pixman, fontconfig, freetype, png, X11's client libraries) took
 * about 2.7 ms of every jitfit start, plots or not (`perf stat -r 30 jitfit version`: 6.65 ms
 * with it linked, 3.95 ms without; docs/PERFORMANCE.md). The types and prototypes still come from cairo's headers: each entry point below is
 * a pointer of its prototype's type, and the macros make plot.c's calls go through them.
 * Include this header instead of <cairo.h>.
 */
#ifndef JF_CLI_CAIRO_API_H
#define JF_CLI_CAIRO_API_H

#include <cairo-svg.h>
#include <cairo.h>
#include <stddef.h>

/* The entry points plot.c uses. */
#define JF_CAIRO_FUNCS(X) \
    X(cairo_arc) \
    X(cairo_clip) \
    X(cairo_create) \
    X(cairo_destroy) \
    X(cairo_fill) \
    X(cairo_fill_preserve) \
    X(cairo_image_surface_create) \
    X(cairo_line_to) \
    X(cairo_move_to) \
    X(cairo_new_sub_path) \
    X(cairo_paint) \
    X(cairo_rectangle) \
    X(cairo_restore) \
    X(cairo_rotate) \
    X(cairo_save) \
    X(cairo_select_font_face) \
    X(cairo_set_dash) \
    X(cairo_set_font_size) \
    X(cairo_set_line_width) \
    X(cairo_set_source_rgb) \
    X(cairo_show_text) \
    X(cairo_status) \
    X(cairo_status_to_string) \
    X(cairo_stroke) \
    X(cairo_surface_destroy) \
    X(cairo_surface_finish) \
    X(cairo_surface_status) \
    X(cairo_surface_write_to_png) \
    X(cairo_svg_surface_create) \
    X(cairo_text_extents) \
    X(cairo_translate) \
    X(cairo_version_string)

#define JF_CAIRO_DECLARE(name) extern __typeof__(name) *jf_p_##name;
JF_CAIRO_FUNCS(JF_CAIRO_DECLARE)
#undef JF_CAIRO_DECLARE

/* Loads libcairo.so.2 and resolves JF_CAIRO_FUNCS, once (thread-safe). 0, or -1 with the
 * reason in why ("cannot load libcairo.so.2: ...; install libcairo2"). */
int jf_cairo_load(char *why, size_t n);

#ifndef JF_CAIRO_NO_RENAME
#define cairo_arc (*jf_p_cairo_arc)
#define cairo_clip (*jf_p_cairo_clip)
#define cairo_create (*jf_p_cairo_create)
#define cairo_destroy (*jf_p_cairo_destroy)
#define cairo_fill (*jf_p_cairo_fill)
#define cairo_fill_preserve (*jf_p_cairo_fill_preserve)
#define cairo_image_surface_create (*jf_p_cairo_image_surface_create)
#define cairo_line_to (*jf_p_cairo_line_to)
#define cairo_move_to (*jf_p_cairo_move_to)
#define cairo_new_sub_path (*jf_p_cairo_new_sub_path)
#define cairo_paint (*jf_p_cairo_paint)
#define cairo_rectangle (*jf_p_cairo_rectangle)
#define cairo_restore (*jf_p_cairo_restore)
#define cairo_rotate (*jf_p_cairo_rotate)
#define cairo_save (*jf_p_cairo_save)
#define cairo_select_font_face (*jf_p_cairo_select_font_face)
#define cairo_set_dash (*jf_p_cairo_set_dash)
#define cairo_set_font_size (*jf_p_cairo_set_font_size)
#define cairo_set_line_width (*jf_p_cairo_set_line_width)
#define cairo_set_source_rgb (*jf_p_cairo_set_source_rgb)
#define cairo_show_text (*jf_p_cairo_show_text)
#define cairo_status (*jf_p_cairo_status)
#define cairo_status_to_string (*jf_p_cairo_status_to_string)
#define cairo_stroke (*jf_p_cairo_stroke)
#define cairo_surface_destroy (*jf_p_cairo_surface_destroy)
#define cairo_surface_finish (*jf_p_cairo_surface_finish)
#define cairo_surface_status (*jf_p_cairo_surface_status)
#define cairo_surface_write_to_png (*jf_p_cairo_surface_write_to_png)
#define cairo_svg_surface_create (*jf_p_cairo_svg_surface_create)
#define cairo_text_extents (*jf_p_cairo_text_extents)
#define cairo_translate (*jf_p_cairo_translate)
#define cairo_version_string (*jf_p_cairo_version_string)
#endif

#endif
